//! Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//!
//! Strategic merge patch follows `k8s.io/apimachinery/pkg/util/strategicpatch`:
//! maps merge recursively, `null` deletes, lists merge by key / as sets / are
//! replaced per [`ListStrategy`], and the directives `$patch` (`replace`,
//! `delete`, `merge`), `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>` are honoured.
//!
//! The parts, each using only those listed before it: `error`
//! ([`PatchError`]), `strategy` ([`ListStrategy`] and the built-in kinds'
//! list strategies), `rfc` ([`merge_patch`], [`json_patch()`]),
//! `element_order` (`$setElementOrder`) and `strategic`
//! ([`strategic_merge_patch`]).

mod element_order;
mod error;
mod rfc;
mod strategic;
mod strategy;

pub use error::PatchError;
pub use rfc::{json_patch, merge_patch};
pub use strategic::strategic_merge_patch;
pub use strategy::{ListStrategy, builtin_list_strategy, merge_key_fields};

#[cfg(test)]
mod tests;
