//! Redfish client on reqwest + rustls.
//!
//! One process-wide HTTP client per TLS policy: reqwest pools connections per host, so each
//! BMC gets its own small connection set without building a TLS stack per BMC. What the BMC
//! told us once (reset target and allowed values, ETag, virtual-media location, `$expand`
//! support) is remembered so steady-state calls cost one request.
//!
//! `transport` sends the requests (HTTP, session, limits, errors); `client` is the client with
//! what it learned; `bmc_impl` implements the `Bmc` trait on it; `parse` reads the BMC's JSON;
//! `bios` reads and stages BIOS settings and their registry; `update` starts firmware updates
//! and follows their tasks; `raid` lists, creates and deletes hardware RAID volumes; `events` the EventService's
//! subscriptions.

mod adapters;
mod bios;
mod bmc_impl;
mod client;
mod events;
mod parse;
mod raid;
mod transport;
mod update;

pub use client::RedfishBmc;
pub use parse::choose_reset_type;
