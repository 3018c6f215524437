//! metal3's day-2 firmware kinds (metal3.io/v1alpha1), field for field with baremetal-operator:
//! `HostFirmwareSettings` (BIOS settings wanted and current), `FirmwareSchema` (the BIOS attribute
//! registry, shared by hosts of the same hardware), `HostFirmwareComponents` (firmware updates
//! wanted, versions seen) and `HostUpdatePolicy` (whether a provisioned host may apply them on
//! reboot). Each lives in the host's namespace under the host's name.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::Condition;

/// Bound on the settings of one host: BIOS registries of large servers hold a few thousand
/// attributes; more is not a BIOS.
const MAX_SETTINGS: u32 = 4096;

/// The firmware (BIOS) settings wanted on the host of the same name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HostFirmwareSettings",
    plural = "hostfirmwaresettings",
    shortname = "hfs",
    category = "metal3",
    namespaced,
    status = "HostFirmwareSettingsStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct HostFirmwareSettingsSpec {
    /// The wanted settings, name to value (a number or a string, as the attribute's type).
    #[schemars(extend("maxProperties" = MAX_SETTINGS))]
    pub settings: BTreeMap<String, IntOrString>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostFirmwareSettingsStatus {
    /// The FirmwareSchema describing each setting.
    #[serde(default, rename = "schema", skip_serializing_if = "Option::is_none")]
    pub firmware_schema: Option<SchemaReference>,
    /// The settings the BMC reports, name to value.
    #[serde(default)]
    #[schemars(extend("maxProperties" = MAX_SETTINGS))]
    pub settings: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_updated: Option<String>,
    /// `Valid` (the wanted settings pass the schema) and `ChangeDetected` (spec differs from
    /// the current settings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SchemaReference {
    pub namespace: String,
    pub name: String,
}

/// A BIOS attribute registry, as metal3 stores it (Ironic's names, snake case).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "FirmwareSchema",
    plural = "firmwareschemas",
    category = "metal3",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareSchemaSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 256))]
    pub hardware_vendor: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 256))]
    pub hardware_model: String,
    /// Attribute name to its description.
    #[schemars(extend("maxProperties" = MAX_SETTINGS))]
    pub schema: BTreeMap<String, SettingSchema>,
}

/// One attribute of a registry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SettingSchema {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["Enumeration", "String", "Integer", "Boolean", "Password"]))]
    pub attribute_type: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub allowable_values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique: Option<bool>,
}

/// Firmware updates wanted on the host of the same name, and the versions it reports.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HostFirmwareComponents",
    plural = "hostfirmwarecomponents",
    category = "metal3",
    namespaced,
    status = "HostFirmwareComponentsStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct HostFirmwareComponentsSpec {
    /// One update per component: `bmc`, `bios` or `nic:<id>`.
    #[schemars(length(max = 64))]
    pub updates: Vec<FirmwareUpdate>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct FirmwareUpdate {
    #[schemars(length(max = 256))]
    pub component: String,
    #[schemars(length(max = 4096))]
    pub url: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostFirmwareComponentsStatus {
    /// The updates last applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub updates: Vec<FirmwareUpdate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub components: Vec<FirmwareComponentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_updated: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareComponentStatus {
    pub component: String,
    pub initial_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_version_flashed: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: Option<String>,
}

/// Whether the host of the same name applies firmware changes only while preparing (the
/// default) or also on a reboot of the provisioned host (metal3's servicing).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HostUpdatePolicy",
    plural = "hostupdatepolicies",
    category = "metal3",
    namespaced,
    status = "HostUpdatePolicyStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct HostUpdatePolicySpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["onPreparing", "onReboot"]))]
    pub firmware_settings: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["onPreparing", "onReboot"]))]
    pub firmware_updates: String,
}

/// Empty upstream; ferrometal adds its conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HostUpdatePolicyStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
