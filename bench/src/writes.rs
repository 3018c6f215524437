//! Counting the API server's writes: its resourceVersion is one counter over every kind, so
//! the writes in a window are its growth; Events, which live in memory, are told apart by
//! watching them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};

/// Event creates, series updates and deletions as the API server announces them (past
/// `--max-events-per-namespace` each new Event deletes the oldest, a write of its own). Events
/// take a resourceVersion like any object but live in memory, so the durable store's writes
/// are the resourceVersion's growth less these.
pub struct EventWrites {
    /// The resourceVersion of each Event write seen.
    seen: Arc<std::sync::Mutex<Vec<u64>>>,
    /// The watch lost its place (a 410 or an error): the count is then not to be trusted.
    lost: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl EventWrites {
    pub fn start(client: &kube::Client, from: u64) -> EventWrites {
        let api: Api<Event> = Api::all(client.clone());
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let lost = Arc::new(AtomicBool::new(false));
        let (out, l) = (seen.clone(), lost.clone());
        let task = tokio::spawn(async move {
            let mut rv = from.to_string();
            let params = WatchParams::default().timeout(290);
            loop {
                let mut stream = match api.watch(&params, &rv).await {
                    Ok(s) => s.boxed(),
                    Err(_) => {
                        l.store(true, Ordering::Relaxed);
                        return;
                    }
                };
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(
                            WatchEvent::Added(e) | WatchEvent::Modified(e) | WatchEvent::Deleted(e),
                        ) => {
                            if let Some(v) = e.metadata.resource_version {
                                if let Ok(n) = v.parse() {
                                    out.lock().unwrap().push(n);
                                }
                                rv = v;
                            }
                        }
                        Ok(WatchEvent::Bookmark(b)) => rv = b.metadata.resource_version,
                        Ok(WatchEvent::Error(_)) | Err(_) => {
                            l.store(true, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            }
        });
        EventWrites { seen, lost, task }
    }

    /// The Event writes with a resourceVersion in `(from, to]`, or `None` when the watch lost
    /// its place. Waits a moment first: the watch may trail the phase's last writes.
    pub async fn between(&self, from: u64, to: u64) -> Option<u64> {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if self.lost() {
            return None;
        }
        let seen = self.seen.lock().unwrap();
        Some(seen.iter().filter(|rv| **rv > from && **rv <= to).count() as u64)
    }

    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for EventWrites {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The API server's current resourceVersion, as a list of one object reports it.
pub async fn resource_version(api: &Api<DynamicObject>) -> u64 {
    api.list_metadata(&ListParams::default().limit(1))
        .await
        .ok()
        .and_then(|l| l.metadata.resource_version)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}
