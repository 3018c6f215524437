//! [`State`]: the committed objects in memory, and the recent history.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::history::{History, HistoryLimits};
use super::index::Index;
use super::stored::Stored;

type Objects = BTreeMap<(String, String), Arc<Stored>>;

/// The in-memory view: current objects per resource (volatile ones included) and recent
/// changes.
pub struct State {
    pub(super) rev: u64,
    pub(super) objects: HashMap<String, Objects>,
    /// Changes to durable objects.
    pub(super) history: History,
    /// Changes to volatile objects (see [`Volatile`](super::Volatile)).
    pub(super) volatile_history: History,
    /// The volatile objects in write order, for their bounds.
    pub(super) volatile: Index,
}

impl State {
    /// Nothing loaded yet, at revision `rev`: the histories start empty there.
    pub(super) fn new(rev: u64, history: HistoryLimits, volatile: HistoryLimits) -> Self {
        State {
            rev,
            objects: HashMap::new(),
            history: History::new(history, rev),
            volatile_history: History::new(volatile, rev),
            volatile: Index::default(),
        }
    }

    pub fn revision(&self) -> u64 {
        self.rev
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Arc<Stored>> {
        self.objects
            .get(resource)?
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// Objects of one resource (optionally one namespace) in (namespace, name) order, starting
    /// after `after` when given (used by `continue`).
    pub fn list<'a>(
        &'a self,
        resource: &str,
        namespace: Option<&'a str>,
        after: Option<(&'a str, &'a str)>,
    ) -> impl Iterator<Item = &'a Arc<Stored>> + 'a {
        use std::ops::Bound;
        let map = self.objects.get(resource);
        let lower = match (after, namespace) {
            (Some((ns, n)), _) => Bound::Excluded((ns.to_string(), n.to_string())),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        map.into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(_, v)| v)
    }

    /// Every (resource, object) pair; used by garbage collection.
    pub fn all(&self) -> impl Iterator<Item = (&str, &Arc<Stored>)> {
        self.objects
            .iter()
            .flat_map(|(r, m)| m.values().map(move |v| (r.as_str(), v)))
    }

    pub fn count(&self, resource: &str, namespace: Option<&str>) -> usize {
        match namespace {
            None => self.objects.get(resource).map_or(0, |m| m.len()),
            Some(ns) => self.list(resource, Some(ns), None).count(),
        }
    }
}
