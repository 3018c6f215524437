//! What claim reconciles share: caches of hosts, claims, policies, namespaces and HardwareData,
//! and what this process remembers between reconciles (bindings the cache may not show yet,
//! tokens forwarded).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferrometal_api::host_class::HostClass;
use ferrometal_api::{BareMetalHost, HardwareData, HostClaim, HostDeployPolicy};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;

use crate::config::ControllerConfig;
use crate::detached::Detached;
use crate::events::EventPublisher;
use crate::vm_pass::Outcome;

pub struct ClaimContext {
    pub client: kube::Client,
    pub config: ControllerConfig,
    pub events: EventPublisher,
    pub hosts: Store<BareMetalHost>,
    pub claims: Store<HostClaim>,
    pub policies: Store<HostDeployPolicy>,
    pub namespaces: Store<Namespace>,
    /// HardwareData of hosts and the claims' copies.
    pub hardware: Store<HardwareData>,
    /// Hosts bound by this process whose binding the host cache may not show yet.
    pub(super) pending: Mutex<HashMap<String, Pending>>,
    /// The one-shot forward token last written to each claim's host (or VM).
    pub(super) forwarded: Mutex<HashMap<String, String>>,
    /// HostClasses: which provider serves a claim.
    pub classes: Store<HostClass>,
    /// Passes over claims' VMs running off the workers.
    pub(super) vms: Detached<HostClaim, Outcome>,
    /// What the last pass over each claim's VM found, and when.
    pub(super) vm_seen: Mutex<HashMap<String, (Outcome, Instant)>>,
}

/// (host namespace, host name) bound, and when.
type Pending = ((String, String), Instant);

/// How long a binding may stay invisible in the host cache before it is presumed undone.
const PENDING_FOR: Duration = Duration::from_secs(10);

impl ClaimContext {
    pub fn pending(&self, claim: &str) -> Option<(String, String)> {
        let mut p = self.pending.lock().unwrap();
        match p.get(claim) {
            Some((host, at)) if at.elapsed() < PENDING_FOR => Some(host.clone()),
            Some(_) => {
                p.remove(claim);
                None
            }
            None => None,
        }
    }

    pub fn forwarded(&self, claim: &str) -> Option<String> {
        self.forwarded.lock().unwrap().get(claim).cloned()
    }

    pub fn set_forwarded(&self, claim: &str, token: Option<String>) {
        let mut f = self.forwarded.lock().unwrap();
        match token {
            Some(t) => f.insert(claim.to_string(), t),
            None => f.remove(claim),
        };
    }

    pub fn set_pending(&self, claim: &str, host: Option<(String, String)>) {
        let mut p = self.pending.lock().unwrap();
        match host {
            Some(h) => p.insert(claim.to_string(), (h, Instant::now())),
            None => p.remove(claim),
        };
    }
}

/// The claim's key in this context's maps and in logs (`namespace/name`).
pub(super) fn key(claim: &HostClaim) -> String {
    format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    )
}

pub(super) fn claims(ctx: &ClaimContext, claim: &HostClaim) -> Api<HostClaim> {
    Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default())
}

pub(super) fn hosts(ctx: &ClaimContext, host: &BareMetalHost) -> Api<BareMetalHost> {
    Api::namespaced(ctx.client.clone(), &host.namespace().unwrap_or_default())
}
