//! The host controller's context: the [`Context`] it shares with BMCJobs, and what only host
//! reconciles keep between reconciles (memos, API failures, states, our own writes, capacity
//! grants, BMC calls running detached).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use ferrometal_api::{BareMetalHost, BareMetalHostStatus};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::UnboundedReceiver;

use super::chain::Chain;
use super::companions::CompanionStores;
use super::decide::Memo;
use crate::config::Timing;
use crate::context::Context;
use crate::detached::Detached;
use crate::metrics::{StateLabels, metrics};

pub struct HostContext {
    shared: Arc<Context>,
    pub timing: Timing,
    memos: Mutex<HashMap<String, Memo>>,
    /// Consecutive Kubernetes API failures per host, for `error_policy`'s backoff.
    api_failures: Mutex<HashMap<String, u32>>,
    /// Latest state per host, to keep the per-state gauge right.
    /// Each host's label in the hosts gauge (see `state_label`).
    states: Mutex<HashMap<String, &'static str>>,
    /// The resourceVersion of our own last write per host, to spot a stale cache.
    written: Mutex<HashMap<String, u64>>,
    /// The provisioner's slots granted and the hosts waiting for one.
    pub capacity: super::capacity::Waiting,
    /// Host BMC calls running off the reconcile workers; a finished one leaves its chain decided
    /// to the end, for the next reconcile to write.
    pub detached: Detached<BareMetalHost, Chain>,
    /// The hosts' firmware objects (named after their hosts).
    pub firmware: CompanionStores,
    /// The agent boot media last reported in each host's PreprovisioningImage.
    pub boot_media: super::boot_media::Reported,
}

// Host reconciles read the shared fields (client, provisioner, config, ...) as their own.
impl Deref for HostContext {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.shared
    }
}

impl HostContext {
    pub fn new(
        shared: Arc<Context>,
        firmware: CompanionStores,
    ) -> (HostContext, UnboundedReceiver<ObjectRef<BareMetalHost>>) {
        let (detached, woken) = Detached::new();
        let ctx = HostContext {
            timing: shared.config.timing(),
            shared,
            memos: Mutex::default(),
            api_failures: Mutex::default(),
            states: Mutex::default(),
            written: Mutex::default(),
            capacity: Default::default(),
            detached,
            firmware,
            boot_media: Default::default(),
        };
        (ctx, woken)
    }

    pub fn memo(&self, key: &str) -> Option<Memo> {
        self.memos.lock().unwrap().get(key).cloned()
    }

    pub fn set_memo(&self, key: &str, memo: Option<Memo>) {
        let mut memos = self.memos.lock().unwrap();
        match memo {
            Some(m) => memos.insert(key.to_string(), m),
            None => memos.remove(key),
        };
    }

    /// Counts one more consecutive API failure; returns the count.
    pub fn api_failed(&self, key: &str) -> u32 {
        let mut f = self.api_failures.lock().unwrap();
        let n = f.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    pub fn api_succeeded(&self, key: &str) {
        self.api_failures.lock().unwrap().remove(key);
    }

    pub fn wrote(&self, key: &str, resource_version: Option<&str>) {
        if let Some(rv) = resource_version.and_then(|v| v.parse::<u64>().ok()) {
            let mut w = self.written.lock().unwrap();
            let e = w.entry(key.to_string()).or_insert(0);
            *e = (*e).max(rv);
        }
    }

    /// True when the cached object predates our own last write (resourceVersions that are not
    /// numbers are opaque: never stale then).
    pub fn is_stale(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Some(rv) = resource_version.and_then(|v| v.parse::<u64>().ok()) else {
            return false;
        };
        self.written
            .lock()
            .unwrap()
            .get(key)
            .is_some_and(|w| rv < *w)
    }

    /// Keeps the hosts-per-state gauge in step (`state_label`); `None` when the host is gone.
    pub fn set_state(&self, key: &str, state: Option<&'static str>) {
        let mut states = self.states.lock().unwrap();
        let old = match state {
            Some(s) => states.insert(key.to_string(), s),
            None => {
                self.written.lock().unwrap().remove(key);
                self.api_failures.lock().unwrap().remove(key);
                states.remove(key)
            }
        };
        if old == state {
            return;
        }
        let gauge = |s: &str| {
            metrics().hosts.get_or_create(&StateLabels {
                state: s.to_string(),
            })
        };
        if let Some(o) = old {
            gauge(o).dec();
        }
        if let Some(s) = state {
            gauge(s).inc();
        }
    }
}

/// A host's label in `ferrometal_hosts`: its error type while it has one (a host that fails to
/// register is not `registering`), else its provisioning state.
pub fn state_label(status: Option<&BareMetalHostStatus>) -> &'static str {
    let Some(s) = status else {
        return ferrometal_api::ProvisioningState::None.as_str();
    };
    match s.error_type {
        Some(e) => e.as_str(),
        None => s.provisioning.state.as_str(),
    }
}
