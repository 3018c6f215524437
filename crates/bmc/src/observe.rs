//! Counting the requests clients send, for benchmarks and metrics.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::address::Protocol;

/// Told about each request a client sends (before it is sent).
pub trait RequestObserver: Send + Sync {
    /// `method` is the HTTP method for Redfish, `"IPMI"` for an ipmitool command.
    fn on_request(&self, protocol: Protocol, method: &'static str);
}

/// A ready-made observer with one counter per kind of request.
#[derive(Debug, Default)]
pub struct RequestCounter {
    pub get: AtomicU64,
    pub post: AtomicU64,
    pub patch: AtomicU64,
    pub delete: AtomicU64,
    pub ipmi: AtomicU64,
}

impl RequestCounter {
    pub fn total(&self) -> u64 {
        [&self.get, &self.post, &self.patch, &self.delete, &self.ipmi]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl RequestObserver for RequestCounter {
    fn on_request(&self, protocol: Protocol, method: &'static str) {
        let counter = match (protocol, method) {
            (Protocol::Ipmi, _) => &self.ipmi,
            (_, "GET") => &self.get,
            (_, "POST") => &self.post,
            (_, "PATCH") => &self.patch,
            (_, "DELETE") => &self.delete,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
