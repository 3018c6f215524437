//! The change history watches read: events, how much of it is kept, and what a lookup
//! past its start gets.

use std::collections::VecDeque;
use std::sync::Arc;

use super::stored::Stored;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// What the history keeps of one object version: the stored object itself, shared with the
/// current view while it is current, so a change costs the history one pointer, not a copy.
pub type Version = Arc<Stored>;

/// A change to one object, kept in the history for watches.
#[derive(Debug)]
pub struct Event {
    pub kind: EventType,
    /// Storage key of the resource ("secrets", "baremetalhosts.metal3.io").
    pub resource: String,
    pub namespace: String,
    pub name: String,
    /// The object after the change; for deletions, the last state stamped with the deletion
    /// revision.
    pub obj: Version,
    /// The object before the change, if it existed (watch filters need both sides).
    pub prev: Option<Version>,
}

impl Event {
    /// Object JSON this event keeps alive (both sides, shared with current objects or not:
    /// counting both keeps the bound honest once they are no longer current).
    pub(super) fn held_bytes(&self) -> usize {
        self.obj.json.len() + self.prev.as_ref().map_or(0, |p| p.json.len())
    }
}

/// How much change history to keep for watches; older resourceVersions get 410 Gone.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    pub events: usize,
    /// Object JSON the history may hold on to (much of it shared with current objects).
    pub bytes: usize,
}

impl HistoryLimits {
    pub fn events(events: usize) -> Self {
        HistoryLimits {
            events,
            bytes: 8 << 20,
        }
    }
}

/// Watch history lookups fail with this when the wanted revision was compacted away.
#[derive(Debug, Clone, Copy)]
pub struct Gone {
    pub oldest: u64,
}

/// Recent changes, oldest first, within [`HistoryLimits`].
pub(super) struct History {
    events: VecDeque<Arc<Event>>,
    /// JSON bytes referenced by `events` (shared with current objects or not).
    bytes: usize,
    /// Every change with a revision above this one is still here.
    compacted: u64,
    limits: HistoryLimits,
}

impl History {
    /// An empty history that starts at `rev`: older revisions are gone.
    pub(super) fn new(limits: HistoryLimits, rev: u64) -> Self {
        History {
            events: VecDeque::new(),
            bytes: 0,
            compacted: rev,
            limits: HistoryLimits {
                events: limits.events.max(16),
                bytes: limits.bytes,
            },
        }
    }

    /// Appends a change, dropping the oldest ones past the limits.
    pub(super) fn push(&mut self, event: Event) {
        self.bytes += event.held_bytes();
        self.events.push_back(Arc::new(event));
        while self.events.len() > self.limits.events || self.bytes > self.limits.bytes {
            let Some(e) = self.events.pop_front() else {
                break;
            };
            self.bytes -= e.held_bytes();
            self.compacted = e.obj.rev;
        }
    }

    /// Changes to `resource` with a revision above `after`, oldest first.
    pub(super) fn since(&self, resource: &str, after: u64) -> Result<Vec<Arc<Event>>, Gone> {
        if after < self.compacted {
            return Err(Gone {
                oldest: self.compacted,
            });
        }
        let start = self.events.partition_point(|e| e.obj.rev <= after);
        Ok(self
            .events
            .range(start..)
            .filter(|e| e.resource == resource)
            .cloned()
            .collect())
    }

    /// Drops changes up to and including `rev` (at most `current`, the store's revision).
    pub(super) fn compact(&mut self, rev: u64, current: u64) {
        while self.events.front().is_some_and(|e| e.obj.rev <= rev) {
            if let Some(e) = self.events.pop_front() {
                self.bytes -= e.held_bytes();
            }
        }
        self.compacted = self.compacted.max(rev.min(current));
    }
}
