//! BMC calls that run off the reconcile workers.
//!
//! A reconcile that needs a BMC call hands it here with everything it needs to go on, and
//! returns: the worker is free for other hosts while the BMC answers (or hangs until its
//! timeout). When the call ends, its result is kept under the object's key and the object is
//! woken; the next reconcile takes the result and carries on exactly where the first stopped.
//! While a call runs, reconciles of that object only note that they came, so the object is
//! looked at again once the result is applied: one BMC call per object at a time, as when the
//! worker waited. A call may instead settle its result where it ran (decide on it and write
//! it) and wake its object only when it asks to be looked at again: a power poll then costs one
//! reconcile, not two.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

enum Slot<S> {
    Running {
        deferred: bool,
    },
    /// Boxed: every host has a slot while its call runs or its wake-up waits, and a slot is as
    /// large as its largest kind (a host's whole chain, kilobytes, held inline).
    Finished {
        state: Box<S>,
        deferred: bool,
    },
    /// A settled call's wake-up, due later; a reconcile that comes first makes it void (that
    /// reconcile says itself when to look again), as kube's own requeue is replaced.
    Sleeping {
        token: u64,
    },
}

/// What a reconcile finds for its object.
pub enum Found<S> {
    /// No call of this object is running or finished.
    Idle,
    /// A call runs; its end wakes the object, at once or when its settled result asks.
    Running,
    /// A call ended with this; `deferred` when reconciles came while it ran.
    Finished { state: S, deferred: bool },
}

/// How a detached call ended.
pub enum Settled<S> {
    /// A result for the next reconcile: kept, and the object woken now.
    Apply(S),
    /// Nothing left to apply: the object is woken after this long unless a reconcile comes
    /// first (`None`: only by a change of its own), or at once when reconciles came while the
    /// call ran.
    Quiet(Option<Duration>),
}

pub struct Detached<K: Resource, S> {
    slots: Arc<Mutex<HashMap<String, Slot<S>>>>,
    wake: mpsc::UnboundedSender<ObjectRef<K>>,
    running: Arc<tokio::sync::watch::Sender<usize>>,
    tokens: Arc<std::sync::atomic::AtomicU64>,
}

impl<K, S> Detached<K, S>
where
    K: Resource + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
    S: Send + 'static,
{
    /// The registry, and the stream of objects to wake (a controller's `reconcile_on`).
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ObjectRef<K>>) {
        let (wake, woken) = mpsc::unbounded_channel();
        let (running, _) = tokio::sync::watch::channel(0);
        (
            Detached {
                slots: Arc::default(),
                wake,
                running: Arc::new(running),
                tokens: Arc::default(),
            },
            woken,
        )
    }

    /// Takes a finished call's result; notes a reconcile that came while the call runs.
    pub fn take(&self, key: &str) -> Found<S> {
        let mut slots = self.slots.lock().unwrap();
        match slots.get_mut(key) {
            None => Found::Idle,
            Some(Slot::Sleeping { .. }) => {
                slots.remove(key);
                Found::Idle
            }
            Some(Slot::Running { deferred }) => {
                *deferred = true;
                Found::Running
            }
            Some(Slot::Finished { .. }) => match slots.remove(key) {
                Some(Slot::Finished { state, deferred }) => Found::Finished {
                    state: *state,
                    deferred,
                },
                _ => unreachable!("matched above"),
            },
        }
    }

    /// Runs `call` on its own task; its result is kept for `key` and `object` is woken.
    /// `still_there` is asked first, so a result for an object deleted meanwhile is dropped.
    pub fn spawn<F>(
        &self,
        key: String,
        object: ObjectRef<K>,
        still_there: impl FnOnce(&ObjectRef<K>) -> bool + Send + 'static,
        call: F,
    ) where
        F: Future<Output = S> + Send + 'static,
    {
        self.spawn_settling(key, object, still_there, async move {
            Settled::Apply(call.await)
        })
    }

    /// As [`Detached::spawn`], for a call that may settle its result itself
    /// ([`Settled::Quiet`]).
    pub fn spawn_settling<F>(
        &self,
        key: String,
        object: ObjectRef<K>,
        still_there: impl FnOnce(&ObjectRef<K>) -> bool + Send + 'static,
        call: F,
    ) where
        F: Future<Output = Settled<S>> + Send + 'static,
    {
        self.slots
            .lock()
            .unwrap()
            .insert(key.clone(), Slot::Running { deferred: false });
        let slots = self.slots.clone();
        let wake = self.wake.clone();
        let running = self.running.clone();
        let token = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        running.send_modify(|n| *n += 1);
        tokio::spawn(async move {
            let settled = call.await;
            // When to wake the object: now, after a while, or not at all.
            let wake_after = {
                let mut held = slots.lock().unwrap();
                let deferred = matches!(held.get(&key), Some(Slot::Running { deferred: true }));
                match settled {
                    Settled::Apply(state) if still_there(&object) => {
                        let state = Box::new(state);
                        held.insert(key.clone(), Slot::Finished { state, deferred });
                        Some(Duration::ZERO)
                    }
                    Settled::Apply(_) => {
                        held.remove(&key);
                        Some(Duration::ZERO)
                    }
                    Settled::Quiet(_) if deferred => {
                        held.remove(&key);
                        Some(Duration::ZERO)
                    }
                    Settled::Quiet(Some(after)) if !after.is_zero() => {
                        held.insert(key.clone(), Slot::Sleeping { token });
                        Some(after)
                    }
                    Settled::Quiet(after) => {
                        held.remove(&key);
                        after
                    }
                }
            };
            match wake_after {
                // A closed channel means the controller stopped: nothing left to wake.
                Some(after) if after.is_zero() => {
                    let _ = wake.send(object);
                }
                // A task of its own: this one, sized for the call, ends here.
                Some(after) => {
                    tokio::spawn(wake_later(slots, key, token, after, wake, object));
                }
                None => {}
            }
            running.send_modify(|n| *n -= 1);
        });
    }

    /// A sender that wakes an object, for a call that has news before it ends.
    pub fn waker(&self) -> mpsc::UnboundedSender<ObjectRef<K>> {
        self.wake.clone()
    }

    /// Calls running now.
    pub fn running(&self) -> usize {
        *self.running.borrow()
    }

    /// Waits until no call runs (at shutdown, so no BMC request is cut off halfway).
    pub async fn drained(&self) {
        let mut rx = self.running.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

/// Wakes `object` after `after` unless a reconcile took its wake-up meanwhile.
async fn wake_later<K: Resource, S>(
    slots: Arc<Mutex<HashMap<String, Slot<S>>>>,
    key: String,
    token: u64,
    after: Duration,
    wake: mpsc::UnboundedSender<ObjectRef<K>>,
    object: ObjectRef<K>,
) {
    tokio::time::sleep(after).await;
    let due = {
        let mut slots = slots.lock().unwrap();
        let mine = matches!(slots.get(&key), Some(Slot::Sleeping { token: t }) if *t == token);
        if mine {
            slots.remove(&key);
        }
        mine
    };
    if due {
        let _ = wake.send(object);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[tokio::test]
    async fn a_result_wakes_its_object_once_and_remembers_reconciles_that_came_meanwhile() {
        let (d, mut woken) = Detached::<ConfigMap, u32>::new();
        assert!(matches!(d.take("a"), Found::Idle));
        let (go, gone) = tokio::sync::oneshot::channel::<()>();
        d.spawn(
            "a".into(),
            ObjectRef::new("a").within("ns"),
            |_| true,
            async move {
                let _ = gone.await;
                7
            },
        );
        assert_eq!(d.running(), 1);
        assert!(matches!(d.take("a"), Found::Running));
        go.send(()).unwrap();
        let object = woken.recv().await.unwrap();
        assert_eq!(object.name, "a");
        d.drained().await;
        match d.take("a") {
            Found::Finished { state, deferred } => assert_eq!((state, deferred), (7, true)),
            _ => panic!("the result is kept"),
        }
        assert!(matches!(d.take("a"), Found::Idle), "taken once");
    }

    /// Long enough that a wake-up seen within a test was not this one.
    const HOUR: Duration = Duration::from_secs(3600);

    /// A call of `name` that ends at once, quiet, asking to be woken `after`.
    fn quiet(d: &Detached<ConfigMap, u32>, name: &str, after: Option<Duration>) {
        d.spawn_settling(
            name.to_string(),
            ObjectRef::new(name).within("ns"),
            |_| true,
            async move { Settled::Quiet(after) },
        );
    }

    #[tokio::test]
    async fn a_quiet_call_wakes_its_object_when_asked_unless_a_reconcile_came_first() {
        let (d, mut woken) = Detached::<ConfigMap, u32>::new();
        quiet(&d, "q", Some(Duration::from_millis(10)));
        let object = woken.recv().await.unwrap();
        assert_eq!(object.name, "q");
        assert!(matches!(d.take("q"), Found::Idle), "nothing kept");
        // A reconcile that comes first takes the wake-up over.
        quiet(&d, "void", Some(Duration::from_millis(20)));
        d.drained().await;
        assert!(matches!(d.take("void"), Found::Idle));
        let woke = tokio::time::timeout(Duration::from_millis(200), woken.recv()).await;
        assert!(woke.is_err(), "a void wake-up came: {woke:?}");
        // Later: not before.
        quiet(&d, "later", Some(HOUR));
        d.drained().await;
        let woke = tokio::time::timeout(Duration::from_millis(200), woken.recv()).await;
        assert!(woke.is_err(), "woken before its time: {woke:?}");
    }

    #[tokio::test]
    async fn a_quiet_call_wakes_its_object_at_once_if_a_reconcile_came_meanwhile() {
        let (d, mut woken) = Detached::<ConfigMap, u32>::new();
        let (go, gone) = tokio::sync::oneshot::channel::<()>();
        d.spawn_settling(
            "r".into(),
            ObjectRef::new("r").within("ns"),
            |_| true,
            async move {
                let _ = gone.await;
                Settled::Quiet(Some(HOUR))
            },
        );
        assert!(matches!(d.take("r"), Found::Running));
        go.send(()).unwrap();
        let object = tokio::time::timeout(HOUR / 60, woken.recv())
            .await
            .expect("woken at once, not in an hour")
            .unwrap();
        assert_eq!(object.name, "r");
        assert!(matches!(d.take("r"), Found::Idle));
    }

    #[tokio::test]
    async fn a_quiet_call_without_a_wish_to_look_again_wakes_nothing() {
        let (d, mut woken) = Detached::<ConfigMap, u32>::new();
        quiet(&d, "n", None);
        d.drained().await;
        let woke = tokio::time::timeout(Duration::from_millis(200), woken.recv()).await;
        assert!(woke.is_err(), "no wake-up: {woke:?}");
        assert!(matches!(d.take("n"), Found::Idle));
    }

    #[tokio::test]
    async fn a_result_for_a_deleted_object_is_dropped() {
        let (d, mut woken) = Detached::<ConfigMap, u32>::new();
        d.spawn(
            "b".into(),
            ObjectRef::new("b").within("ns"),
            |_| false,
            async { 1 },
        );
        woken.recv().await.unwrap();
        d.drained().await;
        assert!(matches!(d.take("b"), Found::Idle));
    }
}
