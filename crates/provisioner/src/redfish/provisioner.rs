//! The `RedfishProvisioner`: one lock and one cached BMC client per host, and the small helpers
//! every call shares.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferrometal_bmc::{Bmc, BmcOptions, BootDevice, BootMode, BootOverride};

use super::host_state::{Fingerprint, HostState};
use super::options::RedfishOptions;
use crate::agent::AgentService;
use crate::{ErrorKind, HostInfo, ProvisionerError, Result, Step};

/// The redfish backend. Cheap to share (`Arc`); all state is behind short-held locks, with one
/// async lock per host so two calls for the same BMC never interleave their actions.
pub struct RedfishProvisioner {
    pub(super) options: RedfishOptions,
    hosts: Mutex<HashMap<String, Arc<tokio::sync::Mutex<HostState>>>>,
    /// The deploy agent's server side: disk images, in-band inspection and cleaning through
    /// the agent ramdisk. Without it, only live ISOs are booted.
    pub(super) agent: Option<Arc<AgentService>>,
    /// Phases of agent work finished and not yet taken by the controller, by host key.
    pub(super) phases: Mutex<HashMap<String, Vec<crate::PhaseTiming>>>,
}

impl RedfishProvisioner {
    pub fn new(options: RedfishOptions) -> RedfishProvisioner {
        RedfishProvisioner {
            options,
            hosts: Mutex::new(HashMap::new()),
            agent: None,
            phases: Mutex::new(HashMap::new()),
        }
    }

    /// Deploys disk images, inspects in-band and cleans through the deploy agent.
    pub fn with_agent(mut self, agent: Arc<AgentService>) -> RedfishProvisioner {
        self.agent = Some(agent);
        self
    }

    pub fn options(&self) -> &RedfishOptions {
        &self.options
    }

    /// Hosts with cached state (a client, an action in flight or a deployment).
    pub fn cached_hosts(&self) -> usize {
        self.map().len()
    }

    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<HostState>>>> {
        self.hosts.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<HostState> {
        let cell = self.map().entry(key.to_string()).or_default().clone();
        cell.lock_owned().await
    }

    pub(super) fn forget(&self, key: &str) {
        self.map().remove(key);
        if let Some(agent) = &self.agent {
            agent.end(key);
            agent.forget_deploy(key);
        }
    }

    /// The cached client, rebuilt when the address, credentials or TLS setting changed.
    pub(super) fn client(
        &self,
        st: &mut HostState,
        host: &HostInfo,
        fresh: bool,
    ) -> Result<Arc<dyn Bmc>> {
        let wanted = Fingerprint::of(host);
        if !fresh
            && let Some((fingerprint, bmc)) = &st.client
            && fingerprint.matches(&wanted)
        {
            return Ok(bmc.clone());
        }
        if let Some((old, _)) = &st.client
            && old.address != wanted.address
        {
            // Another BMC may be another machine: nothing remembered applies.
            st.in_flight = None;
            st.deploy = None;
            st.agent_finish = None;
            st.teardown_restarted = false;
            st.settings = None;
            st.updates = None;
        }
        let options = BmcOptions {
            timeout: self.options.request_timeout,
            disable_certificate_verification: host.disable_certificate_verification,
            observer: self.options.observer.clone(),
            ..self.options.client.clone()
        };
        let bmc = ferrometal_bmc::connect(&host.bmc, host.credentials.clone(), options)?;
        st.client = Some((wanted, bmc.clone()));
        Ok(bmc)
    }

    pub(super) async fn session(
        &self,
        host: &HostInfo,
    ) -> Result<(tokio::sync::OwnedMutexGuard<HostState>, Arc<dyn Bmc>)> {
        let mut st = self.lock(&host.key).await;
        let bmc = self.client(&mut st, host, false)?;
        Ok((st, bmc))
    }

    pub(super) fn step_waiting(&self, reason: &str) -> Result<Step> {
        Ok(Step::waiting(self.options.step_interval, reason))
    }

    pub(super) fn boot_override(host: &HostInfo, device: BootDevice) -> BootOverride {
        BootOverride {
            device,
            once: true,
            mode: Some(match host.boot_mode {
                Some(ferrometal_api::BootMode::Legacy) => BootMode::Legacy,
                _ => BootMode::Uefi,
            }),
        }
    }
}

pub(super) fn unsupported(message: impl Into<String>) -> ProvisionerError {
    ProvisionerError::new(ErrorKind::Unsupported, message)
}
