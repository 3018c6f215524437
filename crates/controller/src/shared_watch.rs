//! One watch per kind for the whole process.
//!
//! Several controllers need the same kinds (hosts wake the host, claim and BMCJob controllers;
//! Secrets wake three of them). Each watching on its own made the API server send, and this
//! process decode and cache, every change once per controller. A [`SharedWatch`] opens one
//! watch, keeps one cache ([`Store`]) if the kind is cached, and hands each subscriber its own
//! stream of the same events. Subscribers share each object (`Arc`: the cache's own copy where
//! there is one) instead of each getting a deep copy, which cost seven copies of every host
//! change; kube's `Controller` takes such streams (`for_shared_stream`,
//! `watches_shared_stream`). The cache is updated before any subscriber sees an event, so a
//! controller woken by a change finds it in the cache. (kube's own sharing, `reflect_shared`,
//! passes no deletions and lets one slow subscriber's full buffer hold up the watch for all.)

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, future};
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// A subscriber's events, as `watcher(..)` would give them with each object shared (errors
/// stay with the watch, which retries them).
pub type Events<K> = BoxStream<'static, watcher::Event<Arc<K>>>;

/// A subscriber's objects: shared, as kube's `Controller` takes them.
pub type Objects<K> = BoxStream<'static, Arc<K>>;

/// A kind's cache and this subscriber's events of it.
pub struct Watched<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub store: Store<K>,
    pub events: Events<K>,
}

/// One watch of one kind; subscribe every consumer before [`SharedWatch::run`].
///
/// Each subscriber's channel is unbounded: a kube `Controller` moves its trigger streams into
/// its own de-duplicating queue as they come, so none lags far behind, and a bounded channel
/// would let one stalled controller stop the watch for all the others.
pub struct SharedWatch<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Option<Writer<K>>,
    store: Option<Store<K>>,
    subscribers: Vec<mpsc::UnboundedSender<watcher::Event<Arc<K>>>>,
}

impl<K> SharedWatch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// A watch whose objects are kept in one cache for every subscriber.
    pub fn cached() -> Self {
        let (store, writer) = reflector::store();
        SharedWatch {
            writer: Some(writer),
            store: Some(store),
            subscribers: Vec::new(),
        }
    }

    /// A watch only used to wake controllers: nothing is kept (Secrets: most are not ours).
    pub fn uncached() -> Self {
        SharedWatch {
            writer: None,
            store: None,
            subscribers: Vec::new(),
        }
    }

    /// A new subscriber's events, from the first list on.
    pub fn events(&mut self) -> Events<K> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.push(tx);
        futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        })
        .boxed()
    }

    /// A new subscriber's events with the shared cache.
    ///
    /// # Panics
    /// On a watch made [`uncached`](Self::uncached): a programming error.
    pub fn subscribe(&mut self) -> Watched<K> {
        let store = self
            .store
            .clone()
            .expect("subscribe() needs a cached SharedWatch");
        Watched {
            store,
            events: self.events(),
        }
    }

    /// Watches until `shutdown` resolves or every subscriber has gone, passing each event to
    /// every subscriber. `modify` trims each object once, before it is cached or passed on.
    pub async fn run(
        self,
        api: Api<K>,
        config: watcher::Config,
        modify: impl FnMut(&mut K) + Send + 'static,
        shutdown: impl Future<Output = ()>,
    ) {
        let SharedWatch {
            writer,
            store,
            mut subscribers,
        } = self;
        if subscribers.is_empty() {
            return;
        }
        let events = watcher(api, config).default_backoff().modify(modify);
        let mut events = match writer {
            Some(writer) => events.reflect(writer).boxed(),
            None => events.boxed(),
        };
        let fan_out = async move {
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        let event = shared(event, store.as_ref());
                        subscribers.retain(|s| s.send(event.clone()).is_ok());
                        if subscribers.is_empty() {
                            return;
                        }
                    }
                    // The watch retries with backoff; each controller only ever saw these
                    // logged and skipped.
                    Err(e) => {
                        tracing::debug!(kind = %K::kind(&K::DynamicType::default()), error = %e, "watch")
                    }
                }
            }
        };
        tokio::select! {
            () = fan_out => {}
            () = shutdown => {}
        }
    }
}

/// The event with its object shared: an applied object is the cache's own copy (just written
/// there by the reflector), anything else is moved into an `Arc`, never copied.
pub(crate) fn shared<K>(
    event: watcher::Event<K>,
    store: Option<&Store<K>>,
) -> watcher::Event<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    use watcher::Event;
    match event {
        Event::Apply(k) => Event::Apply(
            store
                .and_then(|s| s.get(&reflector::ObjectRef::from_obj(&k)))
                .filter(|cached| cached.resource_version() == k.resource_version())
                .unwrap_or_else(|| Arc::new(k)),
        ),
        // During a relist the reflector buffers objects until the list is done.
        Event::InitApply(k) => Event::InitApply(Arc::new(k)),
        Event::Delete(k) => Event::Delete(Arc::new(k)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// The objects added or changed, as kube's `applied_objects`.
pub fn applied<K>(events: Events<K>) -> Objects<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, |_| None, None, false)
}

/// The objects added, changed or deleted, as kube's `touched_objects`.
pub fn touched<K>(events: Events<K>) -> Objects<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, |_| None, None, true)
}

/// Drops what no controller of this process reads: the field managers' bookkeeping, often as
/// large as the rest of the object.
pub fn without_managed_fields<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
}

/// The objects whose `trigger` hash changed, and every deleted one. kube's `predicate_filter`
/// would drop a deletion whose hash matches the object's last update, and a controller that
/// must notice its host is gone cannot have that.
pub fn changed_or_gone<K>(events: Events<K>, trigger: fn(&K) -> Option<u64>) -> Objects<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, trigger, None, true)
}

/// The objects added or changed whose `trigger` hash changed, as kube's `applied_objects` and
/// `predicate_filter`; a deletion is not passed on but forgotten, so the filter holds only
/// live objects and one made again under the same name passes.
pub fn applied_changed<K>(events: Events<K>, trigger: fn(&K) -> Option<u64>) -> Objects<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, trigger, None, false)
}

/// The objects whose `ask` (0: nothing) changed: an object first seen asking nothing, or gone
/// while asking nothing, is passed over. For objects made by the hundred that seldom ask
/// anything of whoever watches them.
pub fn ask_changed<K>(events: Events<K>, ask: fn(&K) -> u64) -> Objects<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, move |k| Some(ask(k)), Some(0), true)
}

/// The objects whose `trigger` changed from the last one passed (or from `quiet`, for an object
/// not seen yet; only values other than `quiet` are remembered); `None` always passes. With
/// `deletions`, a deletion passes when nothing is quiet, or when the object was remembered.
fn changes<K>(
    events: Events<K>,
    trigger: impl Fn(&K) -> Option<u64> + Send + 'static,
    quiet: Option<u64>,
    deletions: bool,
) -> Objects<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    let mut seen: std::collections::HashMap<reflector::ObjectRef<K>, u64> =
        std::collections::HashMap::new();
    events
        .filter_map(move |event| {
            let out = match event {
                watcher::Event::Apply(k) | watcher::Event::InitApply(k) => match trigger(&k) {
                    None => Some(k),
                    Some(h) => {
                        let key = reflector::ObjectRef::from_obj(&*k);
                        if seen.get(&key).copied().or(quiet) == Some(h) {
                            None
                        } else {
                            if Some(h) == quiet {
                                seen.remove(&key);
                            } else {
                                seen.insert(key, h);
                            }
                            Some(k)
                        }
                    }
                },
                watcher::Event::Delete(k) => {
                    let remembered = seen.remove(&reflector::ObjectRef::from_obj(&*k));
                    (deletions && (quiet.is_none() || remembered.is_some())).then_some(k)
                }
                watcher::Event::Init | watcher::Event::InitDone => None,
            };
            future::ready(out)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::collections::BTreeMap;
    use watcher::Event;

    fn cm(name: &str, rv: &str, value: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        c.metadata.resource_version = Some(rv.into());
        c.data = Some(BTreeMap::from([("k".into(), value.into())]));
        c
    }

    fn value_of(c: &ConfigMap) -> Option<u64> {
        use std::hash::Hasher;
        let mut h = std::hash::DefaultHasher::new();
        c.data.as_ref()?.get("k")?.hash(&mut h);
        Some(h.finish())
    }

    type Filter = fn(Events<ConfigMap>, fn(&ConfigMap) -> Option<u64>) -> Objects<ConfigMap>;

    fn run(filter: Filter, events: Vec<Event<ConfigMap>>) -> Vec<String> {
        let events = futures::stream::iter(events.into_iter().map(|e| shared(e, None))).boxed();
        futures::executor::block_on(
            filter(events, value_of)
                .map(|c| format!("{}@{}", c.name_any(), c.resource_version().unwrap()))
                .collect(),
        )
    }

    #[test]
    fn applied_changed_passes_changes_and_forgets_deleted_objects() {
        let passed = run(
            applied_changed,
            vec![
                Event::Init,
                Event::InitApply(cm("a", "1", "x")),
                Event::InitDone,
                // The same value again (a status-only write, say): not passed.
                Event::Apply(cm("a", "2", "x")),
                Event::Apply(cm("a", "3", "y")),
                // A deletion is not passed on; the same name made again with the same value is.
                Event::Delete(cm("a", "4", "y")),
                Event::Apply(cm("a", "5", "y")),
            ],
        );
        assert_eq!(passed, ["a@1", "a@3", "a@5"]);
    }

    #[test]
    fn changed_or_gone_passes_every_deletion() {
        let passed = run(
            changed_or_gone,
            vec![
                Event::Apply(cm("a", "1", "x")),
                Event::Apply(cm("a", "2", "x")),
                Event::Delete(cm("a", "3", "x")),
            ],
        );
        assert_eq!(passed, ["a@1", "a@3"]);
    }

    #[test]
    fn subscribers_share_the_cached_copy_of_an_applied_object() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let applied = Event::Apply(cm("a", "1", "x"));
        writer.apply_watcher_event(&applied);
        let Event::Apply(shared_obj) = shared(applied, Some(&store)) else {
            panic!("an applied object stays applied");
        };
        let cached = store
            .get(&reflector::ObjectRef::from_obj(&*shared_obj))
            .unwrap();
        assert!(Arc::ptr_eq(&shared_obj, &cached), "no second copy is made");
        // Not the version in the cache (an older event): its own copy, never the cache's.
        let Event::Apply(older) = shared(Event::Apply(cm("a", "0", "w")), Some(&store)) else {
            panic!("an applied object stays applied");
        };
        assert_eq!(older.resource_version().as_deref(), Some("0"));
    }
}
