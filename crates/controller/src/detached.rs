//! BMC calls that run off the reconcile workers.
//!
//! A reconcile that needs a BMC call hands it here with everything it needs to go on, and
//! returns: the worker is free for other hosts while the BMC answers (or hangs until its
//! timeout). When the call ends, its result is kept under the object's key and the object is
//! woken; the next reconcile takes the result and carries on exactly where the first stopped.
//! While a call runs, reconciles of that object only note that they came, so the object is
//! looked at again once the result is applied: one BMC call per object at a time, as when the
//! worker waited.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

enum Slot<S> {
    Running { deferred: bool },
    Finished { state: S, deferred: bool },
}

/// What a reconcile finds for its object.
pub enum Found<S> {
    /// No call of this object is running or finished.
    Idle,
    /// A call runs; its end wakes the object.
    Running,
    /// A call ended with this; `deferred` when reconciles came while it ran.
    Finished { state: S, deferred: bool },
}

pub struct Detached<K: Resource, S> {
    slots: Arc<Mutex<HashMap<String, Slot<S>>>>,
    wake: mpsc::UnboundedSender<ObjectRef<K>>,
    running: Arc<tokio::sync::watch::Sender<usize>>,
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
            },
            woken,
        )
    }

    /// Takes a finished call's result; notes a reconcile that came while the call runs.
    pub fn take(&self, key: &str) -> Found<S> {
        let mut slots = self.slots.lock().unwrap();
        match slots.get_mut(key) {
            None => Found::Idle,
            Some(Slot::Running { deferred }) => {
                *deferred = true;
                Found::Running
            }
            Some(Slot::Finished { .. }) => match slots.remove(key) {
                Some(Slot::Finished { state, deferred }) => Found::Finished { state, deferred },
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
        self.slots
            .lock()
            .unwrap()
            .insert(key.clone(), Slot::Running { deferred: false });
        let slots = self.slots.clone();
        let wake = self.wake.clone();
        let running = self.running.clone();
        running.send_modify(|n| *n += 1);
        tokio::spawn(async move {
            let state = call.await;
            {
                let mut slots = slots.lock().unwrap();
                let deferred = matches!(slots.get(&key), Some(Slot::Running { deferred: true }));
                if still_there(&object) {
                    slots.insert(key, Slot::Finished { state, deferred });
                } else {
                    slots.remove(&key);
                }
            }
            // A closed channel means the controller stopped: nothing left to wake.
            let _ = wake.send(object);
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
