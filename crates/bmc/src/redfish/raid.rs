//! Hardware RAID over Redfish: the volumes of the system's first storage controller that has a
//! `Volumes` collection, created with a POST (RAID type, drives, capacity) and deleted with a
//! DELETE, as Ironic's redfish RAID interface builds them.

use reqwest::Method;
use serde_json::{Value, json};

use super::client::RedfishBmc;
use crate::error::BmcError;
use crate::types::{RaidVolume, VolumeRequest};

impl RedfishBmc {
    /// The storage controller's path and document.
    async fn raid_controller(&self) -> Result<(String, Value), BmcError> {
        let system = self.get_system().await?;
        let mut warnings = Vec::new();
        for controller in self
            .members(&system["Storage"], &mut warnings, "storage")
            .await
        {
            if let (Some(path), Some(_)) = (
                controller["@odata.id"].as_str(),
                controller["Volumes"]["@odata.id"].as_str(),
            ) {
                return Ok((path.to_string(), controller));
            }
        }
        Err(self.unsupported("hardware RAID (no storage controller with volumes)"))
    }

    pub(super) async fn read_volumes(&self) -> Result<Vec<RaidVolume>, BmcError> {
        let (_, controller) = self.raid_controller().await?;
        let mut warnings = Vec::new();
        let volumes = self
            .members(&controller["Volumes"], &mut warnings, "volumes")
            .await;
        Ok(volumes
            .iter()
            .filter_map(|v| {
                Some(RaidVolume {
                    path: v["@odata.id"].as_str()?.to_string(),
                    name: v["Name"].as_str().unwrap_or_default().to_string(),
                    raid_type: v["RAIDType"].as_str().unwrap_or_default().to_string(),
                    capacity_bytes: v["CapacityBytes"].as_u64(),
                    drives: v["Links"]["Drives"]
                        .as_array()
                        .map(|d| {
                            d.iter()
                                .filter_map(|d| d["@odata.id"].as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Drive paths of the controller, for volumes that name their disks.
    pub(super) async fn raid_drives(&self) -> Result<Vec<String>, BmcError> {
        let (_, controller) = self.raid_controller().await?;
        Ok(controller["Drives"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|d| d["@odata.id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default())
    }

    pub(super) async fn post_volume(&self, request: &VolumeRequest) -> Result<(), BmcError> {
        let (_, controller) = self.raid_controller().await?;
        let collection = controller["Volumes"]["@odata.id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut body = json!({"RAIDType": request.raid_type, "Name": request.name});
        if let Some(bytes) = request.capacity_bytes {
            body["CapacityBytes"] = json!(bytes);
        }
        if !request.drives.is_empty() {
            let drives: Vec<Value> = request
                .drives
                .iter()
                .map(|d| json!({"@odata.id": d}))
                .collect();
            body["Links"] = json!({"Drives": drives});
        }
        self.transport
            .request(Method::POST, &collection, Some(&body), None)
            .await?;
        Ok(())
    }

    pub(super) async fn remove_volume(&self, path: &str) -> Result<(), BmcError> {
        self.transport
            .request(Method::DELETE, path, None, None)
            .await?;
        Ok(())
    }
}
