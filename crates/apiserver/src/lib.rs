//! The embedded, kubectl-compatible Kubernetes API server with a durable local store.
//!
//! It serves any CustomResourceDefinition plus a few built-in kinds (Namespace, Secret,
//! ConfigMap, Event, Lease, CustomResourceDefinition). Start it with [`ApiServer::open`], then
//! either [`ApiServer::serve`] a listener for kubectl and other clients, or hand
//! [`ApiServer::client`] to code in the same process.

mod auth;
mod convert;
mod discovery;
mod gc;
mod handlers;
mod inprocess;
mod meta;
mod objects;
mod protobuf;
mod registry;
mod server;
mod status;
pub mod store;
mod tls;
mod watch;

pub use server::{ApiServer, ServerConfig, ServerError};
