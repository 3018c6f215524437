//! The [`Bmc`] trait over Redfish: power, boot override, virtual media, Secure Boot and the
//! out-of-band inventory, each on top of what the client learned about the BMC.

use reqwest::Method;
use serde_json::json;

use super::client::{MAX_MEMBERS, RedfishBmc};
use super::parse::{choose_reset_type, disk_of, excerpt, identity_of, link, str_of, u64_of};
use crate::{
    Bios, Bmc, BmcError, BootDevice, BootMode, BootOverride, Cpu, Inventory, MediaStatus,
    MemoryModule, Nic, PowerAction, PowerState, SystemIdentity,
};

/// Most inventory warnings kept.
const MAX_WARNINGS: usize = 32;

#[async_trait::async_trait]
impl Bmc for RedfishBmc {
    fn endpoint(&self) -> &str {
        &self.transport.endpoint
    }

    async fn power_state(&self) -> Result<PowerState, BmcError> {
        Ok(power_of(&self.get_system().await?))
    }

    async fn power(&self, action: PowerAction) -> Result<(), BmcError> {
        let (target, allowed) = self.reset_info().await?;
        let reset_type = choose_reset_type(action, allowed.as_deref()).ok_or_else(|| {
            self.unsupported(&format!(
                "power action {} (allowed reset types: {})",
                action.as_str(),
                allowed.unwrap_or_default().join(", ")
            ))
        })?;
        self.transport
            .request(
                Method::POST,
                &target,
                Some(&json!({"ResetType": reset_type})),
                None,
            )
            .await?;
        Ok(())
    }

    async fn set_boot(&self, boot: BootOverride) -> Result<(), BmcError> {
        let path = self.system_path().await?;
        if !self.learned().system_read {
            self.get_system().await?;
        }
        let target = boot.device.redfish_name();
        let allowed = self.learned().boot_targets_allowed.clone();
        if let Some(allowed) = allowed.filter(|a| !a.iter().any(|a| a == target)) {
            return Err(self.unsupported(&format!(
                "boot device {target} (allowed: {})",
                allowed.join(", ")
            )));
        }
        let mut settings = json!({
            "BootSourceOverrideTarget": target,
            "BootSourceOverrideEnabled": if boot.once { "Once" } else { "Continuous" },
        });
        // The mode only where the BMC reports one and it differs, as Ironic does: a BMC that
        // reports none (a legacy-BIOS libvirt domain behind sushy-tools) refuses a PATCH naming it.
        let wanted = boot.mode.map(|mode| match mode {
            BootMode::Uefi => "UEFI",
            BootMode::Legacy => "Legacy",
        });
        let reported = self.learned().boot_mode.clone();
        if let (Some(wanted), Some(reported)) = (wanted, reported.as_deref())
            && wanted != reported
        {
            settings["BootSourceOverrideMode"] = json!(wanted);
        }
        let body = json!({ "Boot": settings });
        self.patch_system(&path, &body).await?;
        if let (Some(wanted), Some(_)) = (wanted, reported) {
            self.learned().boot_mode = Some(wanted.to_string());
        }
        Ok(())
    }

    async fn insert_media(&self, image_url: &str) -> Result<(), BmcError> {
        let slot = self.virtual_media_slot().await?;
        let current = self.transport.get(&slot.path).await?;
        if current["Inserted"].as_bool() == Some(true) {
            let failed_before = self.learned().failed_insert.as_deref() == Some(image_url);
            if current["Image"].as_str() == Some(image_url) && !failed_before {
                return Ok(());
            }
            // Most BMCs refuse to insert over a mounted image.
            self.transport
                .request(Method::POST, &slot.eject_target, Some(&json!({})), None)
                .await?;
        }
        let body = json!({"Image": image_url, "Inserted": true, "WriteProtected": true});
        match self
            .transport
            .request(Method::POST, &slot.insert_target, Some(&body), None)
            .await
        {
            Ok(_) => {
                self.learned().failed_insert = None;
                Ok(())
            }
            Err(err) => {
                // A refused insert can leave the image recorded as inserted (sushy-tools' libvirt
                // driver does): eject it, best effort, so that nobody reading the BMC later,
                // this client or another, takes it for mounted.
                self.learned().failed_insert = Some(image_url.to_string());
                let _ = self
                    .transport
                    .request(Method::POST, &slot.eject_target, Some(&json!({})), None)
                    .await;
                Err(err)
            }
        }
    }

    async fn eject_media(&self) -> Result<(), BmcError> {
        let slot = self.virtual_media_slot().await?;
        let current = self.transport.get(&slot.path).await?;
        if current["Inserted"].as_bool() == Some(false) {
            return Ok(());
        }
        self.transport
            .request(Method::POST, &slot.eject_target, Some(&json!({})), None)
            .await?;
        Ok(())
    }

    async fn media_status(&self) -> Result<MediaStatus, BmcError> {
        let slot = self.virtual_media_slot().await?;
        let current = self.transport.get(&slot.path).await?;
        let image = current["Image"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from);
        Ok(MediaStatus {
            inserted: current["Inserted"].as_bool().unwrap_or(image.is_some()),
            image,
        })
    }

    async fn identity(&self) -> Result<SystemIdentity, BmcError> {
        Ok(identity_of(&self.get_system().await?))
    }

    async fn boot_override(&self) -> Result<Option<BootOverride>, BmcError> {
        Ok(boot_override_of(&self.get_system().await?))
    }

    async fn power_and_boot(&self) -> Result<(PowerState, Option<BootOverride>), BmcError> {
        let system = self.get_system().await?;
        Ok((power_of(&system), boot_override_of(&system)))
    }

    async fn clear_boot(&self) -> Result<(), BmcError> {
        let path = self.system_path().await?;
        let body = json!({"Boot": {"BootSourceOverrideEnabled": "Disabled"}});
        self.transport
            .request(Method::PATCH, &path, Some(&body), None)
            .await?;
        self.learned().etag = None;
        Ok(())
    }

    async fn secure_boot(&self) -> Result<bool, BmcError> {
        let path = self.secure_boot_path().await?;
        let body = self.transport.get(&path).await?;
        body["SecureBootEnable"]
            .as_bool()
            .ok_or_else(|| BmcError::Protocol {
                bmc: self.transport.endpoint.clone(),
                operation: format!("GET {path}"),
                reason: "SecureBootEnable is missing or not a boolean".into(),
            })
    }

    async fn set_secure_boot(&self, enable: bool) -> Result<(), BmcError> {
        let path = self.secure_boot_path().await?;
        self.transport
            .request(
                Method::PATCH,
                &path,
                Some(&json!({ "SecureBootEnable": enable })),
                None,
            )
            .await?;
        Ok(())
    }

    async fn bios(&self) -> Result<Bios, BmcError> {
        self.read_bios().await
    }

    async fn set_bios(
        &self,
        changes: &std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<(), BmcError> {
        self.stage_bios(changes).await
    }

    async fn firmware_versions(&self) -> Result<crate::FirmwareVersions, BmcError> {
        self.read_firmware_versions().await
    }

    async fn start_update(
        &self,
        component: crate::FirmwareComponent,
        image: &str,
    ) -> Result<String, BmcError> {
        self.simple_update(component, image).await
    }

    async fn update_state(&self, task: &str) -> Result<crate::UpdateState, BmcError> {
        self.read_task(task).await
    }

    async fn volumes(&self) -> Result<Vec<crate::RaidVolume>, BmcError> {
        self.read_volumes().await
    }

    async fn drives(&self) -> Result<Vec<String>, BmcError> {
        self.raid_drives().await
    }

    async fn create_volume(&self, request: &crate::VolumeRequest) -> Result<(), BmcError> {
        self.post_volume(request).await
    }

    async fn delete_volume(&self, path: &str) -> Result<(), BmcError> {
        self.remove_volume(path).await
    }

    async fn subscriptions(&self) -> Result<Vec<crate::EventSubscription>, BmcError> {
        self.list_subscriptions().await
    }

    async fn subscribe(
        &self,
        destination: &str,
        context: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<crate::EventSubscription, BmcError> {
        self.create_subscription(destination, context, headers)
            .await
    }

    async fn unsubscribe(&self, path: &str) -> Result<(), BmcError> {
        self.remove_subscription(path).await
    }

    async fn inventory(&self) -> Result<Inventory, BmcError> {
        let system = if self.expand_supported().await {
            let path = self.system_path().await?;
            let answer = self
                .transport
                .request(
                    Method::GET,
                    &format!("{path}?$expand=.($levels=2)"),
                    None,
                    None,
                )
                .await?;
            self.learn_system(&answer.body, &answer.headers);
            answer.body
        } else {
            self.get_system().await?
        };
        let mut inv = Inventory {
            identity: identity_of(&system),
            ..Inventory::default()
        };
        let mut warnings = Vec::new();
        if system.get("Processors").is_some() {
            for p in self
                .members(&system["Processors"], &mut warnings, "processors")
                .await
            {
                if p["Status"]["State"].as_str() == Some("Absent") {
                    continue;
                }
                inv.cpus.push(Cpu {
                    model: str_of(&p["Model"]),
                    architecture: p["ProcessorArchitecture"]
                        .as_str()
                        .or(p["InstructionSet"].as_str())
                        .unwrap_or_default()
                        .to_string(),
                    cores: u64_of(&p["TotalCores"]) as u32,
                    threads: u64_of(&p["TotalThreads"]) as u32,
                    speed_mhz: u64_of(&p["MaxSpeedMHz"]) as u32,
                });
            }
        } else {
            warnings.push("processors: the BMC reports none".into());
        }
        if system.get("Memory").is_some() {
            for m in self
                .members(&system["Memory"], &mut warnings, "memory")
                .await
            {
                if m["Status"]["State"].as_str() == Some("Absent") {
                    continue;
                }
                inv.memory.push(MemoryModule {
                    name: m["Id"]
                        .as_str()
                        .or(m["Name"].as_str())
                        .unwrap_or_default()
                        .into(),
                    capacity_mib: u64_of(&m["CapacityMiB"]),
                    kind: str_of(&m["MemoryDeviceType"]),
                    speed_mhz: u64_of(&m["OperatingSpeedMhz"]) as u32,
                });
            }
        }
        if inv.memory.is_empty() {
            // Whole GiB at best, and absent below 1 GiB on some BMCs: still better than nothing.
            match system["MemorySummary"]["TotalSystemMemoryGiB"].as_f64() {
                Some(gib) if gib > 0.0 => {
                    inv.memory_summary_mib = Some((gib * 1024.0).round() as u64);
                }
                _ => warnings.push("memory: the BMC reports no modules and no total".into()),
            }
        }
        if system.get("EthernetInterfaces").is_some() {
            for n in self
                .members(
                    &system["EthernetInterfaces"],
                    &mut warnings,
                    "ethernet interfaces",
                )
                .await
            {
                let mac = n["MACAddress"]
                    .as_str()
                    .or(n["PermanentMACAddress"].as_str())
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                inv.nics.push(Nic {
                    name: n["Id"]
                        .as_str()
                        .or(n["Name"].as_str())
                        .unwrap_or_default()
                        .into(),
                    mac,
                    speed_mbps: u64_of(&n["SpeedMbps"]),
                    link_up: n["LinkStatus"].as_str().map(|s| s == "LinkUp"),
                });
            }
        } else {
            warnings.push("ethernet interfaces: the BMC reports none".into());
        }
        if system.get("Storage").is_some() {
            for s in self
                .members(&system["Storage"], &mut warnings, "storage")
                .await
            {
                let drives = s["Drives"].as_array().map_or(&[][..], Vec::as_slice);
                if drives.len() > MAX_MEMBERS {
                    warnings.push(format!(
                        "drives: the BMC lists {}; the first {MAX_MEMBERS} were read",
                        drives.len()
                    ));
                }
                for drive in drives.iter().take(MAX_MEMBERS) {
                    let d = if drive.as_object().is_some_and(|d| d.len() > 1) {
                        drive.clone()
                    } else if let Some(path) = link(drive) {
                        match self.transport.get(&path).await {
                            Ok(d) => d,
                            Err(e) => {
                                warnings.push(format!("drive {path}: {e}"));
                                continue;
                            }
                        }
                    } else {
                        continue;
                    };
                    inv.disks.push(disk_of(&d));
                }
            }
        }
        // Storage may be there yet fail (sushy-tools' libvirt driver answers 500): SimpleStorage
        // then lists the disks, as Ironic falls back to it.
        if inv.disks.is_empty() && system.get("SimpleStorage").is_some() {
            for s in self
                .members(&system["SimpleStorage"], &mut warnings, "simple storage")
                .await
            {
                for d in s["Devices"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(MAX_MEMBERS)
                {
                    inv.disks.push(disk_of(d));
                }
            }
        }
        let dropped = warnings.len().saturating_sub(MAX_WARNINGS);
        warnings.truncate(MAX_WARNINGS);
        if dropped > 0 {
            warnings.push(format!("{dropped} more warnings not kept"));
        }
        inv.warnings = warnings
            .into_iter()
            .map(|w| excerpt(&self.transport.scrub(&w)))
            .collect();
        Ok(inv)
    }

    async fn logout(&self) -> Result<(), BmcError> {
        self.transport.logout().await
    }
}

/// The power state a ComputerSystem reports.
fn power_of(system: &serde_json::Value) -> PowerState {
    PowerState::parse_lenient(system["PowerState"].as_str().unwrap_or_default())
}

/// The boot override a ComputerSystem reports (`None`: none, or a target we never set).
fn boot_override_of(system: &serde_json::Value) -> Option<BootOverride> {
    let boot = &system["Boot"];
    let enabled = boot["BootSourceOverrideEnabled"]
        .as_str()
        .unwrap_or("Disabled");
    let target = boot["BootSourceOverrideTarget"].as_str().unwrap_or("None");
    if enabled == "Disabled" {
        return None;
    }
    let device = match target {
        "Pxe" => BootDevice::Pxe,
        "Hdd" => BootDevice::Hdd,
        "Cd" => BootDevice::Cd,
        "BiosSetup" => BootDevice::BiosSetup,
        "UefiHttp" => BootDevice::UefiHttp,
        // "None" and targets we never set: nothing of ours to put back.
        _ => return None,
    };
    let mode = match boot["BootSourceOverrideMode"].as_str() {
        Some("UEFI") => Some(BootMode::Uefi),
        Some("Legacy") => Some(BootMode::Legacy),
        _ => None,
    };
    Some(BootOverride {
        device,
        once: enabled == "Once",
        mode,
    })
}
