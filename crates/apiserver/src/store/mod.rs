//! The durable object store: redb on disk, an in-memory index of current objects, and a bounded
//! history of change events for watches.
//!
//! Every write is one redb transaction committed with `Durability::Immediate` before the caller
//! sees success, so an acknowledged write survives `kill -9`. Reads are served from memory; the
//! disk is only read at open. Each changed object gets its own revision from one global counter,
//! which doubles as `metadata.resourceVersion`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::{Mutex, Notify, oneshot, watch};

mod integrity;

pub use integrity::{CheckReport, MAX_DEPTH, MAX_OBJECT_BYTES, MAX_STORED_DEPTH, check, depth};
use integrity::{check_bounds, load_row, quarantine};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION: &str = "revision";
/// Room checks after a failed commit; empty otherwise.
const PROBE: TableDefinition<&str, &[u8]> = TableDefinition::new("probe");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store database: {0}")]
    Db(String),
    #[error("corrupt object {key}: {source}")]
    Corrupt {
        key: String,
        source: serde_json::Error,
    },
    #[error("the store is closed")]
    Closed,
    /// A commit failed (a full disk, an I/O error): nothing from it was acknowledged, and
    /// writes are refused until a probe commit succeeds again.
    #[error(
        "the store cannot write ({0}); writes are refused until it can, which is checked every second"
    )]
    Unwritable(String),
    /// Refused before anything was written: the object would exceed [`MAX_OBJECT_BYTES`].
    #[error("object {key} is too large: {bytes} bytes, the limit is {MAX_OBJECT_BYTES}")]
    TooLarge { key: String, bytes: usize },
    /// Refused before anything was written: the object nests deeper than [`MAX_DEPTH`].
    #[error("object {key} nests {depth} levels deep at {path}, the limit is {limit}")]
    TooDeep {
        key: String,
        depth: usize,
        path: String,
        limit: usize,
    },
    #[error("store task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

fn db_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Db(e.to_string())
}

/// One object as currently stored: its revision, the JSON served to clients (serialized once
/// per write), the slim metadata view selectors read (as JSON too), and the few fields the
/// collector and the write paths check on every object, unpacked. Parsed JSON costs several
/// times its size, so nothing is kept parsed: memory must stay small with 100,000 objects.
#[derive(Debug)]
pub struct Stored {
    pub rev: u64,
    pub json: Bytes,
    /// `apiVersion`, `kind`, `metadata` without `managedFields` and `annotations`, and the
    /// top-level fields Events are selected and expired by; see [`Stored::meta`]. Only kept
    /// when it is under a quarter of the object's size: for smaller objects (Events, whose
    /// view is half of them) parsing the whole object is about as cheap, and a second copy
    /// would cost half as much again as the object.
    meta_json: Option<Box<[u8]>>,
    pub api_version: Box<str>,
    pub uid: Box<str>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.ownerReferences` is not empty.
    pub has_owners: bool,
    /// Events: when last observed (the collector expires them after a TTL).
    pub last_seen: Option<jiff::Timestamp>,
}

/// Top-level fields kept in [`Stored::meta`] besides metadata (Event selection and expiry).
const META_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "involvedObject",
    "lastTimestamp",
    "eventTime",
    "series",
    "type",
    "reason",
];

impl Stored {
    pub fn new(rev: u64, value: Value) -> Self {
        let mut json = serde_json::to_vec(&value).expect("JSON values serialize");
        // Kept for the object's lifetime: without this, up to half of it is spare capacity.
        json.shrink_to_fit();
        let json = Bytes::from(json);
        let mut meta = serde_json::Map::new();
        if let Value::Object(o) = &value {
            for k in META_FIELDS {
                if let Some(v) = o.get(*k) {
                    meta.insert((*k).to_string(), v.clone());
                }
            }
            if let Some(Value::Object(m)) = o.get("metadata") {
                let mut m = m.clone();
                m.remove("managedFields");
                m.remove("annotations");
                meta.insert("metadata".into(), Value::Object(m));
            }
        }
        let meta = Value::Object(meta);
        let text = |p: &str| meta.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let api_version = text("/apiVersion").into();
        let uid = text("/metadata/uid").into();
        let deleting = meta.pointer("/metadata/deletionTimestamp").is_some();
        let has_owners = meta
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|r| !r.is_empty());
        let last_seen = (text("/kind") == "Event")
            .then(|| crate::meta::event_last_seen(&meta))
            .flatten();
        let meta_json = serde_json::to_vec(&meta).expect("JSON values serialize");
        let meta_json = (meta_json.len() * 4 < json.len()).then(|| meta_json.into_boxed_slice());
        Stored {
            rev,
            json,
            meta_json,
            api_version,
            uid,
            deleting,
            has_owners,
            last_seen,
        }
    }

    /// The slim metadata view (see [`Stored::meta_json`]) parsed, or for small objects the
    /// whole object: a superset selectors read the same way.
    pub fn meta(&self) -> Value {
        let bytes = self.meta_json.as_deref().unwrap_or(&self.json);
        serde_json::from_slice(bytes).unwrap_or(Value::Null)
    }

    /// The whole object, parsed from its JSON.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("stored JSON parses")
    }
}

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
    fn held_bytes(&self) -> usize {
        self.obj.json.len() + self.prev.as_ref().map_or(0, |p| p.json.len())
    }
}

/// A change to make in one transaction.
#[derive(Debug)]
pub enum Op {
    Put {
        resource: String,
        namespace: String,
        name: String,
        value: Value,
    },
    Delete {
        resource: String,
        namespace: String,
        name: String,
    },
}

type Objects = BTreeMap<(String, String), Arc<Stored>>;

/// The in-memory view: current objects per resource and recent events.
#[derive(Default)]
pub struct State {
    rev: u64,
    objects: HashMap<String, Objects>,
    history: VecDeque<Arc<Event>>,
    /// JSON bytes referenced by `history` (shared with current objects or not).
    history_bytes: usize,
    /// Every event with a revision above this one is still in `history`.
    compacted: u64,
}

impl State {
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

/// (resource, namespace, name)
type Key = (String, String, String);

/// A change decided by a writer, waiting to be committed.
struct Pending {
    kind: EventType,
    resource: String,
    namespace: String,
    name: String,
    stored: Arc<Stored>,
}

/// The write side: changes decided but not yet durable. Writers decide against the committed
/// state plus this overlay, so one fsync can cover every writer that queued meanwhile (group
/// commit) while each still sees the writes decided before it.
#[derive(Default)]
struct Writer {
    /// The last revision handed out (at least the committed one).
    next_rev: u64,
    /// Latest undurable version of each key touched by queued or in-flight batches, with the
    /// revision that produced it.
    /// Entries at or below the published revision are dropped by the next writer.
    overlay: HashMap<Key, (u64, Option<Arc<Stored>>)>,
    closed: bool,
}

/// Decided changes waiting for the committer. Apart from [`Writer`] so the committer never
/// waits for a writer that is still deciding: what was queued before is made durable and
/// visible meanwhile.
#[derive(Default)]
struct Queue {
    batch: Vec<Pending>,
    waiters: Vec<oneshot::Sender<Result<(), String>>>,
    committing: bool,
    /// A commit failed: the overlay no longer matches the disk, so further writes are refused
    /// until the recovery task has dropped the overlay and made a probe commit.
    failed: Option<String>,
}

/// What a writer decides against: the committed state with the queued changes on top. It
/// takes the state's read lock only for each lookup, never across a writer's decision, so a
/// slow writer cannot hold up the committer's publication and with it every reader.
///
/// Consistent without holding the lock: the committer publishes only keys that are still in
/// the overlay (it removes them under the writer lock, which the writer holds), so a key read
/// through the state is one no queued change touches.
pub struct View<'a> {
    state: &'a RwLock<State>,
    overlay: &'a HashMap<Key, (u64, Option<Arc<Stored>>)>,
}

impl View<'_> {
    fn committed(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().expect("store lock")
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        if !self.overlay.is_empty()
            && let Some((_, v)) = self.overlay.get(&(
                resource.to_string(),
                namespace.to_string(),
                name.to_string(),
            ))
        {
            return v.clone();
        }
        self.committed().get(resource, namespace, name).cloned()
    }

    pub fn count(&self, resource: &str, namespace: Option<&str>) -> usize {
        let state = self.committed();
        let mut n = state.count(resource, namespace) as isize;
        for ((r, ns, name), (_, v)) in self.overlay {
            if r != resource || namespace.is_some_and(|want| want != ns) {
                continue;
            }
            match (state.get(r, ns, name).is_some(), v.is_some()) {
                (false, true) => n += 1,
                (true, false) => n -= 1,
                _ => {}
            }
        }
        n.max(0) as usize
    }

    /// Runs `f` over every (resource, object) pair (a quick scan: the read lock is held).
    pub fn with_all<T>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = (&str, &Arc<Stored>)>) -> T,
    ) -> T {
        let state = self.committed();
        let overlay = self.overlay;
        let committed = state.objects.iter().flat_map(move |(r, m)| {
            m.iter()
                .filter(move |((ns, name), _)| {
                    overlay.is_empty()
                        || !overlay.contains_key(&(r.clone(), ns.clone(), name.clone()))
                })
                .map(move |(_, v)| (r.as_str(), v))
        });
        let queued = overlay
            .iter()
            .filter_map(|((r, _, _), (_, v))| v.as_ref().map(|v| (r.as_str(), v)));
        f(&mut committed.chain(queued))
    }
}

struct Inner {
    /// `None` once closed, so the file lock is released even while handles to the store live on.
    db: RwLock<Option<Arc<Database>>>,
    /// Where the database lives, to reopen it after a failed commit.
    path: PathBuf,
    state: RwLock<State>,
    writer: Mutex<Writer>,
    queue: std::sync::Mutex<Queue>,
    /// The last revision visible to readers.
    published: std::sync::atomic::AtomicU64,
    /// Shared with the committer, which holds the store only weakly so dropping the last
    /// handle closes the file.
    wake: Arc<Notify>,
    rev_tx: watch::Sender<u64>,
    history_limit: usize,
    history_bytes: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Let the committer see that the store is gone.
        self.wake.notify_one();
    }
}

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens (or creates) the database at `path`, loads every object into memory and starts
    /// the committer task (so it must be called inside a Tokio runtime).
    pub fn open(path: &Path, limits: HistoryLimits) -> Result<Store, StoreError> {
        // Reads are served from memory, so redb's page cache only needs to cover writes.
        let db = Database::builder()
            .set_cache_size(2 << 20)
            .create(path)
            .map_err(db_err)?;
        let mut state = State::default();
        {
            let tx = db.begin_write().map_err(db_err)?;
            // Make sure both tables exist so that read transactions never fail on a fresh file.
            tx.open_table(OBJECTS).map_err(db_err)?;
            tx.open_table(META).map_err(db_err)?;
            tx.commit().map_err(db_err)?;
        }
        let tx = db.begin_read().map_err(db_err)?;
        let meta = tx.open_table(META).map_err(db_err)?;
        state.rev = meta.get(REVISION).map_err(db_err)?.map_or(0, |v| v.value());
        let objects = tx.open_table(OBJECTS).map_err(db_err)?;
        let mut bad: Vec<(String, Vec<u8>, String)> = Vec::new();
        for row in objects.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            let key = k.value();
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
        // After a restart the history is empty: watches from older revisions get 410 Gone and
        // clients relist, exactly as after an etcd compaction.
        state.compacted = state.rev;
        let (rev_tx, _) = watch::channel(state.rev);
        tracing::info!(revision = state.rev, quarantined, path = %path.display(), "store opened");
        let opened_at = state.rev;
        let writer = Writer {
            next_rev: state.rev,
            ..Default::default()
        };
        let inner = Arc::new(Inner {
            db: RwLock::new(Some(Arc::new(db))),
            path: path.to_path_buf(),
            state: RwLock::new(state),
            writer: Mutex::new(writer),
            queue: Default::default(),
            published: std::sync::atomic::AtomicU64::new(opened_at),
            wake: Arc::new(Notify::new()),
            rev_tx,
            history_limit: limits.events.max(16),
            history_bytes: limits.bytes,
        });
        tokio::spawn(committer(Arc::downgrade(&inner), inner.wake.clone()));
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
        self.read(|s| {
            if after < s.compacted {
                return Err(Gone {
                    oldest: s.compacted,
                });
            }
            let start = s.history.partition_point(|e| e.obj.rev <= after);
            let events = s
                .history
                .range(start..)
                .filter(|e| e.resource == resource)
                .cloned()
                .collect();
            Ok((events, s.rev))
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
                let (ops, out) = f(&view)?;
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
        while s.history.front().is_some_and(|e| e.obj.rev <= rev) {
            if let Some(e) = s.history.pop_front() {
                s.history_bytes -= e.held_bytes();
            }
        }
        s.compacted = s.compacted.max(rev.min(s.rev));
    }
}

pub fn resource_version(value: &Value) -> Option<u64> {
    value
        .pointer("/metadata/resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

/// Turns ops into pending changes with revisions after `last_rev`. Later ops in one call see
/// earlier ones (a put then a delete of the same object).
fn prepare(view: &View, ops: Vec<Op>, last_rev: u64) -> Vec<Pending> {
    let mut rev = last_rev;
    let mut out = Vec::with_capacity(ops.len());
    let mut local: HashMap<Key, Option<Value>> = HashMap::new();
    for op in ops {
        match op {
            Op::Put {
                resource,
                namespace,
                name,
                mut value,
            } => {
                rev += 1;
                set_resource_version(&mut value, rev);
                let key = (resource.clone(), namespace.clone(), name.clone());
                let existed = match local.get(&key) {
                    Some(v) => v.is_some(),
                    None => view.get(&resource, &namespace, &name).is_some(),
                };
                local.insert(key, Some(value.clone()));
                out.push(Pending {
                    kind: if existed {
                        EventType::Modified
                    } else {
                        EventType::Added
                    },
                    resource,
                    namespace,
                    name,
                    stored: Arc::new(Stored::new(rev, value)),
                });
            }
            Op::Delete {
                resource,
                namespace,
                name,
            } => {
                let key = (resource.clone(), namespace.clone(), name.clone());
                let old = match local.get(&key) {
                    Some(v) => v.clone(),
                    None => view.get(&resource, &namespace, &name).map(|o| o.value()),
                };
                let Some(mut value) = old else {
                    continue;
                };
                rev += 1;
                set_resource_version(&mut value, rev);
                local.insert(key, None);
                out.push(Pending {
                    kind: EventType::Deleted,
                    resource,
                    namespace,
                    name,
                    stored: Arc::new(Stored::new(rev, value)),
                });
            }
        }
    }
    out
}

/// Commits queued writes: everything queued since the last commit goes into one redb
/// transaction (one fsync), is then published to readers and watchers, and its writers are
/// answered.
async fn committer(weak: std::sync::Weak<Inner>, wake: Arc<Notify>) {
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

/// After a failed commit: once a second, drop the undurable overlay (nothing in it was
/// acknowledged), reopen the database (redb wants that after an I/O error) and make a probe
/// commit; when it lands, writes are accepted again.
async fn recover(weak: std::sync::Weak<Inner>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let mut w = inner.writer.lock().await;
        if w.closed {
            return;
        }
        {
            let q = inner.queue.lock().expect("queue lock");
            if q.committing || !q.batch.is_empty() {
                continue;
            }
        }
        let published = inner.published.load(std::sync::atomic::Ordering::Acquire);
        w.overlay.clear();
        w.next_rev = published;
        let old = inner.db.write().expect("store lock").take();
        drop(old);
        let path = inner.path.clone();
        let reopened = tokio::task::spawn_blocking(move || -> Result<Database, StoreError> {
            let db = Database::builder()
                .set_cache_size(2 << 20)
                .create(&path)
                .map_err(db_err)?;
            injected_fault()?;
            // A probe the size of two of the largest objects, committed then removed: writes
            // are accepted again only with that much room, so readiness does not flap while
            // the disk stays full (redb can often still rewrite a few pages it has).
            let probe = vec![0u8; 2 * MAX_OBJECT_BYTES];
            for keep in [true, false] {
                let mut tx = db.begin_write().map_err(db_err)?;
                tx.set_durability(Durability::Immediate).map_err(db_err)?;
                {
                    let mut table = tx.open_table(PROBE).map_err(db_err)?;
                    if keep {
                        table.insert("probe", probe.as_slice()).map_err(db_err)?;
                    } else {
                        table.remove("probe").map_err(db_err)?;
                    }
                    let mut meta = tx.open_table(META).map_err(db_err)?;
                    meta.insert(REVISION, published).map_err(db_err)?;
                }
                tx.commit().map_err(db_err)?;
            }
            Ok(db)
        })
        .await;
        match reopened {
            Ok(Ok(db)) => {
                *inner.db.write().expect("store lock") = Some(Arc::new(db));
                inner.queue.lock().expect("queue lock").failed = None;
                tracing::warn!(revision = published, "the store can write again");
                return;
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "the store still cannot write"),
            Err(e) => tracing::debug!(error = %e, "store probe failed"),
        }
    }
}

/// The documented fault-injection hook for machines where a small filesystem cannot be
/// mounted: while the file named by `FERROMETAL_FAULT_DISK_FULL` exists, every commit fails as
/// on a full disk.
fn injected_fault() -> Result<(), StoreError> {
    // Read once: the environment does not change under a running server, and commits are hot.
    static FLAG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    match FLAG.get_or_init(|| std::env::var_os("FERROMETAL_FAULT_DISK_FULL").map(PathBuf::from)) {
        Some(flag) if flag.exists() => Err(StoreError::Db(format!(
            "No space left on device (injected: {} exists)",
            flag.display()
        ))),
        _ => Ok(()),
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

fn set_resource_version(value: &mut Value, rev: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(name: &str, v: i64) -> Op {
        Op::Put {
            resource: "configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
            value: json!({"metadata": {"name": name}, "data": {"v": v.to_string()}}),
        }
    }

    async fn write(store: &Store, ops: Vec<Op>) -> Vec<Arc<Stored>> {
        store
            .write(|_| Ok::<_, StoreError>((ops, ())))
            .await
            .unwrap()
            .0
    }

    #[tokio::test]
    async fn revisions_persist_and_never_go_backwards() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            let store = Store::open(&path, HistoryLimits::events(100)).unwrap();
            let out = write(&store, vec![put("a", 1), put("b", 2)]).await;
            assert_eq!(out[0].rev, 1);
            assert_eq!(out[1].rev, 2);
            write(
                &store,
                vec![Op::Delete {
                    resource: "configmaps".into(),
                    namespace: "default".into(),
                    name: "a".into(),
                }],
            )
            .await;
            assert_eq!(store.revision(), 3);
        }
        let store = Store::open(&path, HistoryLimits::events(100)).unwrap();
        assert_eq!(store.revision(), 3);
        assert!(store.get("configmaps", "default", "a").is_none());
        let b = store.get("configmaps", "default", "b").unwrap();
        assert_eq!(b.rev, 2);
        assert_eq!(b.value()["metadata"]["resourceVersion"], "2");
        // History starts empty after a reopen: older revisions are gone, the current one is not.
        assert!(store.events_since("configmaps", 2).is_err());
        assert!(store.events_since("configmaps", 3).unwrap().0.is_empty());
        let out = write(&store, vec![put("c", 3)]).await;
        assert_eq!(out[0].rev, 4);
    }

    #[tokio::test]
    async fn history_is_bounded_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), HistoryLimits::events(16)).unwrap();
        for i in 0..40 {
            write(&store, vec![put(&format!("o{i}"), i)]).await;
        }
        assert!(store.events_since("configmaps", 10).is_err());
        let (ev, rev) = store.events_since("configmaps", 30).unwrap();
        assert_eq!(rev, 40);
        assert_eq!(ev.len(), 10);
        assert_eq!(ev[0].obj.rev, 31);
        assert!(store.events_since("secrets", 30).unwrap().0.is_empty());
        store.compact(35);
        assert!(store.events_since("configmaps", 30).is_err());
        assert_eq!(store.events_since("configmaps", 35).unwrap().0.len(), 5);
    }

    #[tokio::test]
    async fn list_by_namespace_and_continue() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), HistoryLimits::events(16)).unwrap();
        let mk = |ns: &str, n: &str| Op::Put {
            resource: "configmaps".into(),
            namespace: ns.into(),
            name: n.into(),
            value: json!({"metadata": {"name": n, "namespace": ns}}),
        };
        write(
            &store,
            vec![mk("a", "1"), mk("b", "1"), mk("b", "2"), mk("c", "1")],
        )
        .await;
        let names = |ns: Option<&str>, after: Option<(&str, &str)>| {
            store.read(|s| {
                s.list("configmaps", ns, after)
                    .map(|o| o.meta()["metadata"]["name"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(names(Some("b"), None), ["1", "2"]);
        assert_eq!(names(Some("b"), Some(("b", "1"))), ["2"]);
        assert_eq!(names(None, Some(("b", "1"))), ["2", "1"]);
        assert_eq!(names(None, None).len(), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_see_queued_writes() {
        // Each writer increments a counter it reads from the view: with group commit the
        // later writers must see the earlier, not yet durable, increments.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), HistoryLimits::events(1000)).unwrap();
        write(&store, vec![put("counter", 0)]).await;
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .write(|v| {
                        let cur: i64 = v
                            .get("configmaps", "default", "counter")
                            .and_then(|o| o.value()["data"]["v"].as_str()?.parse().ok())
                            .unwrap();
                        Ok::<_, StoreError>((vec![put("counter", cur + 1)], ()))
                    })
                    .await
                    .unwrap()
            }));
        }
        let mut revs = Vec::new();
        for t in tasks {
            revs.push(t.await.unwrap().0[0].rev);
        }
        revs.sort();
        revs.dedup();
        assert_eq!(revs.len(), 50, "every write got its own revision");
        let c = store.get("configmaps", "default", "counter").unwrap();
        assert_eq!(c.value()["data"]["v"], "50");
        assert_eq!(store.revision(), 51);
        let (events, _) = store.events_since("configmaps", 1).unwrap();
        assert_eq!(events.len(), 50);
        assert!(events.windows(2).all(|w| w[0].obj.rev < w[1].obj.rev));
    }

    /// A writer that takes long to decide (CEL over a large object) holds the writer lock only:
    /// the batch committed before it is still published, and readers and watchers see it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_slow_writer_does_not_stall_readers() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), HistoryLimits::events(1000)).unwrap();
        write(&store, vec![put("before", 0)]).await;
        let mut revs = store.subscribe();
        // Queue a write, then a slow decision right behind it.
        let (queued_tx, queued_rx) = std::sync::mpsc::channel::<()>();
        let first = tokio::spawn({
            let store = store.clone();
            async move {
                store
                    .write(move |_| {
                        queued_tx.send(()).unwrap();
                        Ok::<_, StoreError>((vec![put("first", 1)], ()))
                    })
                    .await
                    .unwrap()
            }
        });
        // Its decision is queued before the writer lock is free for the slow one.
        tokio::task::spawn_blocking(move || queued_rx.recv().unwrap())
            .await
            .unwrap();
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let slow = tokio::spawn({
            let store = store.clone();
            async move {
                store
                    .write(move |v| {
                        let _ = v.get("configmaps", "default", "before");
                        entered_tx.send(()).unwrap();
                        // Blocks this worker thread, as a long computation would.
                        release_rx.recv().unwrap();
                        Ok::<_, StoreError>((vec![put("slow", 2)], ()))
                    })
                    .await
                    .unwrap()
            }
        });
        tokio::task::spawn_blocking(move || entered_rx.recv().unwrap())
            .await
            .unwrap();
        // While the slow writer decides: the first write completes and is visible.
        let done = tokio::time::timeout(std::time::Duration::from_secs(30), first).await;
        assert!(done.is_ok(), "the write before the slow one was held up");
        assert!(store.get("configmaps", "default", "first").is_some());
        assert!(store.get("configmaps", "default", "before").is_some());
        let moved = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while store.get("configmaps", "default", "first").is_none() {
                revs.changed().await.unwrap();
            }
        })
        .await;
        assert!(moved.is_ok());
        release_tx.send(()).unwrap();
        slow.await.unwrap();
        assert!(store.get("configmaps", "default", "slow").is_some());
    }
}
