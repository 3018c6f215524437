//! The committer task: group commit of queued writes in one redb transaction, then
//! publication to readers and watchers.

use std::sync::Arc;

use bytes::Bytes;
use redb::{Database, Durability};
use tokio::sync::Notify;

use super::batch::Pending;
use super::error::{StoreError, db_err};
use super::history::{Event, EventType};
use super::inner::Inner;
use super::recovery::{injected_fault, recover};
use super::tables::{META, OBJECTS, REVISION};

/// Commits queued writes: everything queued since the last commit goes into one redb
/// transaction (one fsync), is then published to readers and watchers, and its writers are
/// answered.
pub(super) async fn committer(weak: std::sync::Weak<Inner>, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        loop {
            let (batch, waiters, db) = {
                let mut q = inner.queue.lock().expect("queue lock");
                if q.batch.is_empty() {
                    q.committing = false;
                    break;
                }
                q.committing = true;
                let db = inner.db.read().expect("store lock").clone();
                (
                    std::mem::take(&mut q.batch),
                    std::mem::take(&mut q.waiters),
                    db,
                )
            };
            let last = batch.last().map_or(0, |p| p.stored.rev);
            let result = match db {
                Some(db) => commit(db, &batch, last).await,
                None => Err(StoreError::Closed),
            };
            match result {
                Ok(()) => {
                    publish(&inner, batch, last);
                    for tx in waiters {
                        let _ = tx.send(Ok(()));
                    }
                }
                Err(e) => {
                    let reason = e.to_string();
                    tracing::error!(error = %reason, "commit failed; writes are refused until the store can write again");
                    // Everything queued behind the failed batch was decided on top of it: none
                    // of it can be committed either.
                    let queued = {
                        let mut q = inner.queue.lock().expect("queue lock");
                        q.failed = Some(reason.clone());
                        q.batch.clear();
                        std::mem::take(&mut q.waiters)
                    };
                    for tx in waiters.into_iter().chain(queued) {
                        let _ = tx.send(Err(reason.clone()));
                    }
                    tokio::spawn(recover(weak.clone()));
                }
            }
        }
        if inner.writer.lock().await.closed {
            return;
        }
    }
}

async fn commit(db: Arc<Database>, batch: &[Pending], last: u64) -> Result<(), StoreError> {
    let rows: Vec<(String, Option<Bytes>)> = batch
        .iter()
        .map(|p| {
            let key = format!("{}/{}/{}", p.resource, p.namespace, p.name);
            (
                key,
                (p.kind != EventType::Deleted).then(|| p.stored.json.clone()),
            )
        })
        .collect();
    tokio::task::spawn_blocking(move || -> Result<(), StoreError> {
        injected_fault()?;
        let mut tx = db.begin_write().map_err(db_err)?;
        tx.set_durability(Durability::Immediate).map_err(db_err)?;
        {
            let mut objects = tx.open_table(OBJECTS).map_err(db_err)?;
            for (key, json) in &rows {
                match json {
                    Some(json) => {
                        objects
                            .insert(key.as_str(), json.as_ref())
                            .map_err(db_err)?;
                    }
                    None => {
                        objects.remove(key.as_str()).map_err(db_err)?;
                    }
                }
            }
            let mut meta = tx.open_table(META).map_err(db_err)?;
            meta.insert(REVISION, last).map_err(db_err)?;
        }
        tx.commit().map_err(db_err)
    })
    .await?
}

/// Makes a committed batch visible: current objects, watch history, revision.
fn publish(inner: &Inner, batch: Vec<Pending>, last: u64) {
    {
        let mut s = inner.state.write().expect("store lock");
        for p in batch {
            let map = s.objects.entry(p.resource.clone()).or_default();
            let key = (p.namespace.clone(), p.name.clone());
            let prev = if p.kind == EventType::Deleted {
                map.remove(&key)
            } else {
                map.insert(key, p.stored.clone())
            };
            let event = Event {
                kind: p.kind,
                resource: p.resource,
                namespace: p.namespace,
                name: p.name,
                obj: p.stored.clone(),
                prev,
            };
            s.history_bytes += event.held_bytes();
            s.history.push_back(Arc::new(event));
        }
        s.rev = last;
        inner
            .published
            .store(last, std::sync::atomic::Ordering::Release);
        while s.history.len() > inner.history_limit || s.history_bytes > inner.history_bytes {
            let Some(e) = s.history.pop_front() else {
                break;
            };
            s.history_bytes -= e.held_bytes();
            s.compacted = e.obj.rev;
        }
    }
    inner.rev_tx.send_replace(last);
}
