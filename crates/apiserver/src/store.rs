//! The durable object store: redb on disk, an in-memory index of current objects, and a bounded
//! history of change events for watches.
//!
//! Every write is one redb transaction committed with `Durability::Immediate` before the caller
//! sees success, so an acknowledged write survives `kill -9`. Reads are served from memory; the
//! disk is only read at open. Each changed object gets its own revision from one global counter,
//! which doubles as `metadata.resourceVersion`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::{Mutex, watch};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION: &str = "revision";

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
    #[error("store task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

fn db_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Db(e.to_string())
}

/// One object as currently stored: its revision, parsed value and the JSON served to clients
/// (serialized once per write).
#[derive(Debug)]
pub struct Stored {
    pub rev: u64,
    pub value: Value,
    pub json: Bytes,
}

impl Stored {
    fn new(rev: u64, value: Value) -> Self {
        let json = Bytes::from(serde_json::to_vec(&value).expect("JSON values serialize"));
        Stored { rev, value, json }
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
    pub obj: Arc<Stored>,
    /// The object before the change, if it existed (watch filters need both sides).
    pub prev: Option<Arc<Stored>>,
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

/// Watch history lookups fail with this when the wanted revision was compacted away.
#[derive(Debug, Clone, Copy)]
pub struct Gone {
    pub oldest: u64,
}

struct Inner {
    /// `None` once closed, so the file lock is released even while handles to the store live on.
    db: RwLock<Option<Arc<Database>>>,
    state: RwLock<State>,
    write: Mutex<()>,
    rev_tx: watch::Sender<u64>,
    history_limit: usize,
}

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens (or creates) the database at `path` and loads every object into memory.
    pub fn open(path: &Path, history_limit: usize) -> Result<Store, StoreError> {
        let db = Database::create(path).map_err(db_err)?;
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
        for row in objects.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            let key = k.value();
            let value: Value =
                serde_json::from_slice(v.value()).map_err(|source| StoreError::Corrupt {
                    key: key.to_string(),
                    source,
                })?;
            let mut parts = key.splitn(3, '/');
            let (Some(resource), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(StoreError::Db(format!("malformed key {key}")));
            };
            let rev = resource_version(&value).unwrap_or(0);
            state
                .objects
                .entry(resource.to_string())
                .or_default()
                .insert(
                    (ns.to_string(), name.to_string()),
                    Arc::new(Stored::new(rev, value)),
                );
        }
        drop(objects);
        drop(meta);
        drop(tx);
        // After a restart the history is empty: watches from older revisions get 410 Gone and
        // clients relist, exactly as after an etcd compaction.
        state.compacted = state.rev;
        let (rev_tx, _) = watch::channel(state.rev);
        tracing::info!(revision = state.rev, path = %path.display(), "store opened");
        Ok(Store {
            inner: Arc::new(Inner {
                db: RwLock::new(Some(Arc::new(db))),
                state: RwLock::new(state),
                write: Mutex::new(()),
                rev_tx,
                history_limit: history_limit.max(16),
            }),
        })
    }

    /// Runs `f` against the current state; the guard must not be held across an await.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.inner.state.read().expect("store lock"))
    }

    pub fn revision(&self) -> u64 {
        self.read(|s| s.rev)
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        self.read(|s| s.get(resource, namespace, name).cloned())
    }

    /// A receiver that changes whenever the revision moves; watchers wait on it.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.rev_tx.subscribe()
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

    /// Serializes writers, lets `f` decide the changes against a consistent state, commits them
    /// durably and only then publishes them. Returns the stored result of each op, in order
    /// (for deletions, the removed object stamped with the deletion revision).
    pub async fn write<T, E>(
        &self,
        f: impl FnOnce(&State) -> Result<(Vec<Op>, T), E>,
    ) -> Result<(Vec<Arc<Stored>>, T), E>
    where
        E: From<StoreError>,
    {
        let _guard = self.inner.write.lock().await;
        let db = self
            .inner
            .db
            .read()
            .expect("store lock")
            .clone()
            .ok_or(StoreError::Closed)?;
        let (ops, out) = self.read(f)?;
        if ops.is_empty() {
            return Ok((Vec::new(), out));
        }
        // Decide the new revisions and encode everything before touching the disk.
        let mut rev = self.revision();
        let mut prepared = Vec::with_capacity(ops.len());
        // Later ops in one batch see earlier ones (a put then a delete of the same object).
        let mut pending: HashMap<String, Value> = HashMap::new();
        self.read(|s| {
            for op in ops {
                rev += 1;
                match op {
                    Op::Put {
                        resource,
                        namespace,
                        name,
                        mut value,
                    } => {
                        set_resource_version(&mut value, rev);
                        let pkey = format!("{resource}/{namespace}/{name}");
                        let existed = s.get(&resource, &namespace, &name).is_some()
                            || pending.contains_key(&pkey);
                        pending.insert(pkey, value.clone());
                        let kind = if existed {
                            EventType::Modified
                        } else {
                            EventType::Added
                        };
                        prepared.push((kind, resource, namespace, name, Stored::new(rev, value)));
                    }
                    Op::Delete {
                        resource,
                        namespace,
                        name,
                    } => {
                        let pkey = format!("{resource}/{namespace}/{name}");
                        let old = match pending.remove(&pkey) {
                            Some(v) => v,
                            None => match s.get(&resource, &namespace, &name) {
                                Some(o) => o.value.clone(),
                                None => {
                                    rev -= 1;
                                    continue;
                                }
                            },
                        };
                        let mut value = old;
                        set_resource_version(&mut value, rev);
                        prepared.push((
                            EventType::Deleted,
                            resource,
                            namespace,
                            name,
                            Stored::new(rev, value),
                        ));
                    }
                }
            }
        });
        let rows: Vec<(String, Option<Bytes>)> = prepared
            .iter()
            .map(|(kind, r, ns, n, st)| {
                let key = format!("{r}/{ns}/{n}");
                (key, (*kind != EventType::Deleted).then(|| st.json.clone()))
            })
            .collect();
        let last = rev;
        tokio::task::spawn_blocking(move || -> Result<(), StoreError> {
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
        .await
        .map_err(StoreError::from)??;

        let mut results = Vec::with_capacity(prepared.len());
        {
            let mut s = self.inner.state.write().expect("store lock");
            for (kind, resource, namespace, name, stored) in prepared {
                let stored = Arc::new(stored);
                let map = s.objects.entry(resource.clone()).or_default();
                let key = (namespace.clone(), name.clone());
                let prev = if kind == EventType::Deleted {
                    map.remove(&key)
                } else {
                    map.insert(key, stored.clone())
                };
                s.history.push_back(Arc::new(Event {
                    kind,
                    resource,
                    namespace,
                    name,
                    obj: stored.clone(),
                    prev,
                }));
                results.push(stored);
            }
            s.rev = last;
            while s.history.len() > self.inner.history_limit {
                if let Some(e) = s.history.pop_front() {
                    s.compacted = e.obj.rev;
                }
            }
        }
        self.inner.rev_tx.send_replace(last);
        Ok((results, out))
    }

    /// Waits for the write in progress, then closes the database file. Later writes fail with
    /// [`StoreError::Closed`]; reads keep answering from memory.
    pub async fn close(&self) {
        let _guard = self.inner.write.lock().await;
        self.inner.db.write().expect("store lock").take();
    }

    /// Drops history up to and including `rev` (watches from older revisions then get 410).
    pub fn compact(&self, rev: u64) {
        let mut s = self.inner.state.write().expect("store lock");
        while s.history.front().is_some_and(|e| e.obj.rev <= rev) {
            s.history.pop_front();
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
            let store = Store::open(&path, 100).unwrap();
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
        let store = Store::open(&path, 100).unwrap();
        assert_eq!(store.revision(), 3);
        assert!(store.get("configmaps", "default", "a").is_none());
        let b = store.get("configmaps", "default", "b").unwrap();
        assert_eq!(b.rev, 2);
        assert_eq!(b.value["metadata"]["resourceVersion"], "2");
        // History starts empty after a reopen: older revisions are gone, the current one is not.
        assert!(store.events_since("configmaps", 2).is_err());
        assert!(store.events_since("configmaps", 3).unwrap().0.is_empty());
        let out = write(&store, vec![put("c", 3)]).await;
        assert_eq!(out[0].rev, 4);
    }

    #[tokio::test]
    async fn history_is_bounded_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), 16).unwrap();
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
        let store = Store::open(&dir.path().join("db"), 16).unwrap();
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
                    .map(|o| o.value["metadata"]["name"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(names(Some("b"), None), ["1", "2"]);
        assert_eq!(names(Some("b"), Some(("b", "1"))), ["2"]);
        assert_eq!(names(None, Some(("b", "1"))), ["2", "1"]);
        assert_eq!(names(None, None).len(), 4);
    }
}
