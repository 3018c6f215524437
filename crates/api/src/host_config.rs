//! What a host is asked to become besides its image: RAID volumes, firmware settings and how
//! its NICs are wired. metal3's types, field for field, so that YAML written for metal3 keeps
//! every field (what a provisioner cannot act on is reported, never dropped).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// MAC address, as metal3 spells its pattern for NICs and switch IDs.
pub const MAC_PATTERN: &str = "^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$";

/// RAID volumes to build during preparation. `hardwareRAIDVolumes: []` clears a controller's
/// volumes; a missing (null) list leaves them alone, so both lists are `Option`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.hardwareRAIDVolumes) || size(self.hardwareRAIDVolumes) == 0 || !has(self.softwareRAIDVolumes) || size(self.softwareRAIDVolumes) == 0").message("hardwareRAIDVolumes and softwareRAIDVolumes can not be set at the same time"))]
#[x_kube(validation = Rule::new("!has(self.softwareRAIDVolumes) || size(self.softwareRAIDVolumes.filter(v, has(v.rootVolume) && v.rootVolume)) <= 1").message("softwareRAIDVolumes[*].rootVolume can only be set once").field_path(".softwareRAIDVolumes"))]
pub struct RaidConfig {
    // Bounds metal3 leaves open: they keep the CEL rules within the API server's cost budget
    // and are far above any controller's volume count.
    #[serde(default, rename = "hardwareRAIDVolumes")]
    #[schemars(extend("nullable" = true), length(max = 64))]
    pub hardware_raid_volumes: Option<Vec<HardwareRaidVolume>>,
    #[serde(default, rename = "softwareRAIDVolumes")]
    #[schemars(extend("nullable" = true), length(max = 2))]
    pub software_raid_volumes: Option<Vec<SoftwareRaidVolume>>,
}

impl RaidConfig {
    /// Whether this asks for anything at all (both lists missing asks for nothing).
    pub fn is_requested(&self) -> bool {
        self.hardware_raid_volumes.is_some() || self.software_raid_volumes.is_some()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.physicalDisks) || size(self.physicalDisks) == 0 || (has(self.controller) && self.controller != '')").message("'physicalDisks' specified without 'controller' in hardware RAID volume").field_path(".controller"))]
#[x_kube(validation = Rule::new("!has(self.numberOfPhysicalDisks) || !has(self.physicalDisks) || size(self.physicalDisks) == 0 || self.numberOfPhysicalDisks == size(self.physicalDisks)").message(kube::core::Message::Expression(r#""the 'numberOfPhysicalDisks'[" + string(self.numberOfPhysicalDisks) + "] and number of 'physicalDisks'[" + string(size(self.physicalDisks)) + "] is not same""#.into())).field_path(".numberOfPhysicalDisks"))]
pub struct HardwareRaidVolume {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub size_gibibytes: Option<i64>,
    #[schemars(extend("enum" = ["0", "1", "2", "5", "6", "1+0", "5+0", "6+0"]))]
    pub level: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub number_of_physical_disks: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub controller: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 256)))]
    pub physical_disks: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.rootVolume) || !self.rootVolume || self.level == '1'").message("softwareRAIDVolumes with rootVolume set must use RAID level 1").field_path(".level"))]
pub struct SoftwareRaidVolume {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub root_volume: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub size_gibibytes: Option<i64>,
    #[schemars(extend("enum" = ["0", "1", "1+0"]))]
    pub level: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 2, max = 16))]
    pub physical_disks: Vec<RootDeviceHints>,
}

/// BIOS settings metal3 once offered. metal3 marks them deprecated ("no longer supported by
/// any driver"); kept so such YAML round-trips, and reported as not acted on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simultaneous_multithreading_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sriov_enabled: Option<bool>,
}

impl FirmwareConfig {
    pub fn is_requested(&self) -> bool {
        self.virtualization_enabled.is_some()
            || self.simultaneous_multithreading_enabled.is_some()
            || self.sriov_enabled.is_some()
    }
}

/// Which switch port a NIC is cabled to (in place of LLDP).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SwitchPort {
    #[serde(rename = "switchID")]
    #[schemars(regex(pattern = MAC_PATTERN))]
    pub switch_id: String,
    #[serde(rename = "portID")]
    pub port_id: String,
}

/// A reference to a HostNetworkAttachment (metal3's network configuration objects).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HostNetworkAttachmentRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Network configuration wanted for one NIC, named or by MAC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.name) || has(self.macAddress)").message("must specify either name or macAddress"))]
#[x_kube(validation = Rule::new("!(has(self.name) && has(self.macAddress))").message("name and macAddress are mutually exclusive"))]
pub struct NetworkInterface {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[a-zA-Z0-9._-]+$"))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MAC_PATTERN))]
    pub mac_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network_attachment: Option<HostNetworkAttachmentRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_port: Option<SwitchPort>,
}

// Which disk the image goes to; also names the disks of a RAID volume. (A plain comment:
// a doc comment would become the CRD field's description.)
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.deviceName) || self.deviceName.startsWith('/dev/')").message(kube::core::Message::Expression(r#"'device name of root device hint must be a /dev/ path, not "' + self.deviceName + '"'"#.into())).field_path(".deviceName"))]
#[x_kube(validation = Rule::new("!has(self.deviceName) || !self.deviceName.startsWith('/dev/') || self.deviceName.matches('^/dev/(disk/by-path/)?[^/]*$')").message(kube::core::Message::Expression(r#"'device name of root device hint must be path in /dev/ or /dev/disk/by-path/, not "' + self.deviceName + '"'"#.into())).field_path(".deviceName"))]
pub struct RootDeviceHints {
    /// Bounded (metal3 is not) so its CEL rules fit the API server's cost budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_size_gigabytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_with_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_vendor_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
}
