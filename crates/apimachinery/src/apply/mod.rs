//! Server-side apply with managedFields in FieldsV1 format.
//!
//! Mirrors structured-merge-diff as used by kube-apiserver: an apply merges
//! the applied configuration into the live object, prunes fields the manager
//! applied last time but no longer applies (unless someone else owns them),
//! and reports conflicts when a field owned by another manager would change
//! value. Non-apply writes are recorded as `Update` entries owning the fields
//! they added or changed. Without a schema, lists are atomic unless the list
//! strategy callback (see [`apply_with`]) says otherwise; `metadata`'s
//! ownerReferences (keyed by uid) and finalizers (a set) are built in.
//!
//! The parts, each using only those listed before it: `fieldset` (sets of
//! field paths and their FieldsV1 form), `lists` (how each list is treated),
//! `compare` (the fields a value sets, and what changed between two),
//! `merge` (merging an applied configuration into the live object),
//! `managed_fields` (the `metadata.managedFields` entries), then `ssa`
//! ([`apply`], [`apply_with`]) and `update` ([`record_update`],
//! [`record_update_with`]).

mod compare;
mod fieldset;
mod lists;
mod managed_fields;
mod merge;
mod ssa;
mod update;

pub use lists::schema_list_strategy;
pub use ssa::{ApplyOptions, Conflict, apply, apply_with};
pub use update::{record_update, record_update_with};

#[cfg(test)]
mod tests;
