//! What a client really sent: request counts by method and by system.

use serde::{Deserialize, Serialize};

/// Request counts by HTTP method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodCounts {
    pub get: u64,
    pub post: u64,
    pub patch: u64,
    pub delete: u64,
    /// Any other method (PUT, HEAD, ...).
    pub other: u64,
}

impl MethodCounts {
    pub fn total(&self) -> u64 {
        self.get + self.post + self.patch + self.delete + self.other
    }
}

/// Redfish request counters (control endpoint requests are not counted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Every Redfish request, including ones rejected or faulted.
    pub total: u64,
    pub by_method: MethodCounts,
    /// Requests for each system's resources (system, inventory, manager,
    /// virtual media), indexed by system index.
    pub systems: Vec<MethodCounts>,
    /// Sessions created and not yet deleted.
    pub open_sessions: u64,
}

impl Counters {
    /// Counts for one system (zero if the index is out of range).
    pub fn system(&self, index: usize) -> MethodCounts {
        self.systems.get(index).copied().unwrap_or_default()
    }
}
