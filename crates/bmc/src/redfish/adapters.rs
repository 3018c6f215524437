//! Network adapters over Redfish: the ones in the system's chassis (`Links.Chassis`, then its
//! `NetworkAdapters`), each with its controllers' `FirmwarePackageVersion`. Ironic's redfish
//! firmware interface reads the same resources and names each adapter's firmware
//! `nic:<adapter Id>`; an update of that component targets the adapter's resource.

use std::collections::BTreeMap;

use serde_json::Value;

use super::client::RedfishBmc;
use crate::error::BmcError;

/// Adapters read per chassis, bounded as everything a BMC sends: more than any server has.
const MAX_ADAPTERS: usize = 32;

impl RedfishBmc {
    /// The system's network adapters: (Id, resource path, firmware version if reported).
    /// A system that links no chassis, or a chassis without adapters, has none.
    async fn network_adapters(
        &self,
        system: &Value,
    ) -> Result<Vec<(String, String, Option<String>)>, BmcError> {
        let Some(chassis) = system["Links"]["Chassis"]
            .as_array()
            .and_then(|c| c.first())
            .and_then(|c| c["@odata.id"].as_str())
        else {
            return Ok(Vec::new());
        };
        let chassis = self.transport.get(chassis).await?;
        let Some(collection) = chassis["NetworkAdapters"]["@odata.id"].as_str() else {
            return Ok(Vec::new());
        };
        let collection = self.transport.get(collection).await?;
        let mut out = Vec::new();
        for member in collection["Members"]
            .as_array()
            .into_iter()
            .flatten()
            .take(MAX_ADAPTERS)
        {
            let Some(path) = member["@odata.id"].as_str() else {
                continue;
            };
            let doc = self.transport.get(path).await?;
            let Some(id) = doc["Id"].as_str().filter(|id| !id.is_empty()) else {
                continue;
            };
            let version = doc["Controllers"]
                .as_array()
                .into_iter()
                .flatten()
                .find_map(|c| c["FirmwarePackageVersion"].as_str())
                .filter(|v| !v.is_empty())
                .map(String::from);
            out.push((id.to_string(), path.to_string(), version));
        }
        Ok(out)
    }

    /// Firmware versions of the system's network adapters, by adapter Id. Read as Ironic
    /// does: a chassis that cannot be read means no NIC versions, not a failed read (the
    /// BIOS and BMC versions still count).
    pub(super) async fn nic_versions(&self, system: &Value) -> BTreeMap<String, String> {
        match self.network_adapters(system).await {
            Ok(adapters) => adapters
                .into_iter()
                .filter_map(|(id, _, version)| Some((id, version?)))
                .collect(),
            Err(e) => {
                tracing::debug!(bmc = %self.transport.endpoint, error = %e, "network adapters not read");
                BTreeMap::new()
            }
        }
    }

    /// The resource an update of adapter `id`'s firmware targets.
    pub(super) async fn adapter_path(&self, system: &Value, id: &str) -> Result<String, BmcError> {
        let adapters = self.network_adapters(system).await?;
        adapters
            .into_iter()
            .find(|(adapter, _, _)| adapter == id)
            .map(|(_, path, _)| path)
            .ok_or_else(|| {
                self.unsupported(&format!(
                    "nic:{id} firmware updates (the system's chassis has no network adapter {id})"
                ))
            })
    }
}
