//! The provisioner's capacity gate (metal3's "delayed" hosts): how many hosts hold a slot, the
//! grant of one, and the queue of hosts refused one. A slot released (its host's inspection,
//! provisioning or deprovisioning ended, or the host went) wakes the first host still waiting,
//! at once: waiting out `delayed_retry` left slots idle, and at 10,000 hosts with 1,000 slots
//! provisioning went in waves with ~15 s stalls between them. The retry stays, as the backstop
//! for a wake-up lost to a restart.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferrometal_api::{
    BareMetalHost, BareMetalHostStatus, OperationMetric, OperationalStatus, ProvisioningState,
};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::UnboundedSender;

use crate::context::Context;
use crate::host_info::host_key;

/// The operation a host in this state holds a slot for, if any.
fn operation(s: &BareMetalHostStatus) -> Option<&OperationMetric> {
    match s.provisioning.state {
        ProvisioningState::Inspecting => Some(&s.operation_history.inspect),
        ProvisioningState::Provisioning => Some(&s.operation_history.provision),
        ProvisioningState::Deprovisioning => Some(&s.operation_history.deprovision),
        _ => None,
    }
}

/// Whether a host in this status holds a slot: its inspection, provisioning or deprovisioning
/// started and has not ended.
pub fn holds_slot(status: Option<&BareMetalHostStatus>) -> bool {
    status
        .and_then(operation)
        .is_some_and(|m| m.start.is_some() && m.end.is_none())
}

/// Slots granted and given back that the cache may not show yet, and the hosts refused one.
#[derive(Default)]
pub struct Waiting {
    slots: tokio::sync::Mutex<Unseen>,
    queue: Mutex<Queue>,
}

/// What this process did to slots that its cache may not show yet: a grant whose operation has
/// not started in the cache, a release written that the cache still shows holding its slot.
/// Either is forgotten once the cache agrees, or after 30 s.
#[derive(Default)]
struct Unseen {
    granted: HashMap<String, Instant>,
    freed: HashMap<String, Instant>,
}

/// Hosts refused a slot, in the order they were refused.
#[derive(Default)]
struct Queue {
    order: VecDeque<(String, ObjectRef<BareMetalHost>, Instant)>,
    queued: HashSet<String>,
}

/// (hosts whose busy operation started, hosts holding a slot now) per the cache.
fn busy_hosts(ctx: &Context) -> (HashSet<String>, HashSet<String>) {
    let mut started = HashSet::new();
    let mut busy = HashSet::new();
    for h in ctx.hosts.state() {
        let Some(m) = h.status.as_ref().and_then(operation) else {
            continue;
        };
        if m.start.is_some() {
            started.insert(host_key(&h));
            if m.end.is_none() {
                busy.insert(host_key(&h));
            }
        }
    }
    (started, busy)
}

/// How long a grant or release the cache does not show yet is counted.
const UNSEEN: Duration = Duration::from_secs(30);

impl Waiting {
    /// Asks for a slot. Serialized, and counting slots granted or given back but not yet
    /// visible in the cache, so concurrent reconciles cannot overshoot the limit nor miss a free
    /// slot. A host refused joins the queue.
    pub async fn request(&self, ctx: &Context, host: &BareMetalHost) -> bool {
        let me = host_key(host);
        let mut slots = self.slots.lock().await;
        let (started, mut busy) = busy_hosts(ctx);
        // Once the cache shows the operation started (or ended), the cache is the authority.
        slots
            .granted
            .retain(|k, at| !started.contains(k) && at.elapsed() < UNSEEN);
        slots
            .freed
            .retain(|k, at| busy.contains(k) && at.elapsed() < UNSEEN);
        for k in slots.freed.keys() {
            busy.remove(k);
        }
        busy.extend(slots.granted.keys().cloned());
        busy.remove(&me);
        let ok = ctx.provisioner.has_capacity(busy.len()).await;
        if ok {
            slots.freed.remove(&me);
            slots.granted.insert(me, Instant::now());
        } else {
            let mut q = self.queue.lock().unwrap();
            if q.queued.insert(me.clone()) {
                q.order
                    .push_back((me, ObjectRef::from_obj(host), Instant::now()));
            }
        }
        ok
    }

    /// Host `key` gave its slot back (written, maybe not yet in the cache): wakes the first queued
    /// host the cache still shows delayed. Those that got a slot meanwhile, or went, are dropped
    /// from the queue on the way.
    pub async fn released(
        &self,
        ctx: &Context,
        key: &str,
        wake: &UnboundedSender<ObjectRef<BareMetalHost>>,
    ) {
        let granted: HashSet<String> = {
            let mut slots = self.slots.lock().await;
            slots.granted.remove(key);
            slots.freed.insert(key.to_string(), Instant::now());
            slots.granted.keys().cloned().collect()
        };
        let mut q = self.queue.lock().unwrap();
        while let Some((key, next, since)) = q.order.pop_front() {
            q.queued.remove(&key);
            // Still waiting: there, without a slot, and delayed as the cache shows it (or refused
            // so recently that its delayed status may not be in the cache yet).
            let waiting = !granted.contains(&key)
                && ctx.hosts.get(&next).is_some_and(|h| {
                    let status = h.status.as_ref();
                    !holds_slot(status)
                        && (since.elapsed() < RECENT
                            || status.is_some_and(|s| {
                                s.operational_status == OperationalStatus::Delayed
                            }))
                });
            if waiting {
                // A closed channel means the controller stopped: nothing left to wake.
                let _ = wake.send(next);
                return;
            }
        }
    }
}

/// A host refused a slot this recently counts as waiting whatever the cache shows.
const RECENT: Duration = Duration::from_secs(2);
