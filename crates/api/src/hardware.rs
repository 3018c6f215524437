//! Inspection results: `status.hardware` of a host and the `HardwareData` resource (metal3.io).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The inspection result of the host with the same name and namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HardwareData",
    plural = "hardwaredata",
    shortname = "hd",
    category = "metal3",
    namespaced,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HardwareDataSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<HardwareDetails>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HardwareDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_vendor: Option<HardwareSystemVendor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    #[serde(default)]
    pub ram_mebibytes: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<NicDetails>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<StorageDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HardwareSystemVendor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Firmware {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<BiosDetails>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BiosDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NicDetails {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Omitted when unknown: metal3's schema requires a MAC whenever the field is present.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = "[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}"))]
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(default)]
    pub speed_gbps: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vlans: Vec<Vlan>,
    /// The untagged VLAN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 4094))]
    pub vlan_id: Option<i32>,
    #[serde(default)]
    pub pxe: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lldp: Option<Lldp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Vlan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 4094))]
    pub id: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What the switch at the other end of a NIC announced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lldp {
    #[serde(default, rename = "switchID", skip_serializing_if = "Option::is_none")]
    pub switch_id: Option<String>,
    #[serde(default, rename = "portID", skip_serializing_if = "Option::is_none")]
    pub port_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_system_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DiskType {
    #[serde(rename = "HDD")]
    Hdd,
    #[serde(rename = "SSD")]
    Ssd,
    #[serde(rename = "NVME")]
    Nvme,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageDetails {
    #[serde(default)]
    pub name: String,
    /// Other names of the same device (e.g. /dev/disk/by-path links).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternate_names: Vec<String>,
    #[serde(default)]
    pub rotational: bool,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<DiskType>,
    #[serde(default)]
    pub size_bytes: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_vendor_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_with_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuDetails {
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub clock_megahertz: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    #[serde(default)]
    pub count: i64,
}
