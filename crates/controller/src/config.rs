//! Controller settings.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Only reconcile hosts matching this label selector (sharding across replicas).
    pub label_selector: Option<String>,
    /// Hosts reconciled at once.
    pub concurrency: u16,
    /// Steady-state power poll (metal3: 60 s), jittered by ±10%.
    pub power_poll_interval: Duration,
    /// Host error backoff: `base * 2^(errorCount-1)`, jittered, capped (metal3: minutes).
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// How soon a host delayed for lack of provisioner capacity asks again.
    pub delayed_retry: Duration,
    /// How often detached hosts are looked at (metal3: 10 min).
    pub detached_recheck: Duration,
    /// Failed provisioning attempts of one image before giving up (metal3: 5; 0 = no limit).
    pub max_provisioning_retries: u32,
    /// Retry when the provisioner reports it is not ready (metal3: 30 s).
    pub not_ready_retry: Duration,
    /// First retry after a Kubernetes API error; doubles per consecutive failure.
    pub api_error_backoff: Duration,
    /// `reportingController` of Events.
    pub reporter: String,
    /// Calls at once to one BMC (endpoint and system), across host reconciles, BMCJobs and
    /// Rufio tasks; more wait, holding no worker.
    pub bmc_concurrency: usize,
    /// Consecutive connection failures or timeouts after which a BMC is not called for a
    /// while (its breaker opens; the first pause is `backoff_base`, doubling while it fails).
    pub breaker_threshold: u32,
    /// Serve Tinkerbell Rufio's Machine, Job and Task (off where Rufio itself runs).
    pub rufio: bool,
    /// The API servers remote claims' kubeconfigs may name.
    pub remote_servers: crate::remote_servers::ServerPolicy,
    /// How often the FirmwareSchemas ferrometal wrote are checked for ones no
    /// HostFirmwareSettings names any more; one unnamed at two checks in a row is deleted.
    pub firmware_schema_sweep: Duration,
    /// Per-request timeout of the firmware controllers' BMC reads and event subscriptions (the
    /// provisioner has its own, from the same flag).
    pub bmc_timeout: Duration,
}

/// Intervals the state machine uses; see `ControllerConfig` for the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub power_poll_interval: Duration,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub delayed_retry: Duration,
    pub detached_recheck: Duration,
    /// Failed provisioning attempts of one image before the host stops trying (metal3's
    /// `--max-provisioning-retries`); 0 = no limit.
    pub max_provisioning_retries: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            power_poll_interval: Duration::from_secs(60),
            backoff_base: Duration::from_secs(60),
            backoff_cap: Duration::from_secs(30 * 60),
            delayed_retry: Duration::from_secs(30),
            detached_recheck: Duration::from_secs(600),
            max_provisioning_retries: 5,
        }
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        let t = Timing::default();
        ControllerConfig {
            label_selector: None,
            concurrency: 16,
            power_poll_interval: t.power_poll_interval,
            backoff_base: t.backoff_base,
            backoff_cap: t.backoff_cap,
            delayed_retry: t.delayed_retry,
            detached_recheck: t.detached_recheck,
            max_provisioning_retries: t.max_provisioning_retries,
            not_ready_retry: Duration::from_secs(30),
            api_error_backoff: Duration::from_millis(500),
            reporter: "ferrometal-controller".into(),
            bmc_concurrency: 4,
            breaker_threshold: 3,
            rufio: true,
            remote_servers: Default::default(),
            firmware_schema_sweep: Duration::from_secs(300),
            bmc_timeout: Duration::from_secs(10),
        }
    }
}

impl ControllerConfig {
    /// The per-BMC limits and breakers these settings ask for.
    pub fn bmc_gate(&self) -> std::sync::Arc<crate::bmc_gate::BmcGate> {
        std::sync::Arc::new(crate::bmc_gate::BmcGate::new(
            self.bmc_concurrency,
            crate::bmc_gate::BreakerPolicy {
                threshold: self.breaker_threshold,
                cooldown: self.backoff_base,
                max_cooldown: self.backoff_cap.min(Duration::from_secs(300)),
            },
        ))
    }

    pub fn timing(&self) -> Timing {
        Timing {
            power_poll_interval: self.power_poll_interval,
            backoff_base: self.backoff_base,
            backoff_cap: self.backoff_cap,
            delayed_retry: self.delayed_retry,
            detached_recheck: self.detached_recheck,
            max_provisioning_retries: self.max_provisioning_retries,
        }
    }
}
