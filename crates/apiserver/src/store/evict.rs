//! Keeping the volatile resources within their bounds: the deletions a write adds when it
//! would take a namespace or the whole store past its count, and those that expire objects
//! not written for the TTL. Both are decided against a [`View`] like any other write, so they
//! get revisions and reach watchers as `DELETED`.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::index::Volatile;
use super::op::Op;
use super::view::{Key, View};

/// At most this many expiries go into one write; the next pass takes the rest.
pub(super) const EXPIRE_BATCH: usize = 10_000;

fn delete(resource: &str, namespace: &str, name: &str) -> Op {
    Op::Delete {
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

impl View<'_> {
    /// Deletions of the oldest volatile objects that make room for those `ops` create, given
    /// the queued writes too. Objects a queued write or `ops` touches are never chosen.
    pub(super) fn evictions(&self, ops: &[Op], cfg: &Volatile) -> Vec<Op> {
        let creates_volatile = ops.iter().any(|op| match op {
            Op::Put { resource, .. } => cfg.holds(resource),
            Op::Delete { .. } => false,
        });
        if !creates_volatile {
            return Vec::new();
        }
        let state = self.committed();
        // Whether each touched key exists once the queued writes and `ops` are done.
        let mut after: HashMap<Key, bool> = HashMap::new();
        for ((r, ns, name), (_, v)) in self.overlay {
            if cfg.holds(r) {
                after.insert((r.clone(), ns.clone(), name.clone()), v.is_some());
            }
        }
        for op in ops {
            let (key, exists) = match op {
                Op::Put {
                    resource,
                    namespace,
                    name,
                    ..
                } => ((resource, namespace, name), true),
                Op::Delete {
                    resource,
                    namespace,
                    name,
                } => ((resource, namespace, name), false),
            };
            if cfg.holds(key.0) {
                after.insert((key.0.clone(), key.1.clone(), key.2.clone()), exists);
            }
        }
        // Net change per namespace against what is published.
        let mut delta: HashMap<&str, isize> = HashMap::new();
        for ((r, ns, name), exists) in &after {
            let before = state.get(r, ns, name).is_some();
            let d = isize::from(*exists) - isize::from(before);
            if d != 0 {
                *delta.entry(ns.as_str()).or_default() += d;
            }
        }
        let count = |ns: &str, delta: &HashMap<&str, isize>| {
            (state.volatile.len_in(ns) as isize + delta.get(ns).copied().unwrap_or(0)).max(0)
                as usize
        };
        let mut total =
            (state.volatile.len() as isize + delta.values().sum::<isize>()).max(0) as usize;
        let touched = |ns: &str, e: &super::index::Entry| {
            after.contains_key(&(e.resource.to_string(), ns.to_string(), e.name.to_string()))
        };
        let mut chosen: HashSet<(String, u64)> = HashSet::new();
        let mut out = Vec::new();
        let growing: HashSet<&str> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Put {
                    resource,
                    namespace,
                    ..
                } if cfg.holds(resource) => Some(namespace.as_str()),
                _ => None,
            })
            .collect();
        for ns in growing {
            let excess = count(ns, &delta).saturating_sub(cfg.per_namespace);
            let victims: Vec<_> = state
                .volatile
                .oldest_in(ns)
                .filter(|(_, e)| !touched(ns, e))
                .take(excess)
                .collect();
            total = total.saturating_sub(victims.len());
            for (rev, e) in victims {
                chosen.insert((ns.to_string(), rev));
                out.push(delete(&e.resource, ns, &e.name));
            }
        }
        let excess = total.saturating_sub(cfg.total);
        if excess > 0 {
            let victims = state
                .volatile
                .oldest()
                .filter(|(ns, rev, e)| !touched(ns, e) && !chosen.contains(&(ns.to_string(), *rev)))
                .take(excess);
            for (ns, _, e) in victims {
                out.push(delete(&e.resource, ns, &e.name));
            }
        }
        out
    }

    /// Deletions of the volatile objects last written at or before `now - ttl` (at most
    /// [`EXPIRE_BATCH`]), leaving alone those a queued write touches.
    pub(super) fn expired(&self, now: Instant, cfg: &Volatile) -> Vec<Op> {
        let Some(cutoff) = now.checked_sub(cfg.ttl) else {
            return Vec::new();
        };
        let state = self.committed();
        state
            .volatile
            .written_by(cutoff)
            .filter(|(ns, _, e)| {
                self.overlay.is_empty()
                    || !self.overlay.contains_key(&(
                        e.resource.to_string(),
                        ns.to_string(),
                        e.name.to_string(),
                    ))
            })
            .take(EXPIRE_BATCH)
            .map(|(ns, _, e)| delete(&e.resource, ns, &e.name))
            .collect()
    }
}
