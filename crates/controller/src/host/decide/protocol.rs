//! What goes into a decision and what comes out of it: the reconciler's side of the two-pass
//! protocol (see the `decide` module docs).

use std::collections::BTreeMap;
use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{BareMetalHostSpec, BareMetalHostStatus, HardwareDetails};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::{
    ComponentUpdate, FirmwareChanges, PowerOffMode, ProvisionerError, Registration,
};
use k8s_openapi::jiff::Timestamp;

use crate::config::Timing;
use crate::events::HostEvent;
use crate::secrets::CredentialsObservation;

/// What this process remembers about a host between reconciles. Not persisted: after a restart
/// every host is registered again (backends forget too), and provisioned hosts are adopted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memo {
    /// Registered with the provisioner using this credentials Secret version.
    pub credentials_version: String,
    /// A provisioned host was adopted (or provisioned) by this process.
    pub adopted: bool,
    /// When the power state was last observed.
    pub power_checked: Option<Timestamp>,
    /// A power change asked of the provisioner and not yet seen done (`true`: on). Pausing the
    /// host or changing `online` meanwhile does not undo it at the BMC, so a different wish
    /// must be acted on even when the status already reads as wished.
    pub power_in_flight: Option<bool>,
    /// BIOS settings made and read back, with the HostFirmwareSettings read that asked for
    /// them: until that object is read again it still shows them as wanted.
    pub settings_done: Option<(std::collections::BTreeMap<String, String>, Option<String>)>,
    /// Firmware updates made: not made again while the HostFirmwareComponents' record of them
    /// is on its way.
    pub updates_done: Vec<ComponentUpdate>,
    /// A DataImage attach (or, `None`, detach) that failed: not tried again until the
    /// DataImage asks for something else.
    pub data_image_failed: Option<Option<String>>,
}

/// The host's DataImage (metal3's): an ISO to attach as virtual media at its next boot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataImageWork {
    pub url: String,
    /// Being deleted: detach it.
    pub deleting: bool,
    /// What its status says is attached.
    pub attached: Option<String>,
    /// Its status' last error message.
    pub error: Option<String>,
}

/// What the host did with its DataImage, for its status.
#[derive(Debug, Clone, PartialEq)]
pub enum DataImageResult {
    Attached(String),
    Detached,
    Failed(String),
}

/// What the host's HostFirmwareSettings and HostUpdatePolicy ask, as the reconciler read them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirmwareWork {
    /// Wanted settings that are valid (against the BMC's registry, for the object's current
    /// generation) and differ from what the BMC reported; empty: nothing to do.
    pub changes: FirmwareChanges,
    /// The read of the BMC the settings come from (the HostFirmwareSettings'
    /// `status.lastUpdated`).
    pub read: Option<String>,
    /// A HostUpdatePolicy says `firmwareSettings: onReboot`: a provisioned host's settings
    /// change when it reboots (metal3's servicing).
    pub settings_on_reboot: bool,
    /// ... and `firmwareUpdates: onReboot`: its firmware is updated then.
    pub updates_on_reboot: bool,
}

/// The one provisioner call a reconcile makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    HasCapacity,
    Register {
        credentials_changed: bool,
    },
    Inspect {
        refresh: bool,
    },
    Prepare,
    ChangeFirmware(FirmwareChanges),
    ConfigureRaid(Vec<ferrometal_api::HardwareRaidVolume>),
    /// Attach this ISO as virtual media (`None`: detach).
    DataImage(Option<String>),
    Provision,
    Adopt,
    Deprovision,
    PowerState,
    PowerOn,
    PowerOff(PowerOffMode),
    Operation(Operation),
    Detach,
    Delete,
}

/// The result of a [`Call`].
#[derive(Debug, Clone, PartialEq)]
// Built once per reconcile and moved straight into the decision: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Capacity(bool),
    Registered(Registration),
    Inspected(Option<HardwareDetails>),
    Power(PowerState),
    Done,
    Waiting {
        requeue_after: Duration,
        reason: String,
    },
    Failed(ProvisionerError),
}

#[derive(Debug, Clone)]
pub struct Input<'a> {
    pub namespace: &'a str,
    pub spec: &'a BareMetalHostSpec,
    pub status: Option<&'a BareMetalHostStatus>,
    pub annotations: &'a BTreeMap<String, String>,
    pub generation: Option<i64>,
    pub deleting: bool,
    pub has_finalizer: bool,
    pub credentials: CredentialsObservation,
    pub memo: Option<&'a Memo>,
    pub firmware: &'a FirmwareWork,
    pub data_image: Option<&'a DataImageWork>,
    /// The provisioner builds metal3's `softwareRAIDVolumes` (through its deploy agent).
    pub builds_software_raid: bool,
    /// The call made in this reconcile and its outcome (second pass only).
    pub last: Option<(Call, Outcome)>,
    pub now: Timestamp,
    /// In `[0, 1)`: spreads polls and backoffs.
    pub jitter: f64,
    pub timing: &'a Timing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerChange {
    Add,
    Remove,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub enum MemoChange {
    #[default]
    Keep,
    Set(Memo),
    Forget,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Make this call and decide again with its outcome; nothing else in this decision counts.
    pub call: Option<Call>,
    /// The new status, when it differs from the current one.
    pub status: Option<BareMetalHostStatus>,
    pub remove_annotations: Vec<String>,
    pub finalizer: Option<FinalizerChange>,
    pub events: Vec<HostEvent>,
    /// Create or update the host's HardwareData with these details.
    pub hardware_data: Option<HardwareDetails>,
    pub memo: MemoChange,
    /// `None`: wait for a change to the host.
    pub requeue: Option<Duration>,
    /// What was done with the DataImage: recorded in its status.
    pub data_image: Option<DataImageResult>,
    /// Firmware updates just made: recorded in the HostFirmwareComponents' `status.updates`.
    pub updates_done: Vec<ComponentUpdate>,
    /// Low-cardinality cause when this reconcile recorded a host error (for metrics).
    pub error_category: Option<&'static str>,
}
