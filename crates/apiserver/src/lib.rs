//! The embedded, kubectl-compatible Kubernetes API server with a durable local store.
//! Events are the exception: served like any object but kept in memory only, bounded by count
//! and age (see [`EventLimits`]).
//!
//! It serves any CustomResourceDefinition plus a few built-in kinds (Namespace, Secret,
//! ConfigMap, Event, Lease, CustomResourceDefinition). Start it with [`ApiServer::open`], then
//! either [`ApiServer::serve`] a listener for kubectl and other clients, or hand
//! [`ApiServer::client`] to code in the same process.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ferrometal_apiserver::{ApiServer, ServerConfig};
//!
//! let server = Arc::new(ApiServer::open(ServerConfig::new("ferrometal-data")).await?);
//! // In-process transport: no socket, no token; hand it to controllers.
//! let client: kube::Client = server.client();
//! // Network clients: kubectl, kube-rs, Python, with DATA_DIR/kubeconfig.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:6443").await?;
//! server.write_kubeconfig(&server.url_for(listener.local_addr()?))?;
//! let serving = tokio::spawn({
//!     let server = server.clone();
//!     async move { server.serve(listener).await }
//! });
//! // ... on SIGTERM:
//! server.shutdown().await; // ends watches, waits for queued writes, closes the store
//! serving.await??;
//! # drop(client);
//! # Ok(())
//! # }
//! ```

mod admission;
pub mod audit;
mod authn;
mod authz;
mod convert;
mod discovery;
mod files;
mod filters;
mod gc;
mod handlers;
mod inprocess;
pub mod kubeconfig;
mod meta;
mod objects;
mod protobuf;
mod registry;
mod render;
mod request;
mod reviews;
mod server;
mod shares;
mod state;
mod status;
pub mod store;
pub mod tls;
mod watch;
mod yaml;

pub use server::{ApiServer, EventLimits, ServerConfig, ServerError};

/// The stack the threads that serve requests should have: schema validation
/// (on every write of a custom resource) and YAML bodies need deep stacks
/// and switch to a mapped one per call on threads that lack the room
/// ([`ferrometal_crdschema::STACK_BYTES`]); with it they run in place. Only
/// the pages used are committed.
pub const THREAD_STACK_BYTES: usize = ferrometal_crdschema::STACK_BYTES + (16 << 20);

/// Entry points for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// A request body decoded as the server decodes it, by media type; the HTTP status of a
    /// refusal.
    pub fn decode_body(content_type: &str, body: &[u8]) -> Result<serde_json::Value, u16> {
        crate::handlers::parse_body(content_type, body).map_err(|e| e.code)
    }

    /// Multi-document YAML as `kubectl apply -f` sends it.
    pub fn yaml_documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
        crate::yaml::documents(text)
    }
}
pub use state::{Limits, ValidateFn, Validator};
pub use store::{CheckReport, check as check_store};
