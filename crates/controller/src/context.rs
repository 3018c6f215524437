//! What the host and BMCJob controllers share: the API client, the provisioner, the settings,
//! Events, the host cache, the credentials cache and the per-BMC gate. What only host
//! reconciles keep is in `host::context`.

use std::sync::Arc;

use ferrometal_api::BareMetalHost;
use ferrometal_provisioner::{HostInfo, Provisioner, ProvisionerError};
use kube::runtime::reflector::Store;

use crate::bmc_gate::BmcGate;
use crate::config::ControllerConfig;
use crate::events::EventPublisher;
use crate::secrets::SecretCache;

pub struct Context {
    pub client: kube::Client,
    pub provisioner: Arc<dyn Provisioner>,
    pub config: ControllerConfig,
    pub events: EventPublisher,
    /// The host cache the controller watches (for capacity counts and Secret mapping).
    pub hosts: Store<BareMetalHost>,
    /// Credentials of the Secrets hosts reference, kept current by the Secret watch.
    pub secrets: Arc<SecretCache>,
    /// Per-BMC limits and breakers (shared with every controller that calls BMCs).
    pub gate: Arc<BmcGate>,
}

impl Context {
    pub fn new(
        client: kube::Client,
        provisioner: Arc<dyn Provisioner>,
        config: ControllerConfig,
        hosts: Store<BareMetalHost>,
        secrets: Arc<SecretCache>,
        gate: Arc<BmcGate>,
    ) -> Context {
        let events = EventPublisher::new(client.clone(), config.reporter.clone());
        Context {
            client,
            provisioner,
            config,
            events,
            hosts,
            secrets,
            gate,
        }
    }

    /// Runs a provisioner call through the host's BMC gate when the provisioner calls BMCs
    /// itself.
    pub async fn bmc<T>(
        &self,
        host: &HostInfo,
        call: impl std::future::Future<Output = Result<T, ProvisionerError>>,
    ) -> Result<T, ProvisionerError> {
        if self.provisioner.talks_to_bmcs() {
            self.gate.run(&BmcGate::key(&host.bmc), call).await
        } else {
            call.await
        }
    }
}
