//! One watch per kind for the whole process.
//!
//! Several controllers need the same kinds (hosts wake the host, claim and BMCJob controllers;
//! Secrets wake three of them). Each watching on its own made the API server send, and this
//! process decode and cache, every change once per controller. A [`SharedWatch`] opens one
//! watch, keeps one cache ([`Store`]) if the kind is cached, and hands each subscriber its own
//! stream of the same events, so the existing stream adapters (`applied_objects`,
//! `touched_objects`, `predicate_filter`) work on them unchanged. The cache is updated before
//! any subscriber sees an event, so a controller woken by a change finds it in the cache.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;

use futures::stream::BoxStream;
use futures::{StreamExt, future};
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// A subscriber's events, as `watcher(..)` would give them (errors stay with the watch).
pub type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

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
    subscribers: Vec<mpsc::UnboundedSender<watcher::Event<K>>>,
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
            rx.recv().await.map(|event| (Ok(event), rx))
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
            mut subscribers,
            ..
        } = self;
        if subscribers.is_empty() {
            return;
        }
        let events = watcher(api, config).default_backoff().modify(modify);
        let events = match writer {
            Some(writer) => events.reflect(writer).boxed(),
            None => events.boxed(),
        };
        let fan_out = events
            .take_while(move |event| {
                match event {
                    Ok(event) => subscribers.retain(|s| s.send(event.clone()).is_ok()),
                    // The watch retries with backoff; each controller only ever saw these
                    // logged and skipped.
                    Err(e) => tracing::debug!(kind = %K::kind(&K::DynamicType::default()), error = %e, "watch"),
                }
                future::ready(!subscribers.is_empty())
            })
            .for_each(|_| future::ready(()));
        tokio::select! {
            () = fan_out => {}
            () = shutdown => {}
        }
    }
}

/// Drops what no controller of this process reads: the field managers' bookkeeping, often as
/// large as the rest of the object.
pub fn without_managed_fields<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
}

/// The objects whose `trigger` hash changed, and every deleted one. kube's `predicate_filter`
/// would drop a deletion whose hash matches the object's last update, and a controller that
/// must notice its host is gone cannot have that.
pub fn changed_or_gone<K>(
    events: Events<K>,
    trigger: fn(&K) -> Option<u64>,
) -> BoxStream<'static, Result<K, watcher::Error>>
where
    K: Resource + Clone + Send + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, trigger, None)
}

/// The objects whose `ask` (0: nothing) changed: an object first seen asking nothing, or gone
/// while asking nothing, is passed over. For objects made by the hundred that seldom ask
/// anything of whoever watches them.
pub fn ask_changed<K>(
    events: Events<K>,
    ask: fn(&K) -> u64,
) -> BoxStream<'static, Result<K, watcher::Error>>
where
    K: Resource + Clone + Send + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(events, move |k| Some(ask(k)), Some(0))
}

/// The objects whose `trigger` changed from the last one passed (or from `quiet`, for an object
/// not seen yet; only values other than `quiet` are remembered); `None` always passes. A
/// deletion passes when nothing is quiet, or when the object was remembered.
fn changes<K>(
    events: Events<K>,
    trigger: impl Fn(&K) -> Option<u64> + Send + 'static,
    quiet: Option<u64>,
) -> BoxStream<'static, Result<K, watcher::Error>>
where
    K: Resource + Clone + Send + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    let mut seen: std::collections::HashMap<reflector::ObjectRef<K>, u64> =
        std::collections::HashMap::new();
    events
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Apply(k) | watcher::Event::InitApply(k)) => {
                    let key = reflector::ObjectRef::from_obj(&k);
                    match trigger(&k) {
                        Some(h) if seen.get(&key).copied().or(quiet) == Some(h) => None,
                        Some(h) => {
                            if Some(h) == quiet {
                                seen.remove(&key);
                            } else {
                                seen.insert(key, h);
                            }
                            Some(Ok(k))
                        }
                        None => Some(Ok(k)),
                    }
                }
                Ok(watcher::Event::Delete(k)) => {
                    let remembered = seen.remove(&reflector::ObjectRef::from_obj(&k));
                    (quiet.is_none() || remembered.is_some()).then_some(Ok(k))
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Err(e) => Some(Err(e)),
            };
            future::ready(out)
        })
        .boxed()
}
