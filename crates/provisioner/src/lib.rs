//! The `Provisioner` trait: everything the host controller asks of the thing that actually
//! drives servers, whether that is the BMC directly (`redfish`), an in-memory fixture for tests
//! and benchmarks (`fixture`), or OpenStack Ironic (`ironic`).
//!
//! Every method issues at most one action or checks progress, and returns at once with a
//! [`Step`]: `Done` with its result, or `Waiting` with when to look again. Nothing here blocks a
//! reconcile worker on a BMC. Calls are idempotent: the controller calls the same method again
//! after a restart, and a backend observes before it acts, so no destructive BMC action (power
//! off, media eject) is repeated when the BMC already shows its effect.

use std::time::Duration;

pub mod agent;
pub mod config_drive;
pub mod fixture;
pub mod ironic;
pub mod redfish;

pub use fixture::FixtureProvisioner;
pub use redfish::{RedfishOptions, RedfishProvisioner};

use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{
    AutomatedCleaningMode, BootMode, CustomDeploy, HardwareDetails, Image, InspectionMode,
    RootDeviceHints, annotations::Operation,
};
use ferrometal_bmc::{BmcAddress, BootDevice, BootOverride, Credentials, MediaStatus, PowerState};

/// What a backend needs to know about one host. Built by the controller for each call from the
/// host object, its credentials Secret and its data Secrets.
#[derive(Debug, Clone)]
pub struct HostInfo {
    /// Stable name: `namespace~name` (the Ironic node name too).
    pub key: String,
    /// The backend's own ID for the host (status.provisioning.ID), empty before registration.
    pub provisioner_id: String,
    pub bmc: BmcAddress,
    /// Redacted from `Debug`; never logged.
    pub credentials: Credentials,
    pub disable_certificate_verification: bool,
    pub boot_mac_address: Option<String>,
    pub boot_mode: Option<BootMode>,
    pub inspection_mode: InspectionMode,
    pub root_device_hints: Option<RootDeviceHints>,
    pub automated_cleaning_mode: AutomatedCleaningMode,
    /// True when the host's power must never be switched off (reboots become cycles).
    pub disable_power_off: bool,
    /// The `networkData` of the host's `preprovisioningNetworkDataName` Secret: the addressing
    /// of the ramdisk a deploy agent boots (OpenStack network_data.json, as JSON or YAML).
    /// Read for agent work only (inspection, provisioning, cleaning); `None` otherwise.
    pub preprovisioning_network_data: Option<String>,
}

/// What to write or boot on the host.
#[derive(Debug, Clone, Default)]
pub struct Deployment {
    pub image: Option<Image>,
    pub custom_deploy: Option<CustomDeploy>,
    /// Contents of the userData Secret (`userData` or `value` key), if any.
    pub user_data: Option<String>,
    pub network_data: Option<String>,
    pub meta_data: Option<String>,
    /// metal3's `softwareRAIDVolumes`, built when the image is written (backends that
    /// [`Provisioner::builds_software_raid`]).
    pub software_raid: Vec<ferrometal_api::SoftwareRaidVolume>,
}

/// Firmware changes to make on a host: the wanted BIOS settings of its HostFirmwareSettings
/// that differ from what the BMC reports (validated against the BMC's registry), and the
/// updates of its HostFirmwareComponents not applied yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirmwareChanges {
    /// Attribute name → wanted value, as metal3 writes it (text; numbers and booleans are
    /// typed by the BMC's registry or by the value the BMC reports now).
    pub settings: std::collections::BTreeMap<String, String>,
    /// Firmware images to flash, one component at a time, in this order.
    pub updates: Vec<ComponentUpdate>,
}

/// One firmware update: metal3's component name (`bios`, `bmc`, `nic:...`) and the image URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ComponentUpdate {
    pub component: String,
    pub url: String,
}

impl FirmwareChanges {
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty() && self.updates.is_empty()
    }

    /// What they change, for messages: attribute names and component names.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.settings.keys().cloned().collect();
        parts.extend(
            self.updates
                .iter()
                .map(|u| format!("{} firmware", u.component)),
        );
        parts.join(", ")
    }
}

/// How long one phase of an inspection, provisioning or cleaning took (the deploy agent's
/// phases: boot media built, ramdisk boot to first call, inspection, cleaning, download+write,
/// config drive, reboot to power on).
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseTiming {
    pub phase: String,
    pub seconds: f64,
    /// More about it, e.g. the write rate of `download+write`.
    pub note: Option<String>,
}

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<T = ()> {
    Done(T),
    /// Started or still running; call again after `requeue_after`. `reason` is for logs/status.
    Waiting {
        requeue_after: Duration,
        reason: String,
    },
}

impl<T> Step<T> {
    pub fn waiting(requeue_after: Duration, reason: impl Into<String>) -> Step<T> {
        Step::Waiting {
            requeue_after,
            reason: reason.into(),
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self, Step::Done(_))
    }
}

/// A successful registration.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub provisioner_id: String,
    pub power: PowerState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerOffMode {
    /// Ask the OS to shut down (ACPI); backends may fall back to hard after a while.
    Soft,
    Hard,
}

/// Low-cardinality error kinds, used for metrics labels and to pick the host's errorType.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The BMC refused the credentials.
    Credentials,
    /// The BMC (or the backend service) could not be reached or timed out; retried with backoff.
    Unreachable,
    /// The BMC (or the backend service) answered, with a server error (HTTP 5xx) or "busy"
    /// (409, 429); retried with backoff. Not `Unreachable`: it did answer, and what it said is
    /// in the message.
    ServerError,
    /// The BMC or backend answered with an error.
    Failed,
    /// The request cannot work with this host (e.g. image provisioning over IPMI with the redfish
    /// backend); retrying without a spec change will not help.
    Unsupported,
    /// The host's own data is wrong (bad address, missing checksum...).
    InvalidInput,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Credentials => "credentials",
            ErrorKind::Unreachable => "unreachable",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Failed => "failed",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::InvalidInput => "invalid_input",
        }
    }
}

/// An error from a backend. The message names the cause and never contains credentials.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProvisionerError {
    pub kind: ErrorKind,
    pub message: String,
    /// Set when the spec as written is the cause (the field it is about), not the BMC, the
    /// network or the backend: such errors may be told to whoever wrote the spec (a claim's
    /// tenant), in the spec's terms.
    pub spec_fault: Option<SpecFault>,
}

impl ProvisionerError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ProvisionerError {
        ProvisionerError {
            kind,
            message: message.into(),
            spec_fault: None,
        }
    }

    /// Marks the error as caused by this field of the spec.
    pub fn in_spec(mut self, fault: SpecFault) -> ProvisionerError {
        self.spec_fault = Some(fault);
        self
    }
}

impl From<ferrometal_bmc::BmcError> for ProvisionerError {
    fn from(e: ferrometal_bmc::BmcError) -> Self {
        let kind = match &e {
            ferrometal_bmc::BmcError::Unauthorized { .. } => ErrorKind::Credentials,
            ferrometal_bmc::BmcError::Unsupported { .. } => ErrorKind::Unsupported,
            ferrometal_bmc::BmcError::Http { .. } if e.is_transient() => ErrorKind::ServerError,
            e if e.is_transient() => ErrorKind::Unreachable,
            _ => ErrorKind::Failed,
        };
        ProvisionerError::new(kind, e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, ProvisionerError>;

/// The deploy agent's boot ISO for one boot of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootMedia {
    /// Being written (the ramdisk with this boot's configuration).
    Building,
    /// Served at this URL to the host's BMC (valid until the boot's work ends).
    Ready(String),
    /// Could not be written; the reason.
    Failed(String),
}

#[async_trait::async_trait]
pub trait Provisioner: Send + Sync + 'static {
    /// Short name for logs and metrics: `redfish`, `fixture`, `ironic`.
    fn name(&self) -> &'static str;

    /// Ready to take work (e.g. Ironic is up). Not ready: the controller retries in 30 s.
    async fn is_ready(&self) -> bool {
        true
    }

    /// Each call goes to the host's BMC itself (not through a service that queues BMC work,
    /// as Ironic does): callers then limit calls per BMC and stop calling a BMC that does not
    /// answer.
    fn talks_to_bmcs(&self) -> bool {
        false
    }

    /// Room to start one more inspection, provisioning or deprovisioning now. `busy` is how
    /// many hosts the controller already has in such states.
    async fn has_capacity(&self, busy: usize) -> bool;

    /// Make the host known to the backend and prove management access with these credentials.
    /// `credentials_changed` forces the backend to drop anything cached for the old ones.
    async fn register(
        &self,
        host: &HostInfo,
        credentials_changed: bool,
    ) -> Result<Step<Registration>>;

    /// Hardware inspection; `Done(None)` when the backend cannot inspect (mode `disabled`).
    async fn inspect(
        &self,
        host: &HostInfo,
        refresh: bool,
    ) -> Result<Step<Option<HardwareDetails>>>;

    /// Get the host ready for provisioning (cleaning, RAID, firmware). Most backends: Done.
    async fn prepare(&self, host: &HostInfo) -> Result<Step>;

    /// Make the host's firmware what `changes` asks: BIOS settings staged in the BMC's pending
    /// settings, the boot that applies them, then a read that proves every value took; then
    /// each firmware update, one at a time, followed to its end. `Done` once all are made; a
    /// value the BMC did not take after the boot, or a failed update, is an error naming it. The boot is of whatever the host boots by itself (a provisioned
    /// host's installed OS, untouched), and the host is left on. Backends that cannot refuse
    /// with the reason.
    async fn change_firmware(&self, host: &HostInfo, changes: &FirmwareChanges) -> Result<Step> {
        if changes.is_empty() {
            return Ok(Step::Done(()));
        }
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner does not change firmware settings (host {}: {})",
                self.name(),
                host.key,
                changes
                    .settings
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }

    /// Make the host's hardware RAID volumes exactly `volumes` (metal3's
    /// `hardwareRAIDVolumes`; empty: none), one BMC action per call: volumes not wanted are
    /// deleted, missing ones created. `Done` once the BMC shows them. Backends that cannot
    /// refuse with the reason.
    async fn configure_raid(
        &self,
        host: &HostInfo,
        volumes: &[ferrometal_api::HardwareRaidVolume],
    ) -> Result<Step> {
        let _ = volumes;
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner does not build hardware RAID (host {}: spec.raid.hardwareRAIDVolumes)",
                self.name(),
                host.key
            ),
        ))
    }

    /// Attach the ISO at `url` to the host as virtual media (metal3's DataImage), replacing
    /// any other image; `None` detaches it. One BMC action per call, observed first; `Done`
    /// once the BMC shows it.
    async fn data_image(&self, host: &HostInfo, url: Option<&str>) -> Result<Step> {
        let _ = url;
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner attaches no DataImage (host {})",
                self.name(),
                host.key
            ),
        ))
    }

    /// Write or boot the image and leave the host running it.
    async fn provision(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step>;

    /// Take a provisioned host back to available (eject media, clean, power off).
    async fn deprovision(&self, host: &HostInfo) -> Result<Step>;

    /// Adopt a host that is already provisioned (after a restart, a detach, or externally
    /// provisioned) without touching its disks or power.
    async fn adopt(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step>;

    /// The current power state; steady-state polling calls only this (one BMC request).
    async fn power_state(&self, host: &HostInfo) -> Result<PowerState>;

    /// Ensure power on: Done once the backend observes On.
    async fn power_on(&self, host: &HostInfo) -> Result<Step>;

    /// Ensure power off: Done once the backend observes Off.
    async fn power_off(&self, host: &HostInfo, mode: PowerOffMode) -> Result<Step>;

    /// Run one imperative operation (`ferrometal.io/operation`): issued once, Done when issued.
    async fn operation(&self, host: &HostInfo, op: Operation) -> Result<Step>;

    /// Set (`Some`) or clear (`None`) a one-time boot device, for a BMCJob task; `efi` asks
    /// for a UEFI boot. Sent once; the caller observes nothing further.
    async fn boot_device(
        &self,
        host: &HostInfo,
        device: Option<BootDevice>,
        efi: bool,
    ) -> Result<()> {
        let _ = (device, efi);
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner sets no boot device for host {}",
                self.name(),
                host.key
            ),
        ))
    }

    /// The boot override in force, read before a BMCJob changes it so the restore can put it
    /// back; backends that cannot read it answer Unsupported (the restore then clears).
    async fn boot_settings(&self, host: &HostInfo) -> Result<Option<BootOverride>> {
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner reads no boot override of host {}",
                self.name(),
                host.key
            ),
        ))
    }

    /// The power state and the boot override from one BMC reading, where the protocol has
    /// both in one document; Unsupported means: ask `power_state` and `boot_settings` apart.
    async fn power_and_boot(&self, host: &HostInfo) -> Result<(PowerState, Option<BootOverride>)> {
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner reads power and boot override apart (host {})",
                self.name(),
                host.key
            ),
        ))
    }

    /// Put back an override read with `boot_settings` (`None` clears).
    async fn restore_boot(&self, host: &HostInfo, saved: Option<BootOverride>) -> Result<()> {
        match saved {
            Some(o) => {
                self.boot_device(
                    host,
                    Some(o.device),
                    o.mode == Some(ferrometal_bmc::BootMode::Uefi),
                )
                .await
            }
            None => self.boot_device(host, None, false).await,
        }
    }

    /// Insert `url` into the virtual CD (`None` ejects), for a BMCJob task. Sent once.
    async fn virtual_media(&self, host: &HostInfo, url: Option<&str>) -> Result<()> {
        let _ = url;
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner has no virtual media for host {}",
                self.name(),
                host.key
            ),
        ))
    }

    /// The virtual CD as the BMC shows it.
    async fn media_state(&self, host: &HostInfo) -> Result<MediaStatus> {
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "the {} provisioner has no virtual media for host {}",
                self.name(),
                host.key
            ),
        ))
    }

    /// The phases of the inspection, provisioning or deprovisioning that just finished for this
    /// host, once (taken away as they are read); empty for backends that do not time them.
    fn take_phase_timings(&self, host_key: &str) -> Vec<PhaseTiming> {
        let _ = host_key;
        Vec::new()
    }

    /// Whether this backend boots a deploy agent of its own (and so has boot media to report).
    fn boots_agent(&self) -> bool {
        false
    }

    /// Whether this backend builds metal3's `softwareRAIDVolumes` when it writes an image.
    fn builds_software_raid(&self) -> bool {
        false
    }

    /// The deploy agent's boot media for this host while a boot of the agent is under way
    /// (what metal3's image-customization contract reports in a PreprovisioningImage);
    /// `None` when the agent is not booting it, or the backend boots no agent of its own.
    fn agent_boot_media(&self, host_key: &str) -> Option<BootMedia> {
        let _ = host_key;
        None
    }

    /// Forget the host WITHOUT deprovisioning and without any power change.
    async fn detach(&self, host: &HostInfo) -> Result<Step>;

    /// Forget the host for good (after deprovisioning or power-off before delete).
    async fn delete(&self, host: &HostInfo) -> Result<Step>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_bmc::BmcError;

    #[test]
    fn bmc_errors_are_named_for_what_they_are() {
        let bmc = || "10.0.0.1:443".to_string();
        let http = |status| BmcError::Http {
            bmc: bmc(),
            status,
            operation: "POST /x".into(),
            message: "no".into(),
        };
        for (error, kind) in [
            (http(500), ErrorKind::ServerError),
            (http(503), ErrorKind::ServerError),
            (http(409), ErrorKind::ServerError),
            (http(400), ErrorKind::Failed),
            (
                BmcError::Unreachable {
                    bmc: bmc(),
                    reason: "refused".into(),
                },
                ErrorKind::Unreachable,
            ),
            (
                BmcError::Timeout {
                    bmc: bmc(),
                    operation: "GET /".into(),
                    timeout: std::time::Duration::from_secs(1),
                },
                ErrorKind::Unreachable,
            ),
            (
                BmcError::Unauthorized { bmc: bmc() },
                ErrorKind::Credentials,
            ),
            (
                BmcError::Unsupported {
                    bmc: bmc(),
                    what: "x".into(),
                },
                ErrorKind::Unsupported,
            ),
        ] {
            assert_eq!(ProvisionerError::from(error.clone()).kind, kind, "{error}");
        }
        assert_eq!(ErrorKind::ServerError.as_str(), "server_error");
    }
}
