//! BIOS settings as Redfish serves them: `Systems/{id}/Bios` (current attributes, the name of
//! their registry, and `@Redfish.Settings` pointing at the pending-settings resource),
//! `Systems/{id}/Bios/Settings` (GET the pending attributes, PATCH to add to them) and the
//! attribute registry under `/redfish/v1/Registries`. Pending attributes take effect at the
//! next boot, as on real servers. A PATCH is checked against the registry as iDRAC and iLO
//! check it: an unknown or read-only attribute, or a value of the wrong type or out of range,
//! is refused and nothing of that PATCH is kept.
//!
//! Each system stores only what differs from the registry's defaults, so 10,000 systems cost
//! nothing until someone changes a setting.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The registry's name as `Bios.AttributeRegistry` reports it, and its file's id.
pub const REGISTRY: &str = "BiosAttributeRegistryFM.1.0.0";
pub const REGISTRY_FILE: &str = "BiosAttributeRegistryFM";

/// One attribute of the registry.
struct Attribute {
    name: &'static str,
    kind: Kind,
    read_only: bool,
}

enum Kind {
    Enumeration(&'static [&'static str], &'static str),
    Integer { low: i64, high: i64, default: i64 },
    String { min: usize, max: usize },
    Boolean(bool),
    Password,
}

const ATTRIBUTES: &[Attribute] = &[
    Attribute {
        name: "ProcTurboMode",
        kind: Kind::Enumeration(&["Enabled", "Disabled"], "Enabled"),
        read_only: false,
    },
    Attribute {
        name: "ProcVirtualization",
        kind: Kind::Enumeration(&["Enabled", "Disabled"], "Enabled"),
        read_only: false,
    },
    Attribute {
        name: "BootMode",
        kind: Kind::Enumeration(&["Uefi", "Bios"], "Uefi"),
        read_only: false,
    },
    Attribute {
        name: "NumCores",
        kind: Kind::Integer {
            low: 1,
            high: 64,
            default: 8,
        },
        read_only: false,
    },
    Attribute {
        name: "NetworkBootRetryCount",
        kind: Kind::Integer {
            low: 0,
            high: 100,
            default: 10,
        },
        read_only: false,
    },
    Attribute {
        name: "QuietBoot",
        kind: Kind::Boolean(true),
        read_only: false,
    },
    Attribute {
        name: "AssetTag",
        kind: Kind::String { min: 0, max: 32 },
        read_only: false,
    },
    Attribute {
        name: "SerialNumber",
        kind: Kind::String { min: 0, max: 16 },
        read_only: true,
    },
    Attribute {
        name: "SysPassword",
        kind: Kind::Password,
        read_only: false,
    },
];

fn default_value(attr: &Attribute, index: usize) -> Value {
    match &attr.kind {
        Kind::Enumeration(_, default) => json!(default),
        Kind::Integer { default, .. } => json!(default),
        Kind::String { .. } if attr.name == "SerialNumber" => json!(format!("FM{index:08}")),
        Kind::String { .. } => json!(""),
        Kind::Boolean(default) => json!(default),
        Kind::Password => Value::Null,
    }
}

/// A system's BIOS: what differs from the defaults, and what waits for the next boot.
#[derive(Default)]
pub struct BiosState {
    changed: BTreeMap<&'static str, Value>,
    pending: BTreeMap<&'static str, Value>,
}

impl BiosState {
    /// The current attributes, defaults overlaid with what was applied.
    pub fn attributes(&self, index: usize) -> Map<String, Value> {
        ATTRIBUTES
            .iter()
            .map(|a| {
                let value = self
                    .changed
                    .get(a.name)
                    .cloned()
                    .unwrap_or_else(|| default_value(a, index));
                (a.name.to_string(), value)
            })
            .collect()
    }

    pub fn pending(&self) -> Map<String, Value> {
        self.pending
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// Checks a PATCH of `Bios/Settings` and, if every attribute passes, adds it to the
    /// pending settings. The error is a Redfish message id and text naming the attribute.
    pub fn stage(&mut self, attributes: &Map<String, Value>) -> Result<(), (&'static str, String)> {
        let mut staged = Vec::with_capacity(attributes.len());
        for (name, value) in attributes {
            let Some(attr) = ATTRIBUTES.iter().find(|a| a.name == name) else {
                return Err((
                    "Base.1.8.PropertyUnknown",
                    format!(
                        "The property {name} is not in the list of valid properties for the resource."
                    ),
                ));
            };
            if attr.read_only {
                return Err((
                    "Base.1.8.PropertyNotWritable",
                    format!(
                        "The property {name} is a read only property and cannot be assigned a value."
                    ),
                ));
            }
            let fits = match &attr.kind {
                Kind::Enumeration(values, _) => value.as_str().is_some_and(|v| values.contains(&v)),
                Kind::Integer { low, high, .. } => {
                    value.as_i64().is_some_and(|n| (*low..=*high).contains(&n))
                }
                Kind::String { min, max } => value
                    .as_str()
                    .is_some_and(|s| (*min..=*max).contains(&s.len())),
                Kind::Boolean(_) => value.is_boolean(),
                Kind::Password => value.is_string(),
            };
            if !fits {
                return Err((
                    "Base.1.8.PropertyValueNotInList",
                    format!(
                        "The value {value} for the property {name} is not in the list of acceptable values."
                    ),
                ));
            }
            staged.push((attr.name, value.clone()));
        }
        self.pending.extend(staged);
        Ok(())
    }

    /// A boot that ignores the pending settings (the `drop_bios_settings` fault).
    pub fn drop_pending(&mut self) {
        self.pending.clear();
    }

    /// A boot takes the pending settings. A password is taken but never shown.
    pub fn apply_pending(&mut self) {
        for (name, value) in std::mem::take(&mut self.pending) {
            if name != "SysPassword" {
                self.changed.insert(name, value);
            }
        }
    }
}

/// `Systems/{id}/Bios`.
pub fn bios_doc(base: &str, index: usize, bios: &BiosState) -> Value {
    json!({
        "@odata.type": "#Bios.v1_2_0.Bios",
        "@odata.id": format!("{base}/Bios"),
        "Id": "Bios",
        "Name": "BIOS Configuration Current Settings",
        "AttributeRegistry": REGISTRY,
        "Attributes": bios.attributes(index),
        "@Redfish.Settings": {
            "@odata.type": "#Settings.v1_3_5.Settings",
            "SettingsObject": {"@odata.id": format!("{base}/Bios/Settings")},
        },
    })
}

/// `Systems/{id}/Bios/Settings`.
pub fn settings_doc(base: &str, bios: &BiosState) -> Value {
    json!({
        "@odata.type": "#Bios.v1_2_0.Bios",
        "@odata.id": format!("{base}/Bios/Settings"),
        "Id": "Settings",
        "Name": "BIOS Configuration Pending Settings",
        "AttributeRegistry": REGISTRY,
        "Attributes": bios.pending(),
    })
}

/// `/redfish/v1/Registries`.
pub fn registries_doc() -> Value {
    json!({
        "@odata.type": "#MessageRegistryFileCollection.MessageRegistryFileCollection",
        "@odata.id": "/redfish/v1/Registries",
        "Name": "Registry File Collection",
        "Members@odata.count": 1,
        "Members": [{"@odata.id": format!("/redfish/v1/Registries/{REGISTRY_FILE}")}],
    })
}

/// `/redfish/v1/Registries/{file}`: where the registry itself is.
pub fn registry_file_doc() -> Value {
    json!({
        "@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
        "@odata.id": format!("/redfish/v1/Registries/{REGISTRY_FILE}"),
        "Id": REGISTRY_FILE,
        "Name": "BIOS Attribute Registry File",
        "Registry": REGISTRY,
        "Languages": ["en"],
        "Location": [{
            "Language": "en",
            "Uri": format!("/redfish/v1/Registries/{REGISTRY_FILE}/{REGISTRY_FILE}.json"),
        }],
    })
}

/// The attribute registry (`AttributeRegistry.v1_3_x`).
pub fn registry_doc() -> Value {
    let attributes: Vec<Value> = ATTRIBUTES
        .iter()
        .map(|a| {
            let mut entry = json!({
                "AttributeName": a.name,
                "ReadOnly": a.read_only,
                "DisplayName": a.name,
            });
            match &a.kind {
                Kind::Enumeration(values, default) => {
                    entry["Type"] = json!("Enumeration");
                    entry["Value"] = values.iter().map(|v| json!({"ValueName": v})).collect();
                    entry["DefaultValue"] = json!(default);
                }
                Kind::Integer { low, high, default } => {
                    entry["Type"] = json!("Integer");
                    entry["LowerBound"] = json!(low);
                    entry["UpperBound"] = json!(high);
                    entry["DefaultValue"] = json!(default);
                }
                Kind::String { min, max } => {
                    entry["Type"] = json!("String");
                    entry["MinLength"] = json!(min);
                    entry["MaxLength"] = json!(max);
                }
                Kind::Boolean(default) => {
                    entry["Type"] = json!("Boolean");
                    entry["DefaultValue"] = json!(default);
                }
                Kind::Password => entry["Type"] = json!("Password"),
            }
            entry
        })
        .collect();
    json!({
        "@odata.type": "#AttributeRegistry.v1_3_6.AttributeRegistry",
        "Id": REGISTRY,
        "Name": "BIOS Attribute Registry",
        "Language": "en",
        "RegistryVersion": "1.0.0",
        "OwningEntity": "Ferrometal",
        "RegistryEntries": {"Attributes": attributes},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn settings_wait_for_the_next_boot() {
        let mut bios = BiosState::default();
        assert_eq!(bios.attributes(3)["SerialNumber"], "FM00000003");
        bios.stage(&attrs(json!({"ProcTurboMode": "Disabled", "NumCores": 16})))
            .unwrap();
        assert_eq!(
            bios.attributes(3)["ProcTurboMode"],
            "Enabled",
            "not before a boot"
        );
        assert_eq!(bios.pending()["NumCores"], 16);
        bios.apply_pending();
        assert_eq!(bios.attributes(3)["ProcTurboMode"], "Disabled");
        assert_eq!(bios.attributes(3)["NumCores"], 16);
        assert!(bios.pending().is_empty());
    }

    #[test]
    fn a_bad_patch_is_refused_whole() {
        let mut bios = BiosState::default();
        for (patch, id) in [
            (json!({"Warp": 9}), "Base.1.8.PropertyUnknown"),
            (json!({"SerialNumber": "X"}), "Base.1.8.PropertyNotWritable"),
            (
                json!({"ProcTurboMode": "On"}),
                "Base.1.8.PropertyValueNotInList",
            ),
            (json!({"NumCores": 65}), "Base.1.8.PropertyValueNotInList"),
            (json!({"NumCores": "8"}), "Base.1.8.PropertyValueNotInList"),
            (
                json!({"QuietBoot": "true"}),
                "Base.1.8.PropertyValueNotInList",
            ),
            (
                json!({"NumCores": 4, "AssetTag": "x".repeat(33)}),
                "Base.1.8.PropertyValueNotInList",
            ),
        ] {
            let err = bios.stage(&attrs(patch.clone())).unwrap_err();
            assert_eq!(err.0, id, "{patch}");
        }
        assert!(
            bios.pending().is_empty(),
            "nothing of a refused PATCH is kept"
        );
    }
}
