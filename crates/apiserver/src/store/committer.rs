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
/// answered. Volatile changes are published without being written.
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
            let (rows, meta) = plan(&inner, &batch, last);
            let result = match (meta, db) {
                // Only volatile changes, within the reserved revisions: nothing to write.
                (None, _) => Ok(()),
                (Some(meta), Some(db)) => commit(db, rows, meta).await.map(|()| {
                    inner
                        .reserved
                        .fetch_max(meta, std::sync::atomic::Ordering::AcqRel);
                }),
                (Some(_), None) => Err(StoreError::Closed),
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

/// Revisions reserved at a time for volatile changes, which are not written to the file: one
/// small commit per this many keeps every revision handed out below the stored one.
pub(super) const RESERVE: u64 = 1024;

/// A row to write (`None`: remove it).
type Row = (String, Option<Bytes>);

/// What a batch writes to the file: the rows of its durable changes, and the revision to store,
/// `None` when there is nothing to write. A batch with volatile changes past the reserved
/// revisions reserves [`RESERVE`] more, so the volatile revisions (never in the file) are
/// not handed out again after a restart.
fn plan(inner: &Inner, batch: &[Pending], last: u64) -> (Vec<Row>, Option<u64>) {
    let rows: Vec<Row> = batch
        .iter()
        .filter(|p| !inner.volatile.holds(&p.resource))
        .map(|p| {
            let key = format!("{}/{}/{}", p.resource, p.namespace, p.name);
            (
                key,
                (p.kind != EventType::Deleted).then(|| p.stored.json.clone()),
            )
        })
        .collect();
    let reserved = inner.reserved.load(std::sync::atomic::Ordering::Acquire);
    let volatile = rows.len() < batch.len();
    let meta = if volatile && last > reserved {
        Some(last + RESERVE)
    } else if !rows.is_empty() {
        Some(last.max(reserved))
    } else {
        None
    };
    (rows, meta)
}

async fn commit(db: Arc<Database>, rows: Vec<Row>, meta_rev: u64) -> Result<(), StoreError> {
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
            meta.insert(REVISION, meta_rev).map_err(db_err)?;
        }
        tx.commit().map_err(db_err)
    })
    .await?
}

/// Makes a committed batch visible: current objects, the volatile index, watch history,
/// revision.
fn publish(inner: &Inner, batch: Vec<Pending>, last: u64) {
    let now = std::time::Instant::now();
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
            let volatile = inner.volatile.holds(&p.resource);
            if volatile {
                if let Some(prev) = &prev {
                    s.volatile.remove(&p.namespace, prev.rev);
                }
                if p.kind != EventType::Deleted {
                    s.volatile
                        .insert(&p.resource, &p.namespace, &p.name, p.stored.rev, now);
                }
            }
            let event = Event {
                kind: p.kind,
                resource: p.resource,
                namespace: p.namespace,
                name: p.name,
                obj: p.stored,
                prev,
            };
            if volatile {
                s.volatile_history.push(event);
            } else {
                s.history.push(event);
            }
        }
        s.rev = last;
        inner
            .published
            .store(last, std::sync::atomic::Ordering::Release);
    }
    inner.rev_tx.send_replace(last);
}
