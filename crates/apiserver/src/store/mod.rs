//! The durable object store: redb on disk, an in-memory index of current objects, and a bounded
//! history of change events for watches.
//!
//! Every write is one redb transaction committed with `Durability::Immediate` before the caller
//! sees success, so an acknowledged write survives `kill -9`. Reads are served from memory; the
//! disk is only read at open. Each changed object gets its own revision from one global counter,
//! which doubles as `metadata.resourceVersion`.
//!
//! The parts, each using only those listed before it (shared items live in the leaves, so
//! nothing here imports in a circle): `limits` (object size and nesting bounds), `tables`
//! (the redb tables), `error`, `op` (a change to make), `stored` (one object as stored),
//! `history` (change events for watches), `index` (the volatile resources, Events: their
//! bounds and write order), `state` (the in-memory view), `view` (the state with queued
//! writes on top), `evict` (the deletions that keep volatile resources within their bounds),
//! `batch` (writes decided but not yet durable), `integrity` (bounds checks, quarantine at
//! open, the offline check), `inner` (what the handle and the committer share), `recovery`
//! (after a failed commit), `committer` (group commit and publication) and `handle`
//! ([`Store`]).
//!
//! Volatile resources go through the same writes, revisions and reads as the others, but are
//! never written to the file: a restart loses them, and nothing else. They have their own
//! watch history and are bounded by count (per namespace and in all) and by age since their
//! last write; past a bound the oldest are deleted like any object (watchers see `DELETED`).

mod batch;
mod committer;
mod error;
mod evict;
mod handle;
mod history;
mod index;
mod inner;
mod integrity;
mod limits;
mod op;
mod recovery;
mod state;
mod stored;
mod tables;
mod view;

pub use error::StoreError;
pub use handle::{Store, StoreConfig};
pub use history::{Event, EventType, Gone, HistoryLimits, Version};
pub use index::Volatile;
pub use integrity::{CheckReport, check, depth};
pub use limits::{MAX_DEPTH, MAX_OBJECT_BYTES, MAX_STORED_DEPTH};
pub use op::Op;
pub use state::State;
pub use stored::{Stored, resource_version};
pub use view::View;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod volatile_tests;
