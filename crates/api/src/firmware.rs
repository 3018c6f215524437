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

/// metal3's conditions on HostFirmwareSettings and HostFirmwareComponents: the wanted
/// settings or updates are valid, and differ from what the host has.
pub const VALID: &str = "Valid";
pub const CHANGE_DETECTED: &str = "ChangeDetected";
/// ferrometal's condition on HostFirmwareSettings: whether the status holds the BMC's settings
/// as read (False while they cannot be read, Unknown once the host changed its firmware and
/// until they are read again).
pub const SETTINGS_READ: &str = "ferrometal.io/SettingsRead";
/// ferrometal's condition on HostFirmwareComponents: False while the BMC's versions cannot be
/// read, with the reason.
pub const VERSIONS_READ: &str = "ferrometal.io/VersionsRead";
/// The reason of `SettingsRead=Unknown` after the host's firmware was updated.
pub const FIRMWARE_UPDATED: &str = "FirmwareUpdated";

/// A wanted setting as text, the way the BMC's values are kept in `status.settings`.
pub fn wanted_text(value: &IntOrString) -> String {
    match value {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

impl SettingSchema {
    /// Checks a wanted value against this attribute, with metal3's rules and messages: a
    /// read-only or password attribute is never set; an enumeration takes one of its values,
    /// an integer stays within its bounds, a string within its lengths, a boolean is `true` or
    /// `false`; an attribute whose type the BMC did not report takes anything.
    pub fn validate(&self, name: &str, value: &IntOrString) -> Result<(), String> {
        let invalid = |why: String| Err(format!("Setting {name} is invalid, {why}"));
        let text = match value {
            IntOrString::Int(n) => n.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        if self.read_only == Some(true) {
            return invalid("it is ReadOnly".into());
        }
        if name.contains("Password") {
            return invalid("Password fields can't be set".into());
        }
        match self.attribute_type.as_str() {
            "Enumeration" => {
                if self.allowable_values.contains(&text) {
                    Ok(())
                } else {
                    invalid(format!("unknown enumeration value - {text}"))
                }
            }
            "Integer" => {
                let Ok(n) = text.parse::<i64>() else {
                    return invalid(format!("String {text} entered while integer expected"));
                };
                if let Some(low) = self.lower_bound.filter(|low| n < *low) {
                    return invalid(format!("integer {n} is below minimum value {low}"));
                }
                if let Some(high) = self.upper_bound.filter(|high| n > *high) {
                    return invalid(format!("integer {n} is above maximum value {high}"));
                }
                Ok(())
            }
            "String" => {
                let len = text.len() as i64;
                if let Some(min) = self.min_length.filter(|min| len < *min) {
                    return invalid(format!(
                        "string {text} length is below minimum length {min}"
                    ));
                }
                if let Some(max) = self.max_length.filter(|max| len > *max) {
                    return invalid(format!(
                        "string {text} length is above maximum length {max}"
                    ));
                }
                Ok(())
            }
            "Boolean" if text == "true" || text == "false" => Ok(()),
            "Boolean" => invalid(format!("{text} is not a boolean")),
            "Password" => invalid("passwords are immutable".into()),
            "" => Ok(()),
            other => invalid(format!("unexpected attribute type {other}")),
        }
    }
}

/// Checks every wanted setting against a schema: the first problem, naming the attribute.
pub fn validate_settings(
    schema: &BTreeMap<String, SettingSchema>,
    wanted: &BTreeMap<String, IntOrString>,
) -> Result<(), String> {
    for (name, value) in wanted {
        match schema.get(name) {
            Some(attr) => attr.validate(name, value)?,
            None => {
                return Err(format!(
                    "Setting {name} is invalid, it is not in the associated schema"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enumeration() -> SettingSchema {
        SettingSchema {
            attribute_type: "Enumeration".into(),
            allowable_values: vec!["Enabled".into(), "Disabled".into()],
            ..Default::default()
        }
    }

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn values_are_checked_as_metal3_checks_them() {
        let integer = SettingSchema {
            attribute_type: "Integer".into(),
            lower_bound: Some(1),
            upper_bound: Some(64),
            ..Default::default()
        };
        let string = SettingSchema {
            attribute_type: "String".into(),
            min_length: Some(2),
            max_length: Some(4),
            ..Default::default()
        };
        let boolean = SettingSchema {
            attribute_type: "Boolean".into(),
            ..Default::default()
        };
        let read_only = SettingSchema {
            read_only: Some(true),
            ..string.clone()
        };
        let cases: &[(&SettingSchema, &str, IntOrString, Option<&str>)] = &[
            (&enumeration(), "Turbo", s("Enabled"), None),
            (
                &enumeration(),
                "Turbo",
                s("On"),
                Some("unknown enumeration value - On"),
            ),
            (&integer, "Cores", IntOrString::Int(8), None),
            (&integer, "Cores", s("8"), None),
            (
                &integer,
                "Cores",
                s("eight"),
                Some("String eight entered while integer expected"),
            ),
            (
                &integer,
                "Cores",
                IntOrString::Int(0),
                Some("integer 0 is below minimum value 1"),
            ),
            (
                &integer,
                "Cores",
                IntOrString::Int(65),
                Some("integer 65 is above maximum value 64"),
            ),
            (&string, "Tag", s("abc"), None),
            (
                &string,
                "Tag",
                s("a"),
                Some("string a length is below minimum length 2"),
            ),
            (
                &string,
                "Tag",
                s("abcde"),
                Some("string abcde length is above maximum length 4"),
            ),
            (&boolean, "Quiet", s("true"), None),
            (&boolean, "Quiet", s("yes"), Some("yes is not a boolean")),
            (&read_only, "Serial", s("abc"), Some("it is ReadOnly")),
            (
                &string,
                "AdminPassword",
                s("abc"),
                Some("Password fields can't be set"),
            ),
            (&SettingSchema::default(), "Anything", s("x"), None),
        ];
        for (schema, name, value, want) in cases {
            let got = schema.validate(name, value);
            match want {
                None => assert_eq!(got, Ok(()), "{name} {value:?}"),
                Some(why) => assert_eq!(
                    got,
                    Err(format!("Setting {name} is invalid, {why}")),
                    "{name} {value:?}"
                ),
            }
        }
    }

    #[test]
    fn an_attribute_outside_the_schema_is_named() {
        let schema = BTreeMap::from([("Turbo".to_string(), enumeration())]);
        let wanted = BTreeMap::from([
            ("Turbo".to_string(), s("Enabled")),
            ("Warp".to_string(), s("9")),
        ]);
        assert_eq!(
            validate_settings(&schema, &wanted),
            Err("Setting Warp is invalid, it is not in the associated schema".into())
        );
    }
}
