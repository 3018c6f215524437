//! [`Volatile`]: the resources kept in memory only (Events) and their bounds, and [`Index`]:
//! their objects in write order, oldest first, which is what the bounds remove first.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::history::HistoryLimits;

/// Resources the store keeps in memory only: never written to the database file (so a restart
/// loses them), with their own watch history, and bounded by count and age. Past a bound the
/// objects written longest ago are deleted (watchers see `DELETED`), as kube-apiserver's
/// `--event-ttl` expires Events a fixed time after their last write.
#[derive(Debug, Clone)]
pub struct Volatile {
    /// Storage keys ("events").
    pub resources: Vec<String>,
    /// Most objects one namespace may hold.
    pub per_namespace: usize,
    /// Most objects in all namespaces together.
    pub total: usize,
    /// How long an object lives after its last write.
    pub ttl: Duration,
    /// Their change history for watches, apart from the durable objects' (so a burst of
    /// Events never pushes object changes out of it).
    pub history: HistoryLimits,
}

impl Volatile {
    /// Nothing volatile: every resource is durable.
    pub fn none() -> Self {
        Volatile {
            resources: Vec::new(),
            per_namespace: usize::MAX,
            total: usize::MAX,
            ttl: Duration::MAX,
            history: HistoryLimits::events(16),
        }
    }

    pub fn holds(&self, resource: &str) -> bool {
        self.resources.iter().any(|r| r == resource)
    }
}

/// One volatile object in the index.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) resource: Arc<str>,
    pub(super) name: Box<str>,
    /// When this version was published.
    pub(super) at: Instant,
}

/// The volatile objects by namespace, each namespace's in revision order. Revisions are handed
/// out in write order, so the first entry of a namespace is the one written longest ago.
#[derive(Debug, Default)]
pub(super) struct Index {
    by_ns: HashMap<Box<str>, BTreeMap<u64, Entry>>,
    /// Shared resource names, so an entry costs a pointer rather than a copy.
    resources: Vec<Arc<str>>,
    total: usize,
}

impl Index {
    pub(super) fn insert(&mut self, resource: &str, ns: &str, name: &str, rev: u64, at: Instant) {
        let resource = match self.resources.iter().find(|r| &***r == resource) {
            Some(r) => r.clone(),
            None => {
                let r: Arc<str> = resource.into();
                self.resources.push(r.clone());
                r
            }
        };
        let entry = Entry {
            resource,
            name: name.into(),
            at,
        };
        let old = match self.by_ns.get_mut(ns) {
            Some(m) => m.insert(rev, entry),
            None => self.by_ns.entry(ns.into()).or_default().insert(rev, entry),
        };
        if old.is_none() {
            self.total += 1;
        }
    }

    pub(super) fn remove(&mut self, ns: &str, rev: u64) {
        let Some(m) = self.by_ns.get_mut(ns) else {
            return;
        };
        if m.remove(&rev).is_some() {
            self.total -= 1;
        }
        if m.is_empty() {
            self.by_ns.remove(ns);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.total
    }

    pub(super) fn len_in(&self, ns: &str) -> usize {
        self.by_ns.get(ns).map_or(0, BTreeMap::len)
    }

    /// One namespace's objects, written longest ago first.
    pub(super) fn oldest_in<'a>(&'a self, ns: &str) -> impl Iterator<Item = (u64, &'a Entry)> {
        self.by_ns
            .get(ns)
            .into_iter()
            .flat_map(|m| m.iter().map(|(rev, e)| (*rev, e)))
    }

    /// Every object, written longest ago first, with its namespace (a merge of the
    /// namespaces' orders: each step looks at the head of every namespace).
    pub(super) fn oldest(&self) -> impl Iterator<Item = (&str, u64, &Entry)> {
        // Each namespace's next entry, and the rest of its order.
        let mut heads: Vec<_> = self
            .by_ns
            .iter()
            .map(|(ns, m)| {
                let mut rest = m.iter();
                (&**ns, rest.next(), rest)
            })
            .collect();
        std::iter::from_fn(move || {
            let (ns, head, rest) = heads
                .iter_mut()
                .filter(|(_, head, _)| head.is_some())
                .min_by_key(|(_, head, _)| head.map(|(rev, _)| *rev))?;
            let (rev, e) = head.take()?;
            *head = rest.next();
            Some((*ns, *rev, e))
        })
    }

    /// Objects whose last write was at or before `cutoff`, in every namespace.
    pub(super) fn written_by(&self, cutoff: Instant) -> impl Iterator<Item = (&str, u64, &Entry)> {
        self.by_ns.iter().flat_map(move |(ns, m)| {
            m.iter()
                .take_while(move |(_, e)| e.at <= cutoff)
                .map(move |(rev, e)| (&**ns, *rev, e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_revision_within_and_across_namespaces() {
        let now = Instant::now();
        let mut ix = Index::default();
        ix.insert("events", "b", "b1", 2, now);
        ix.insert("events", "a", "a1", 1, now);
        ix.insert("events", "a", "a2", 3, now);
        ix.insert("events", "b", "b2", 4, now);
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.len_in("a"), 2);
        let order: Vec<u64> = ix.oldest().map(|(_, rev, _)| rev).collect();
        assert_eq!(order, [1, 2, 3, 4]);
        let in_b: Vec<&str> = ix.oldest_in("b").map(|(_, e)| &*e.name).collect();
        assert_eq!(in_b, ["b1", "b2"]);
        ix.remove("a", 1);
        ix.remove("a", 3);
        ix.remove("a", 99);
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.len_in("a"), 0);
        assert!(!ix.by_ns.contains_key("a"), "an empty namespace is dropped");
    }

    #[test]
    fn written_by_a_cutoff() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(10);
        let mut ix = Index::default();
        ix.insert("events", "a", "old", 1, t0);
        ix.insert("events", "a", "new", 2, t1);
        ix.insert("events", "b", "old-b", 3, t0);
        let mut old: Vec<&str> = ix.written_by(t0).map(|(_, _, e)| &*e.name).collect();
        old.sort();
        assert_eq!(old, ["old", "old-b"]);
        assert_eq!(ix.written_by(t1).count(), 3);
    }
}
