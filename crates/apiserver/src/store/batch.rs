//! Writes decided but not yet durable: the writer's overlay, the committer's queue, and
//! ops turned into pending changes with their revisions.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use super::history::EventType;
use super::op::Op;
use super::stored::{Stored, set_resource_version};
use super::view::{Key, View};

/// A change decided by a writer, waiting to be committed.
pub(super) struct Pending {
    pub(super) kind: EventType,
    pub(super) resource: String,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) stored: Arc<Stored>,
}

/// The write side: changes decided but not yet durable. Writers decide against the committed
/// state plus this overlay, so one fsync can cover every writer that queued meanwhile (group
/// commit) while each still sees the writes decided before it.
#[derive(Default)]
pub(super) struct Writer {
    /// The last revision handed out (at least the committed one).
    pub(super) next_rev: u64,
    /// Latest undurable version of each key touched by queued or in-flight batches, with the
    /// revision that produced it.
    /// Entries at or below the published revision are dropped by the next writer.
    pub(super) overlay: HashMap<Key, (u64, Option<Arc<Stored>>)>,
    pub(super) closed: bool,
}

/// Decided changes waiting for the committer. Apart from [`Writer`] so the committer never
/// waits for a writer that is still deciding: what was queued before is made durable and
/// visible meanwhile.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) batch: Vec<Pending>,
    pub(super) waiters: Vec<oneshot::Sender<Result<(), String>>>,
    pub(super) committing: bool,
    /// A commit failed: the overlay no longer matches the disk, so further writes are refused
    /// until the recovery task has dropped the overlay and made a probe commit.
    pub(super) failed: Option<String>,
}

/// Turns ops into pending changes with revisions after `last_rev`. Later ops in one call see
/// earlier ones (a put then a delete of the same object).
pub(super) fn prepare(view: &View, ops: Vec<Op>, last_rev: u64) -> Vec<Pending> {
    let mut rev = last_rev;
    let mut out = Vec::with_capacity(ops.len());
    let mut local: HashMap<Key, Option<Value>> = HashMap::new();
    for op in ops {
        match op {
            Op::Put {
                resource,
                namespace,
                name,
                mut value,
            } => {
                rev += 1;
                set_resource_version(&mut value, rev);
                let key = (resource.clone(), namespace.clone(), name.clone());
                let existed = match local.get(&key) {
                    Some(v) => v.is_some(),
                    None => view.get(&resource, &namespace, &name).is_some(),
                };
                local.insert(key, Some(value.clone()));
                out.push(Pending {
                    kind: if existed {
                        EventType::Modified
                    } else {
                        EventType::Added
                    },
                    resource,
                    namespace,
                    name,
                    stored: Arc::new(Stored::new(rev, value)),
                });
            }
            Op::Delete {
                resource,
                namespace,
                name,
            } => {
                let key = (resource.clone(), namespace.clone(), name.clone());
                let old = match local.get(&key) {
                    Some(v) => v.clone(),
                    None => view.get(&resource, &namespace, &name).map(|o| o.value()),
                };
                let Some(mut value) = old else {
                    continue;
                };
                rev += 1;
                set_resource_version(&mut value, rev);
                local.insert(key, None);
                out.push(Pending {
                    kind: EventType::Deleted,
                    resource,
                    namespace,
                    name,
                    stored: Arc::new(Stored::new(rev, value)),
                });
            }
        }
    }
    out
}
