//! The redfish backend's knobs.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_bmc::{BmcOptions, RequestObserver};

/// Knobs of the redfish backend.
#[derive(Clone)]
pub struct RedfishOptions {
    /// Per-request BMC timeout.
    pub request_timeout: Duration,
    /// Hosts that may be inspecting, provisioning or deprovisioning at once (metal3: 20).
    pub max_busy: usize,
    /// Told about every BMC request, for counting.
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// How long a soft power-off may take before the host is forced off.
    pub soft_power_off_grace: Duration,
    /// Requeue while waiting for the BMC to report a power change.
    pub poll_interval: Duration,
    /// Requeue between two quick steps (media inserted, boot override set).
    pub step_interval: Duration,
    /// A power action the BMC still has not carried out after this long is an error (and is
    /// issued again on the next call).
    pub action_timeout: Duration,
    /// Everything else a client needs (auth mode, IPMI tool and cipher suite). Its timeout,
    /// observer and TLS flag are replaced by the fields above and the host's setting.
    pub client: BmcOptions,
}

impl Default for RedfishOptions {
    fn default() -> Self {
        RedfishOptions {
            request_timeout: Duration::from_secs(10),
            max_busy: 20,
            observer: None,
            soft_power_off_grace: Duration::from_secs(180),
            poll_interval: Duration::from_secs(2),
            step_interval: Duration::from_millis(200),
            action_timeout: Duration::from_secs(120),
            client: BmcOptions::default(),
        }
    }
}

impl std::fmt::Debug for RedfishOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedfishOptions")
            .field("request_timeout", &self.request_timeout)
            .field("max_busy", &self.max_busy)
            .field("observer", &self.observer.is_some())
            .field("soft_power_off_grace", &self.soft_power_off_grace)
            .field("poll_interval", &self.poll_interval)
            .field("step_interval", &self.step_interval)
            .field("action_timeout", &self.action_timeout)
            .finish_non_exhaustive()
    }
}
