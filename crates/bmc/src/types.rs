//! Values exchanged with a BMC, independent of protocol.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PowerState {
    On,
    Off,
    PoweringOn,
    PoweringOff,
    Unknown,
}

impl PowerState {
    /// Reads a vendor's power string defensively ("On", "on", "Chassis Power is on", ...).
    pub fn parse_lenient(text: &str) -> PowerState {
        let lower = text.trim().to_ascii_lowercase();
        match lower.rsplit(' ').next().unwrap_or("") {
            "on" => PowerState::On,
            "off" => PowerState::Off,
            "poweringon" => PowerState::PoweringOn,
            "poweringoff" => PowerState::PoweringOff,
            _ => PowerState::Unknown,
        }
    }

    pub fn is_on(self) -> bool {
        matches!(self, PowerState::On | PowerState::PoweringOn)
    }
}

impl std::fmt::Display for PowerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// Power actions, named as Redfish `ResetType`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PowerAction {
    On,
    ForceOn,
    ForceOff,
    GracefulShutdown,
    GracefulRestart,
    ForceRestart,
    PowerCycle,
}

impl PowerAction {
    pub const ALL: [PowerAction; 7] = [
        PowerAction::On,
        PowerAction::ForceOn,
        PowerAction::ForceOff,
        PowerAction::GracefulShutdown,
        PowerAction::GracefulRestart,
        PowerAction::ForceRestart,
        PowerAction::PowerCycle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::On => "On",
            PowerAction::ForceOn => "ForceOn",
            PowerAction::ForceOff => "ForceOff",
            PowerAction::GracefulShutdown => "GracefulShutdown",
            PowerAction::GracefulRestart => "GracefulRestart",
            PowerAction::ForceRestart => "ForceRestart",
            PowerAction::PowerCycle => "PowerCycle",
        }
    }

    /// The power state the action ends in.
    pub fn target_state(self) -> PowerState {
        match self {
            PowerAction::ForceOff | PowerAction::GracefulShutdown => PowerState::Off,
            _ => PowerState::On,
        }
    }
}

impl std::str::FromStr for PowerAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PowerAction::ALL
            .into_iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let all: Vec<_> = PowerAction::ALL.iter().map(|a| a.as_str()).collect();
                format!(
                    "unknown power action {s:?}; expected one of {}",
                    all.join(", ")
                )
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootDevice {
    Pxe,
    Hdd,
    Cd,
    BiosSetup,
    UefiHttp,
}

impl BootDevice {
    pub fn redfish_name(self) -> &'static str {
        match self {
            BootDevice::Pxe => "Pxe",
            BootDevice::Hdd => "Hdd",
            BootDevice::Cd => "Cd",
            BootDevice::BiosSetup => "BiosSetup",
            BootDevice::UefiHttp => "UefiHttp",
        }
    }
}

impl std::str::FromStr for BootDevice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "pxe" => BootDevice::Pxe,
            "hdd" | "disk" => BootDevice::Hdd,
            "cd" | "cdrom" => BootDevice::Cd,
            "bios" | "biossetup" => BootDevice::BiosSetup,
            "uefihttp" | "http" => BootDevice::UefiHttp,
            _ => {
                return Err(format!(
                    "unknown boot device {s:?}; expected pxe, disk, cdrom, bios or uefihttp"
                ));
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootMode {
    #[serde(rename = "UEFI")]
    Uefi,
    Legacy,
}

/// A boot override: next boot only (`once`) or until changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootOverride {
    pub device: BootDevice,
    pub once: bool,
    /// `None` leaves the BMC's current mode.
    pub mode: Option<BootMode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MediaStatus {
    pub inserted: bool,
    pub image: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemIdentity {
    pub uuid: Option<String>,
    pub manufacturer: Option<String>,
    pub model: Option<String>,
    pub serial_number: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    pub model: String,
    pub architecture: String,
    pub cores: u32,
    pub threads: u32,
    pub speed_mhz: u32,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryModule {
    pub name: String,
    pub capacity_mib: u64,
    pub kind: String,
    pub speed_mhz: u32,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nic {
    pub name: String,
    pub mac: String,
    pub speed_mbps: u64,
    pub link_up: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    pub name: String,
    pub size_bytes: u64,
    /// SSD or HDD, as the BMC says.
    pub media_type: String,
    pub model: String,
    pub serial_number: String,
    pub protocol: String,
}

/// Out-of-band inventory. `warnings` names parts the BMC could not report, so a caller can
/// decide whether the rest is enough (an inspection needs CPUs and NICs at least).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub identity: SystemIdentity,
    pub cpus: Vec<Cpu>,
    pub memory: Vec<MemoryModule>,
    pub nics: Vec<Nic>,
    pub disks: Vec<Disk>,
    /// The system's `MemorySummary.TotalSystemMemoryGiB` in MiB, read when the BMC lists no
    /// memory modules (sushy-tools' libvirt driver answers 404 for them), as Ironic does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_summary_mib: Option<u64>,
    pub warnings: Vec<String>,
}

impl Inventory {
    /// The modules' capacity; without modules, the system's summary; else 0 (unknown).
    pub fn total_memory_mib(&self) -> u64 {
        let modules: u64 = self.memory.iter().map(|m| m.capacity_mib).sum();
        if modules > 0 {
            modules
        } else {
            self.memory_summary_mib.unwrap_or(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_strings_from_vendors() {
        for (text, state) in [
            ("On", PowerState::On),
            ("off", PowerState::Off),
            ("Chassis Power is on", PowerState::On),
            ("Chassis Power is off\n", PowerState::Off),
            ("PoweringOn", PowerState::PoweringOn),
            ("PoweringOff", PowerState::PoweringOff),
            ("", PowerState::Unknown),
            ("Paused", PowerState::Unknown),
        ] {
            assert_eq!(PowerState::parse_lenient(text), state, "{text:?}");
        }
    }

    #[test]
    fn actions_and_devices_parse() {
        assert_eq!(
            "powercycle".parse::<PowerAction>(),
            Ok(PowerAction::PowerCycle)
        );
        assert!(
            "reboot"
                .parse::<PowerAction>()
                .unwrap_err()
                .contains("\"reboot\"")
        );
        assert_eq!("disk".parse::<BootDevice>(), Ok(BootDevice::Hdd));
        assert!(
            "floppy"
                .parse::<BootDevice>()
                .unwrap_err()
                .contains("\"floppy\"")
        );
    }
}

/// A system's BIOS settings as its BMC reports them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bios {
    /// Current values, attribute name to value (string, number or boolean, as the BMC has it).
    pub attributes: std::collections::BTreeMap<String, serde_json::Value>,
    /// Values waiting for the next boot.
    pub pending: std::collections::BTreeMap<String, serde_json::Value>,
    /// The attribute registry's name (`Bios.AttributeRegistry`), when the BMC gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_name: Option<String>,
    /// The registry's attributes; empty when the BMC publishes no registry (sushy-tools).
    pub registry: Vec<BiosAttribute>,
}

/// One attribute of a BIOS attribute registry (Redfish `AttributeRegistry`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BiosAttribute {
    pub name: String,
    /// `Enumeration`, `String`, `Integer`, `Boolean` or `Password`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowable_values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<i64>,
    pub read_only: bool,
}

/// A BIOS value as text, as metal3 keeps settings (`None` for a password the BMC hides).
pub fn setting_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

impl Bios {
    /// The current value of `name` as text (see [`setting_text`]).
    pub fn current_text(&self, name: &str) -> Option<String> {
        self.attributes.get(name).and_then(setting_text)
    }

    /// The pending value of `name` as text.
    pub fn pending_text(&self, name: &str) -> Option<String> {
        self.pending.get(name).and_then(setting_text)
    }

    /// `text` as the JSON type the BMC wants for `name`: its registry's type, else the type of
    /// the value it reports now, else a string.
    pub fn typed_value(&self, name: &str, text: &str) -> serde_json::Value {
        use serde_json::Value;
        let kind = self
            .registry
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.kind.as_str());
        let integer = || text.parse::<i64>().ok().map(Value::from);
        let boolean = || text.parse::<bool>().ok().map(Value::Bool);
        let typed = match (kind, self.attributes.get(name)) {
            (Some("Integer"), _) => integer(),
            (Some("Boolean"), _) => boolean(),
            (Some(_), _) => None,
            (None, Some(Value::Number(_))) => integer(),
            (None, Some(Value::Bool(_))) => boolean(),
            (None, _) => None,
        };
        typed.unwrap_or_else(|| Value::String(text.to_string()))
    }
}

/// An EventService subscription as the BMC reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventSubscription {
    /// Its resource, for deleting it.
    pub path: String,
    pub id: String,
    pub destination: String,
    pub context: String,
}

/// A hardware RAID volume as the BMC reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RaidVolume {
    /// Its resource, for deleting it.
    pub path: String,
    pub name: String,
    /// Redfish `RAIDType`: `RAID0`, `RAID1`, `RAID5`, `RAID6`, `RAID10`, `RAID50`, `RAID60`.
    pub raid_type: String,
    pub capacity_bytes: Option<u64>,
    /// Drive paths.
    pub drives: Vec<String>,
}

/// A volume to create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeRequest {
    pub name: String,
    pub raid_type: String,
    /// `None`: as large as the drives allow.
    pub capacity_bytes: Option<u64>,
    /// Drive paths; empty: the controller picks.
    pub drives: Vec<String>,
}

/// Firmware an update replaces, by metal3's component names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirmwareComponent {
    /// The system's BIOS / UEFI firmware.
    Bios,
    /// The BMC's own firmware.
    Bmc,
    /// A network adapter's firmware, by the adapter's Redfish Id (`nic:<Id>`).
    Nic(String),
}

impl FirmwareComponent {
    /// metal3's name: `bios`, `bmc` or `nic:<Id>`.
    pub fn name(&self) -> String {
        match self {
            FirmwareComponent::Bios => "bios".into(),
            FirmwareComponent::Bmc => "bmc".into(),
            FirmwareComponent::Nic(id) => format!("{NIC_PREFIX}{id}"),
        }
    }

    /// From metal3's name; `None` for a name metal3 does not accept.
    pub fn parse(name: &str) -> Option<FirmwareComponent> {
        match name {
            "bios" => Some(FirmwareComponent::Bios),
            "bmc" => Some(FirmwareComponent::Bmc),
            _ => name
                .strip_prefix(NIC_PREFIX)
                .filter(|id| !id.is_empty())
                .map(|id| FirmwareComponent::Nic(id.to_string())),
        }
    }
}

/// The prefix of a network adapter's component name, as metal3 and Ironic write it.
pub const NIC_PREFIX: &str = "nic:";

/// Where a firmware update is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateState {
    Running {
        percent: Option<u8>,
    },
    Completed,
    /// Ended without flashing, with the BMC's message.
    Failed(String),
}

/// Firmware versions a BMC reports: the system's BIOS (`BiosVersion`), the BMC's own
/// (`Manager.FirmwareVersion`) and each network adapter's (`FirmwarePackageVersion`, by the
/// adapter's Id), as Ironic's redfish firmware interface reads them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareVersions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nics: BTreeMap<String, String>,
}

impl FirmwareVersions {
    /// Every component's version by metal3's component name.
    pub fn components(&self) -> Vec<(String, String)> {
        let named = [
            (FirmwareComponent::Bios, &self.bios),
            (FirmwareComponent::Bmc, &self.bmc),
        ];
        named
            .into_iter()
            .filter_map(|(c, v)| Some((c.name(), v.clone()?)))
            .chain(
                self.nics
                    .iter()
                    .map(|(id, v)| (FirmwareComponent::Nic(id.clone()).name(), v.clone())),
            )
            .collect()
    }
}

#[cfg(test)]
mod bios_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_typed_by_the_registry_then_by_what_the_bmc_reports() {
        let mut bios = Bios::default();
        bios.attributes.insert("Cores".into(), json!(8));
        bios.attributes.insert("Ht".into(), json!(true));
        bios.attributes.insert("Mode".into(), json!("Uefi"));
        assert_eq!(bios.typed_value("Cores", "16"), json!(16));
        assert_eq!(bios.typed_value("Ht", "false"), json!(false));
        assert_eq!(bios.typed_value("Mode", "Bios"), json!("Bios"));
        // A value that is not of the attribute's type stays text; the BMC names the error.
        assert_eq!(bios.typed_value("Cores", "many"), json!("many"));
        bios.registry.push(BiosAttribute {
            name: "Cores".into(),
            kind: "String".into(),
            ..Default::default()
        });
        assert_eq!(bios.typed_value("Cores", "16"), json!("16"));
        assert_eq!(bios.current_text("Cores").as_deref(), Some("8"));
        assert_eq!(setting_text(&json!(null)), None);
    }
}
