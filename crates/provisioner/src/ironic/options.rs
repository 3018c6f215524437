//! The ironic backend's knobs.

use std::time::Duration;

use super::client::{IronicEndpoint, LockRetry};

/// Knobs of the ironic backend.
#[derive(Debug, Clone)]
pub struct IronicOptions {
    pub endpoint: IronicEndpoint,
    /// Per-request timeout towards Ironic.
    pub request_timeout: Duration,
    /// Nodes Ironic may be inspecting, cleaning, deploying or tearing down at once (metal3: 20).
    pub max_busy: usize,
    /// Requeue while Ironic works on a node.
    pub poll_interval: Duration,
    /// Retries of a request that met a locked node before the call answers `Waiting`.
    pub lock_retry: LockRetry,
    /// `ipmi_cipher_suite` for IPMI BMCs (3 is the suite IPMI 2.0 makes mandatory).
    pub ipmi_cipher_suite: Option<u8>,
    /// Agent ramdisk URLs for disk-image deploys and cleaning (kernel + initramfs for network
    /// boot, ISO for virtual media). Live ISOs and adoption need none.
    pub deploy_kernel: Option<String>,
    pub deploy_ramdisk: Option<String>,
    pub deploy_iso: Option<String>,
    /// ESP image for the ISOs Ironic builds for UEFI machines (driver_info `bootloader`).
    pub deploy_bootloader: Option<String>,
    /// How long a soft power-off may take before the host is switched off hard.
    pub soft_power_off_grace: Duration,
    /// How long a positive readiness answer and a capacity count are reused.
    pub cache_ttl: Duration,
    /// Page size when listing nodes.
    pub page_size: usize,
}

impl IronicOptions {
    pub fn new(endpoint: IronicEndpoint) -> IronicOptions {
        IronicOptions {
            endpoint,
            request_timeout: Duration::from_secs(30),
            max_busy: 20,
            poll_interval: Duration::from_secs(2),
            lock_retry: LockRetry::default(),
            ipmi_cipher_suite: Some(3),
            deploy_kernel: None,
            deploy_ramdisk: None,
            deploy_iso: None,
            deploy_bootloader: None,
            soft_power_off_grace: Duration::from_secs(180),
            cache_ttl: Duration::from_secs(5),
            page_size: 500,
        }
    }
}
