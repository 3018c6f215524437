//! The change history watches read: events, how much of it is kept, and what a lookup
//! past its start gets.

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
