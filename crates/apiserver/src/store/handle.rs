//! [`Store`]: the handle the server holds: open, reads, watches' history, writes, close.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::{Mutex, Notify, oneshot, watch};

use super::batch::{Queue, Writer, prepare};
use super::committer::committer;
use super::error::{StoreError, db_err};
use super::evict::EXPIRE_BATCH;
use super::history::{Event, EventType, Gone, HistoryLimits};
use super::index::Volatile;
use super::inner::Inner;
use super::integrity::{check_bounds, load_row, quarantine};
use super::limits::MAX_OBJECT_BYTES;
use super::op::Op;
use super::state::State;
use super::stored::{Stored, resource_version};
use super::tables::{META, OBJECTS, REVISION};
use super::view::View;

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens (or creates) the database at `path`, loads every durable object into memory and
    /// starts the committer task (so it must be called inside a Tokio runtime). Rows of
    /// volatile resources (written by versions that stored Events) are removed from the file.
    pub fn open(path: &Path, config: impl Into<StoreConfig>) -> Result<Store, StoreError> {
        let config = config.into();
        // Reads are served from memory, so redb's page cache only needs to cover writes.
        let db = Database::builder()
            .set_cache_size(2 << 20)
            .create(path)
            .map_err(db_err)?;
        {
            let tx = db.begin_write().map_err(db_err)?;
            // Make sure both tables exist so that read transactions never fail on a fresh file.
            tx.open_table(OBJECTS).map_err(db_err)?;
            tx.open_table(META).map_err(db_err)?;
            tx.commit().map_err(db_err)?;
        }
        let tx = db.begin_read().map_err(db_err)?;
        let meta = tx.open_table(META).map_err(db_err)?;
        let rev = meta.get(REVISION).map_err(db_err)?.map_or(0, |v| v.value());
        // After a restart the histories are empty: watches from older revisions get 410 Gone
        // and clients relist, exactly as after an etcd compaction.
        let mut state = State::new(rev, config.history, config.volatile.history);
        let objects = tx.open_table(OBJECTS).map_err(db_err)?;
        let mut bad: Vec<(String, Vec<u8>, String)> = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        for row in objects.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            let key = k.value();
            if config
                .volatile
                .holds(key.split('/').next().unwrap_or_default())
            {
                dropped.push(key.to_string());
                continue;
            }
            match load_row(key, v.value()) {
                Ok((resource, ns, name, value)) => {
                    let rev = resource_version(&value).unwrap_or(0);
                    state
                        .objects
                        .entry(resource)
                        .or_default()
                        .insert((ns, name), Arc::new(Stored::new(rev, value)));
                }
                Err(why) => bad.push((key.to_string(), v.value().to_vec(), why)),
            }
        }
        drop(objects);
        drop(meta);
        drop(tx);
        let quarantined = bad.len();
        if !bad.is_empty() {
            quarantine(&db, &bad)?;
        }
        if !dropped.is_empty() {
            drop_rows(&db, &dropped)?;
        }
        let (rev_tx, _) = watch::channel(state.rev);
        tracing::info!(
            revision = state.rev,
            quarantined,
            volatile_dropped = dropped.len(),
            path = %path.display(),
            "store opened"
        );
        let opened_at = state.rev;
        let writer = Writer {
            next_rev: state.rev,
            ..Default::default()
        };
        let expires = !config.volatile.resources.is_empty() && config.volatile.ttl < Duration::MAX;
        let inner = Arc::new(Inner {
            db: RwLock::new(Some(Arc::new(db))),
            path: path.to_path_buf(),
            state: RwLock::new(state),
            writer: Mutex::new(writer),
            queue: Default::default(),
            published: std::sync::atomic::AtomicU64::new(opened_at),
            wake: Arc::new(Notify::new()),
            rev_tx,
            volatile: config.volatile,
            reserved: std::sync::atomic::AtomicU64::new(opened_at),
        });
        tokio::spawn(committer(Arc::downgrade(&inner), inner.wake.clone()));
        if expires {
            tokio::spawn(expiry(Arc::downgrade(&inner)));
        }
        Ok(Store { inner })
    }

    /// Runs `f` against the committed state; the guard must not be held across an await.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.inner.state.read().expect("store lock"))
    }

    pub fn revision(&self) -> u64 {
        self.read(|s| s.rev)
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        self.read(|s| s.get(resource, namespace, name).cloned())
    }

    /// The latest version of an object, queued writes included: what a writer will see.
    pub async fn latest(&self, resource: &str, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        let w = self.inner.writer.lock().await;
        View {
            state: &self.inner.state,
            overlay: &w.overlay,
        }
        .get(resource, namespace, name)
    }

    /// A receiver that changes whenever the revision moves; watchers wait on it.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.rev_tx.subscribe()
    }

    /// Waits up to `within` for the revision to reach `rev`; `Err` with the revision reached
    /// otherwise.
    pub async fn wait_for(&self, rev: u64, within: std::time::Duration) -> Result<(), u64> {
        let mut revs = self.subscribe();
        match tokio::time::timeout(within, revs.wait_for(|r| *r >= rev)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(self.revision()),
        }
    }

    /// Events for `resource` with a revision above `after`, oldest first, and the revision
    /// they are complete up to.
    pub fn events_since(&self, resource: &str, after: u64) -> Result<(Vec<Arc<Event>>, u64), Gone> {
        let volatile = self.inner.volatile.holds(resource);
        self.read(|s| {
            let history = if volatile {
                &s.volatile_history
            } else {
                &s.history
            };
            Ok((history.since(resource, after)?, s.rev))
        })
    }

    /// Serializes writers, lets `f` decide the changes against the latest state (committed or
    /// queued), and returns once they are durable and visible to readers. Returns the stored
    /// result of each op, in order (for deletions, the removed object stamped with the deletion
    /// revision).
    pub async fn write<T, E>(
        &self,
        f: impl FnOnce(&View) -> Result<(Vec<Op>, T), E>,
    ) -> Result<(Vec<Arc<Stored>>, T), E>
    where
        E: From<StoreError>,
    {
        let (rx, results, out) = {
            let mut w = self.inner.writer.lock().await;
            if w.closed {
                return Err(StoreError::Closed.into());
            }
            if let Some(e) = &self.queue().failed {
                return Err(StoreError::Unwritable(e.clone()).into());
            }
            let published = self
                .inner
                .published
                .load(std::sync::atomic::Ordering::Acquire);
            if !w.overlay.is_empty() {
                w.overlay.retain(|_, (rev, _)| *rev > published);
            }
            let (pending, out) = {
                let view = View {
                    state: &self.inner.state,
                    overlay: &w.overlay,
                };
                let (mut ops, out) = f(&view)?;
                // Volatile objects this write creates push the oldest ones out.
                if !self.inner.volatile.resources.is_empty() {
                    let evicted = view.evictions(&ops, &self.inner.volatile);
                    ops.extend(evicted);
                }
                check_bounds(&ops)?;
                let pending = prepare(&view, ops, w.next_rev);
                if let Some(p) = pending
                    .iter()
                    .find(|p| p.stored.json.len() > MAX_OBJECT_BYTES)
                {
                    return Err(StoreError::TooLarge {
                        key: format!("{}/{}/{}", p.resource, p.namespace, p.name),
                        bytes: p.stored.json.len(),
                    }
                    .into());
                }
                (pending, out)
            };
            if pending.is_empty() {
                return Ok((Vec::new(), out));
            }
            let results: Vec<Arc<Stored>> = pending.iter().map(|p| p.stored.clone()).collect();
            for p in &pending {
                w.next_rev = p.stored.rev;
                let value = (p.kind != EventType::Deleted).then(|| p.stored.clone());
                w.overlay.insert(
                    (p.resource.clone(), p.namespace.clone(), p.name.clone()),
                    (p.stored.rev, value),
                );
            }
            let (tx, rx) = oneshot::channel();
            let mut q = self.queue();
            // A commit failed while this writer decided: its decision may rest on the failed
            // batch. Not queued; the recovery drops the overlay it is in.
            if let Some(e) = &q.failed {
                return Err(StoreError::Unwritable(e.clone()).into());
            }
            q.batch.extend(pending);
            q.waiters.push(tx);
            (rx, results, out)
        };
        self.inner.wake.notify_one();
        match rx.await {
            Ok(Ok(())) => Ok((results, out)),
            Ok(Err(e)) => Err(StoreError::Unwritable(e).into()),
            Err(_) => Err(StoreError::Closed.into()),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.inner.queue.lock().expect("queue lock")
    }

    /// Why writes are refused right now, if they are (readiness reports it).
    pub fn unwritable(&self) -> Option<String> {
        self.queue().failed.clone()
    }

    /// Waits for queued writes to be committed, then closes the database file. Later writes
    /// fail with [`StoreError::Closed`]; reads keep answering from memory.
    pub async fn close(&self) {
        loop {
            {
                let mut w = self.inner.writer.lock().await;
                let q = self.queue();
                if q.batch.is_empty() && !q.committing {
                    w.closed = true;
                    self.inner.db.write().expect("store lock").take();
                    break;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        self.inner.wake.notify_one();
    }

    /// Drops history up to and including `rev` (watches from older revisions then get 410).
    pub fn compact(&self, rev: u64) {
        let mut s = self.inner.state.write().expect("store lock");
        let current = s.rev;
        s.history.compact(rev, current);
        s.volatile_history.compact(rev, current);
    }

    /// Deletes the volatile objects last written at or before `now` minus their TTL (at most
    /// [`EXPIRE_BATCH`] at once); returns how many.
    pub async fn expire(&self, now: Instant) -> Result<usize, StoreError> {
        let cfg = &self.inner.volatile;
        let (done, ()) = self
            .write(|v| Ok::<_, StoreError>((v.expired(now, cfg), ())))
            .await?;
        Ok(done.len())
    }

    /// How many volatile objects are held: in all, and in `namespace`.
    pub fn volatile_count(&self, namespace: &str) -> (usize, usize) {
        self.read(|s| (s.volatile.len(), s.volatile.len_in(namespace)))
    }
}

/// Expires volatile objects a tenth of their TTL after it has passed, at most (and at least
/// every 100 ms, at most every 10 s), until the store is closed or dropped.
async fn expiry(weak: std::sync::Weak<Inner>) {
    let every = match weak.upgrade() {
        Some(inner) => {
            (inner.volatile.ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(10))
        }
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let store = Store { inner };
        loop {
            match store.expire(Instant::now()).await {
                Ok(n) if n >= EXPIRE_BATCH => continue,
                Ok(_) => break,
                Err(StoreError::Closed) => return,
                // Refused while the disk is full, say: the next pass tries again.
                Err(e) => {
                    tracing::debug!(error = %e, "expiring volatile objects");
                    break;
                }
            }
        }
    }
}

/// Removes rows in one transaction (volatile ones left by an earlier version).
fn drop_rows(db: &Database, keys: &[String]) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(db_err)?;
    {
        let mut objects = tx.open_table(OBJECTS).map_err(db_err)?;
        for key in keys {
            objects.remove(key.as_str()).map_err(db_err)?;
        }
    }
    tx.commit().map_err(db_err)
}

/// How the store keeps changes for watches, and which resources stay in memory only.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The durable objects' change history.
    pub history: HistoryLimits,
    pub volatile: Volatile,
}

impl From<HistoryLimits> for StoreConfig {
    /// Every resource durable.
    fn from(history: HistoryLimits) -> Self {
        StoreConfig {
            history,
            volatile: Volatile::none(),
        }
    }
}
