//! BIOS settings and firmware versions over Redfish: the system's `Bios` resource (current attributes), its
//! `@Redfish.Settings` object (pending attributes, the one to PATCH), and the attribute
//! registry the `Bios` names, found through `/redfish/v1/Registries`. A BMC without a registry
//! (sushy-tools) still has its attributes read and written; nothing is validated against a
//! registry it does not publish.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};

use super::client::RedfishBmc;
use crate::error::BmcError;
use crate::types::{Bios, BiosAttribute, FirmwareVersions};

/// Registries a BMC lists are bounded, as everything it sends: far more than any server has.
const MAX_REGISTRY_FILES: usize = 256;

impl RedfishBmc {
    /// The Bios resource the system links; Unsupported when it links none.
    async fn bios_path(&self) -> Result<String, BmcError> {
        if !self.learned().system_read {
            self.get_system().await?;
        }
        let path = self.learned().bios.clone();
        path.ok_or_else(|| self.unsupported("BIOS settings (the system links no Bios resource)"))
    }

    pub(super) async fn read_bios(&self) -> Result<Bios, BmcError> {
        let path = self.bios_path().await?;
        let doc = self.transport.get(&path).await?;
        let attributes = object(&doc["Attributes"]);
        let pending = match settings_object(&doc) {
            // Some BMCs answer 404 until something is pending.
            Some(settings) if settings != path => match self.transport.get(&settings).await {
                Ok(settings) => object(&settings["Attributes"]),
                Err(BmcError::Http { status: 404, .. }) => BTreeMap::new(),
                Err(e) => return Err(e),
            },
            _ => BTreeMap::new(),
        };
        let registry_name = doc["AttributeRegistry"].as_str().map(String::from);
        let registry = match &registry_name {
            Some(name) => self.registry(name).await.unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(Bios {
            attributes,
            pending,
            registry_name,
            registry,
        })
    }

    /// `BiosVersion` of the system, `FirmwareVersion` of the manager that manages it, and the
    /// firmware of the network adapters in its chassis.
    pub(super) async fn read_firmware_versions(&self) -> Result<FirmwareVersions, BmcError> {
        let system = self.get_system().await?;
        let bmc = match system["Links"]["ManagedBy"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(|m| m["@odata.id"].as_str())
        {
            Some(manager) => self.transport.get(manager).await?["FirmwareVersion"]
                .as_str()
                .map(String::from),
            None => None,
        };
        Ok(FirmwareVersions {
            bios: system["BiosVersion"].as_str().map(String::from),
            bmc,
            nics: self.nic_versions(&system).await,
        })
    }

    /// Stages `changes` where the BMC keeps pending settings (the Bios resource itself when it
    /// names no settings object).
    pub(super) async fn stage_bios(
        &self,
        changes: &BTreeMap<String, Value>,
    ) -> Result<(), BmcError> {
        let path = self.bios_path().await?;
        let doc = self.transport.get(&path).await?;
        let target = settings_object(&doc).unwrap_or(path);
        self.transport
            .request(
                Method::PATCH,
                &target,
                Some(&json!({ "Attributes": changes })),
                None,
            )
            .await?;
        Ok(())
    }

    /// The attributes of the registry called `name` (e.g. `BiosAttributeRegistryX.1.0.0`):
    /// the registry file that names it (its `Registry`, or its `Id` without the version), or
    /// else the only BIOS attribute registry file the BMC lists (sushy-tools names its
    /// registry differently in the two places), then that file's English copy.
    async fn registry(&self, name: &str) -> Result<Vec<BiosAttribute>, BmcError> {
        let files = self.transport.get("/redfish/v1/Registries").await?;
        let members = files["Members"].as_array().cloned().unwrap_or_default();
        let mut candidates = Vec::new();
        for member in members.iter().take(MAX_REGISTRY_FILES) {
            let Some(file_path) = member["@odata.id"].as_str() else {
                continue;
            };
            let id = file_path.rsplit('/').next().unwrap_or_default();
            if !id.contains("AttributeRegistry") && !name.starts_with(id) {
                continue;
            }
            let file = self.transport.get(file_path).await?;
            let unversioned = |s: &str| s.split('.').next().unwrap_or_default().to_string();
            let names_it = file["Registry"].as_str() == Some(name)
                || file["Id"]
                    .as_str()
                    .is_some_and(|id| unversioned(id) == unversioned(name));
            if names_it {
                candidates.clear();
                candidates.push(file);
                break;
            }
            candidates.push(file);
        }
        let [file] = candidates.as_slice() else {
            return Ok(Vec::new());
        };
        let locations = file["Location"].as_array().cloned().unwrap_or_default();
        let uri = locations
            .iter()
            .find(|l| l["Language"].as_str().is_none_or(|lang| lang == "en"))
            .and_then(|l| l["Uri"].as_str());
        match uri {
            Some(uri) => Ok(parse_registry(&self.transport.get(uri).await?)),
            None => Ok(Vec::new()),
        }
    }
}

fn settings_object(bios: &Value) -> Option<String> {
    bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
        .as_str()
        .map(String::from)
}

fn object(v: &Value) -> BTreeMap<String, Value> {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// `RegistryEntries.Attributes` of an AttributeRegistry.
pub(super) fn parse_registry(registry: &Value) -> Vec<BiosAttribute> {
    let entries = registry["RegistryEntries"]["Attributes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    entries
        .iter()
        .filter_map(|e| {
            let name = e["AttributeName"].as_str()?;
            Some(BiosAttribute {
                name: name.to_string(),
                kind: e["Type"].as_str().unwrap_or_default().to_string(),
                allowable_values: e["Value"]
                    .as_array()
                    .map(|vs| {
                        vs.iter()
                            .filter_map(|v| v["ValueName"].as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
                lower_bound: e["LowerBound"].as_i64(),
                upper_bound: e["UpperBound"].as_i64(),
                min_length: e["MinLength"].as_i64(),
                max_length: e["MaxLength"].as_i64(),
                read_only: e["ReadOnly"].as_bool().unwrap_or(false),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_is_read_as_redfish_writes_it() {
        let registry = json!({"RegistryEntries": {"Attributes": [
            {"AttributeName": "ProcTurboMode", "Type": "Enumeration", "ReadOnly": false,
             "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]},
            {"AttributeName": "NumCores", "Type": "Integer", "LowerBound": 1, "UpperBound": 64},
            {"AttributeName": "SerialNumber", "Type": "String", "MaxLength": 16, "ReadOnly": true},
            {"Type": "String"},
        ]}});
        let attrs = parse_registry(&registry);
        assert_eq!(attrs.len(), 3, "an entry without a name is skipped");
        assert_eq!(attrs[0].allowable_values, ["Enabled", "Disabled"]);
        assert_eq!(
            (attrs[1].lower_bound, attrs[1].upper_bound),
            (Some(1), Some(64))
        );
        assert!(attrs[2].read_only);
        assert_eq!(attrs[2].max_length, Some(16));
    }
}
