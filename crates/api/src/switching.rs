//! metal3's switch kinds (metal3.io/v1alpha1, added upstream in 2026 for Ironic networking),
//! field for field with baremetal-operator: `BareMetalSwitch` (a top-of-rack switch) and
//! `HostNetworkAttachment` (the switch-port configuration of host interfaces).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bmc_events::SecretReference;
use crate::host::Condition;

/// A top-of-rack switch.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "BareMetalSwitch",
    plural = "baremetalswitches",
    shortname = "bms",
    category = "metal3",
    namespaced,
    status = "BareMetalSwitchStatus",
    printcolumn = r#"{"name":"Driver","type":"string","description":"Switch driver type","jsonPath":".spec.driver"}"#,
    printcolumn = r#"{"name":"Device Type","type":"string","description":"Switch device type","jsonPath":".spec.deviceType"}"#,
    printcolumn = r#"{"name":"Address","type":"string","description":"Switch address","jsonPath":".spec.address"}"#,
    printcolumn = r#"{"name":"Valid","type":"string","description":"Valid","jsonPath":".status.conditions[?(@.type==\"Valid\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BareMetalSwitchSpec {
    /// IP address or host name.
    #[schemars(length(max = 253))]
    pub address: String,
    /// The management interface's MAC, to match the LLDP data hosts report.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$"))]
    pub mac_address: String,
    #[serde(default = "generic_switch", skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["generic-switch"], "default" = "generic-switch"))]
    pub driver: String,
    /// A networking-generic-switch device type, e.g. `netmiko_cisco_ios`.
    #[schemars(length(max = 253))]
    pub device_type: String,
    /// Secret with `username` and `password` or `ssh-privatekey`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_certificate_verification: bool,
}

fn generic_switch() -> String {
    "generic-switch".into()
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BareMetalSwitchStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The switch-port configuration of the host interfaces that name it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HostNetworkAttachment",
    plural = "hostnetworkattachments",
    category = "metal3",
    namespaced,
    status = "HostNetworkAttachmentStatus",
    printcolumn = r#"{"name":"Mode","type":"string","description":"Switchport mode","jsonPath":".spec.mode"}"#,
    printcolumn = r#"{"name":"Native VLAN","type":"integer","description":"Native VLAN ID","jsonPath":".spec.nativeVLAN"}"#,
    printcolumn = r#"{"name":"Age","type":"date","description":"Time duration since creation","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HostNetworkAttachmentSpec {
    #[serde(default = "access")]
    #[schemars(extend("enum" = ["access", "trunk", "hybrid"], "default" = "access"))]
    pub mode: String,
    /// The untagged VLAN.
    #[serde(rename = "nativeVLAN")]
    #[schemars(range(min = 1, max = 4094))]
    pub native_vlan: i64,
    /// Tagged VLANs: `100` or `100-200`.
    #[serde(
        default,
        rename = "allowedVLANs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 4094), inner(regex(pattern = r"^\d+(-\d+)?$")))]
    pub allowed_vlans: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 68, max = 9216))]
    pub mtu: Option<i64>,
}

fn access() -> String {
    "access".into()
}

/// metal3 gives this kind a status subresource but no status fields; ferrometal adds its
/// conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HostNetworkAttachmentStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
