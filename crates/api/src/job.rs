//! `BMCJob` (ferrometal.io/v1alpha1): ordered one-off BMC tasks on one host, in Tinkerbell
//! Rufio's action shapes, after which the host is brought back to its desired state.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::Condition;

/// Condition types of a job.
pub mod conditions {
    pub const WAITING: &str = "Waiting";
    pub const RUNNING: &str = "Running";
    pub const COMPLETED: &str = "Completed";
    pub const FAILED: &str = "Failed";
}

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ferrometal.io",
    version = "v1alpha1",
    kind = "BMCJob",
    plural = "bmcjobs",
    singular = "bmcjob",
    shortname = "bmcjob",
    namespaced,
    status = "BMCJobStatus",
    printcolumn = r#"{"name":"Host","type":"string","jsonPath":".spec.hostRef.name"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Task","type":"string","jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BMCJobSpec {
    /// The BareMetalHost in the job's namespace whose BMC runs the tasks.
    pub host_ref: HostRef,
    /// Run in order; a failed task ends the job (the restore still runs).
    #[schemars(length(min = 1, max = 32))]
    pub tasks: Vec<JobTask>,
    /// Afterwards: back to `spec.online`, media the job inserted ejected, one-time boot
    /// overrides cleared. Rufio's Jobs have no desired state to restore.
    #[serde(default = "yes")]
    pub restore_desired_state: bool,
    /// Delete the job this long after it finished; unset keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i64>,
}

fn yes() -> bool {
    true
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HostRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// One action, exactly one of the three shapes (Rufio's `Action`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.powerAction) ? 1 : 0) + (has(self.oneTimeBootDeviceAction) ? 1 : 0) + (has(self.virtualMediaAction) ? 1 : 0) == 1").message("each task has exactly one of powerAction, oneTimeBootDeviceAction, virtualMediaAction"))]
pub struct JobTask {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_action: Option<PowerAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_time_boot_device_action: Option<OneTimeBootDeviceAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_media_action: Option<VirtualMediaAction>,
}

/// Rufio's power actions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PowerAction {
    On,
    Off,
    Soft,
    Status,
    Cycle,
    Reset,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OneTimeBootDeviceAction {
    /// Rufio takes a list and uses its first device.
    #[schemars(length(min = 1, max = 4))]
    pub device: Vec<BootDevice>,
    #[serde(default)]
    pub efi_boot: bool,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BootDevice {
    Pxe,
    Disk,
    Bios,
    Cdrom,
    Safe,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMediaAction {
    /// The image to insert; empty ejects.
    #[serde(default, rename = "mediaURL")]
    #[schemars(length(max = 2048))]
    pub media_url: String,
    /// Rufio's media kind (`CD`, `Floppy`...); the CD slot is used.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub kind: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TaskState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Not run: an earlier task failed or the job was deleted.
    Skipped,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub message: String,
    /// The action was sent to the BMC. Written before it is sent, so a restart observes
    /// instead of sending it again: destructive actions run at most once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub issued: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
}

/// The job's summary, for the STATUS column.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum JobPhase {
    #[default]
    Waiting,
    Running,
    Restoring,
    Completed,
    Failed,
}

/// The restore after the tasks: what is left to undo and how it went.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub message: String,
    /// A task inserted or ejected media: the restore puts back the host's (the live ISO its
    /// provisioning inserted, or none).
    #[serde(
        default,
        alias = "ejectMedia",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub media_changed: bool,
    /// A task set a one-time boot device (or the media was put back): the restore sets the
    /// boot the host needs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear_boot: bool,
    /// A task powered the host on or restarted it, so it may run something other than its
    /// image: a restore that puts the image back also boots it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub booted: bool,
    /// The restore boots the host into its image (a restart, or power on).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restart: bool,
    /// The power action of the restore was sent (observed afterwards, never sent twice).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub power_issued: bool,
    /// The boot override was read before a task changed it (`bootBefore` is what it was).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub boot_saved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_before: Option<SavedBoot>,
}

/// A boot override as the BMC showed it before the job, to put back afterwards.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavedBoot {
    /// Redfish's name: Pxe, Hdd, Cd, BiosSetup, UefiHttp.
    #[schemars(length(max = 16))]
    pub device: String,
    /// Next boot only (else until changed).
    #[serde(default)]
    pub once: bool,
    /// UEFI or Legacy; unset leaves the BMC's mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8))]
    pub mode: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BMCJobStatus {
    #[serde(default)]
    pub phase: JobPhase,
    /// `n/m`: tasks finished of all.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16))]
    pub progress: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tasks: Vec<TaskStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
}

impl JobTask {
    /// A short name for events and progress lines: `power=off`, `boot=pxe`, `media=eject`.
    pub fn describe(&self) -> String {
        if let Some(p) = self.power_action {
            return format!("power={}", p.as_str());
        }
        if let Some(b) = &self.one_time_boot_device_action {
            let d = b.device.first().map(|d| d.as_str()).unwrap_or("none");
            return format!("boot={d}");
        }
        match &self.virtual_media_action {
            Some(m) if m.media_url.is_empty() => "media=eject".into(),
            Some(m) => format!("media={}", m.media_url),
            None => "empty".into(),
        }
    }
}

impl PowerAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::On => "on",
            PowerAction::Off => "off",
            PowerAction::Soft => "soft",
            PowerAction::Status => "status",
            PowerAction::Cycle => "cycle",
            PowerAction::Reset => "reset",
        }
    }
}

impl BootDevice {
    pub fn as_str(self) -> &'static str {
        match self {
            BootDevice::Pxe => "pxe",
            BootDevice::Disk => "disk",
            BootDevice::Bios => "bios",
            BootDevice::Cdrom => "cdrom",
            BootDevice::Safe => "safe",
        }
    }
}
