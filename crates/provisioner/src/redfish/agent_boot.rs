//! Work done by the deploy agent: the host boots the agent's ramdisk from virtual media (as a
//! live ISO is booted), the agent does the work, then the backend takes the media out and
//! either boots the written disk (a deploy) or powers the host off (inspection, cleaning).
//!
//! The agent session lives in the agent service, keyed by host; each call here looks at it and
//! moves one step, never waiting on the BMC or the agent.

use std::sync::Arc;

use ferrometal_agent::protocol::{DeploySpec, RootDeviceHints};
use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{AutomatedCleaningMode, HardwareDetails, ImageFormat};
use ferrometal_bmc::{BootDevice, PowerAction, PowerState, Protocol};

use super::RedfishProvisioner;
use super::host_state::{AgentFinish, HostState};
use super::provisioner::unsupported;
use crate::agent::{AgentService, BootData, ConfigDriveData, Ending, Media, Progress, Purpose};
use crate::{Deployment, ErrorKind, HostInfo, PhaseTiming, ProvisionerError, Result, Step};

/// What the agent needs for this deployment, or why it cannot be done.
pub fn deploy_spec(host: &HostInfo, deployment: &Deployment) -> Result<DeploySpec> {
    let Some(image) = &deployment.image else {
        return Err(ProvisionerError::new(
            ErrorKind::InvalidInput,
            "no image to provision",
        ));
    };
    if host.bmc.protocol() == Protocol::Ipmi {
        return Err(unsupported(format!(
            "BMC {} speaks IPMI, which has no virtual media to boot the deploy agent from: use a Redfish BMC or the ironic provisioner",
            host.bmc.authority()
        )));
    }
    let format = match image.format {
        Some(ImageFormat::Raw) => "raw",
        // metal3 leaves the format to be detected; qcow2 is what it is in practice, and the
        // agent says so plainly when the file is not qcow2.
        Some(ImageFormat::Qcow2) | None => "qcow2",
        Some(other) => {
            let name = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            return Err(unsupported(format!(
                "image format {name} cannot be written by the deploy agent (raw, qcow2 or live-iso)"
            ))
            .in_spec(SpecFault::ImageFormatNotSupported));
        }
    };
    if image.url.trim().is_empty() {
        return Err(
            ProvisionerError::new(ErrorKind::InvalidInput, "image.url is empty")
                .in_spec(SpecFault::ImageUrlEmpty),
        );
    }
    let checksum = image.checksum.clone().unwrap_or_default();
    if checksum.trim().is_empty() {
        return Err(ProvisionerError::new(
            ErrorKind::InvalidInput,
            "image.checksum is required for a disk image",
        )
        .in_spec(SpecFault::ImageChecksumMissing));
    }
    let checksum_type = image
        .checksum_type
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| "auto".to_string());
    let hints = host
        .root_device_hints
        .as_ref()
        .and_then(|h| serde_json::to_value(h).ok())
        .and_then(|v| serde_json::from_value::<RootDeviceHints>(v).ok())
        .unwrap_or_default();
    // The same fields on both sides; a failure here is a bug, said as such, never a volume lost.
    let software_raid = deployment
        .software_raid
        .iter()
        .map(|v| serde_json::to_value(v).and_then(serde_json::from_value))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            ProvisionerError::new(
                ErrorKind::Failed,
                format!("spec.raid.softwareRAIDVolumes cannot be handed to the deploy agent: {e}"),
            )
        })?;
    Ok(DeploySpec {
        image_url: image.url.clone(),
        format: format.to_string(),
        checksum,
        checksum_type,
        root_device_hints: hints,
        config_drive_url: None,
        software_raid,
    })
}

/// How often the BMC of a host whose agent is at work is asked whether it is still on.
const AGENT_BMC_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// The finishing steps of this boot (new ones when another boot's are remembered).
fn finish_of<'a>(st: &'a mut HostState, progress: &Progress) -> &'a mut AgentFinish {
    if st
        .agent_finish
        .as_ref()
        .is_none_or(|f| f.boot != progress.boot)
    {
        st.agent_finish = Some(AgentFinish {
            boot: progress.boot.clone(),
            ..AgentFinish::default()
        });
    }
    st.agent_finish.as_mut().expect("set above")
}

/// The ramdisk's addressing from the host's preprovisioning network data (JSON or YAML).
fn ramdisk_network(host: &HostInfo) -> Result<Option<serde_json::Value>> {
    let Some(text) = host.preprovisioning_network_data.as_deref() else {
        return Ok(None);
    };
    match crate::config_drive::structured(text) {
        v @ serde_json::Value::Object(_) => Ok(Some(v)),
        _ => Err(ProvisionerError::new(
            ErrorKind::InvalidInput,
            "spec.preprovisioningNetworkDataName: its networkData is not a network_data.json \
             object (JSON or YAML)",
        )),
    }
}

fn agent_hardware(progress: &Progress) -> Option<HardwareDetails> {
    let hw = progress.hardware.as_ref()?;
    serde_json::to_value(hw)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

impl RedfishProvisioner {
    fn agent(&self) -> Result<&Arc<AgentService>> {
        self.agent.as_ref().ok_or_else(|| {
            ProvisionerError::new(ErrorKind::Unsupported, "no deploy agent configured")
        })
    }

    pub(super) async fn deploy_with_agent(
        &self,
        host: &HostInfo,
        deployment: &Deployment,
    ) -> Result<Step> {
        let agent = self.agent()?;
        let spec = deploy_spec(host, deployment)?;
        let clean = host.automated_cleaning_mode == AutomatedCleaningMode::Metadata;
        let fingerprint = format!(
            "deploy\n{}\n{}\n{}\n{:?}\n{clean}",
            spec.image_url, spec.checksum, spec.format, spec.root_device_hints
        );
        let uuid = if host.provisioner_id.is_empty() {
            &host.key
        } else {
            &host.provisioner_id
        };
        let drive =
            crate::config_drive::configdrive(host, uuid, deployment).map(|v| ConfigDriveData {
                meta_data: v["meta_data"].clone(),
                user_data: v
                    .get("user_data")
                    .and_then(|u| u.as_str())
                    .map(String::from),
                network_data: v.get("network_data").cloned(),
            });
        let purpose = Purpose::Deploy {
            spec: Box::new(spec),
            clean,
        };
        let boot = BootData {
            config_drive: drive,
            network_data: ramdisk_network(host)?,
        };
        let progress = agent.begin(&host.key, &fingerprint, purpose, boot);
        match self.agent_boot(host, agent, &progress, "deploy").await? {
            Step::Done(()) => self.boot_written_disk(host, agent, &progress).await,
            Step::Waiting {
                requeue_after,
                reason,
            } => Ok(Step::Waiting {
                requeue_after,
                reason,
            }),
        }
    }

    /// In-band inspection through the agent; the host ends powered off, as after Ironic's.
    pub(super) async fn inspect_with_agent(
        &self,
        host: &HostInfo,
    ) -> Result<Step<Option<HardwareDetails>>> {
        let agent = self.agent()?;
        let boot = BootData {
            config_drive: None,
            network_data: ramdisk_network(host)?,
        };
        let progress = agent.begin(&host.key, "inspect", Purpose::Inspect, boot);
        if let Step::Waiting {
            requeue_after,
            reason,
        } = self
            .agent_boot(host, agent, &progress, "inspection")
            .await?
        {
            return Ok(Step::waiting(requeue_after, reason));
        }
        match self.power_off_after_agent(host, agent, &progress).await? {
            Step::Done(()) => Ok(Step::Done(agent_hardware(&progress))),
            Step::Waiting {
                requeue_after,
                reason,
            } => Ok(Step::waiting(requeue_after, reason)),
        }
    }

    /// Metadata cleaning through the agent (deprovisioning); the host ends powered off.
    pub(super) async fn clean_with_agent(&self, host: &HostInfo) -> Result<Step> {
        let agent = self.agent()?;
        let boot = BootData {
            config_drive: None,
            network_data: ramdisk_network(host)?,
        };
        let progress = agent.begin(&host.key, "clean", Purpose::Clean, boot);
        match self.agent_boot(host, agent, &progress, "cleaning").await? {
            Step::Done(()) => self.power_off_after_agent(host, agent, &progress).await,
            waiting => Ok(waiting),
        }
    }

    /// Deprovisioning cleans disk metadata through the agent when metal3 asks for it
    /// (`automatedCleaningMode: metadata`, the default) and power may be switched.
    pub(super) fn cleans_with_agent(&self, host: &HostInfo) -> bool {
        self.agent.is_some()
            && host.automated_cleaning_mode == AutomatedCleaningMode::Metadata
            && host.bmc.protocol() == Protocol::Redfish
            && !host.disable_power_off
    }

    /// A live ISO's media out first (the agent's own are its session's), then cleaning.
    pub(super) async fn deprovision_with_agent(&self, host: &HostInfo) -> Result<Step> {
        let agent = self.agent()?;
        if agent.progress(&host.key).is_none() {
            let (mut st, bmc) = self.session(host).await?;
            st.deploy = None;
            if bmc.media_status().await?.inserted {
                bmc.eject_media().await?;
                return self.step_waiting("virtual media ejected");
            }
        }
        self.clean_with_agent(host).await
    }

    /// Boots the session's media and waits for the agent to end its work: Done when it
    /// succeeded, an error with the agent's words when it failed or fell silent.
    async fn agent_boot(
        &self,
        host: &HostInfo,
        agent: &AgentService,
        progress: &Progress,
        work: &str,
    ) -> Result<Step> {
        if progress.ending == Some(Ending::Succeeded) {
            return Ok(Step::Done(()));
        }
        let url = match &progress.media {
            Media::Building => {
                return self.step_waiting("building the deploy agent's boot media");
            }
            Media::Failed(e) => {
                agent.end(&host.key);
                return Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("building the deploy agent's boot media: {e}"),
                ));
            }
            Media::Ready(url) => url,
        };
        match &progress.ending {
            // The host was seen running the agent's media: the BMC is asked again only now and
            // then (a power loss boots the ramdisk again), not at every look at the agent.
            None if !self.bmc_check_due(host, &progress.boot).await => Ok(Step::waiting(
                self.options.poll_interval,
                if progress.called {
                    format!("the deploy agent is at work ({work})")
                } else {
                    "booting the deploy agent".to_string()
                },
            )),
            None => match self.boot_media(host, url).await? {
                Step::Done(()) => {
                    self.lock(&host.key).await.agent_checked =
                        Some((progress.boot.clone(), std::time::Instant::now()));
                    Ok(Step::waiting(
                        self.options.poll_interval,
                        if progress.called {
                            format!("the deploy agent is at work ({work})")
                        } else {
                            "booting the deploy agent".to_string()
                        },
                    ))
                }
                waiting => Ok(waiting),
            },
            Some(Ending::Failed(message)) => {
                agent.end(&host.key);
                let mut st = self.lock(&host.key).await;
                st.deploy = None;
                st.agent_finish = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("{work} by the deploy agent failed: {message}"),
                ))
            }
            Some(Ending::Succeeded) => Ok(Step::Done(())), // answered above
        }
    }

    /// Whether to ask the BMC about a boot into the agent: until it was seen running the
    /// media, at every call; after that every `AGENT_BMC_CHECK`.
    async fn bmc_check_due(&self, host: &HostInfo, boot: &str) -> bool {
        let st = self.lock(&host.key).await;
        match &st.agent_checked {
            Some((b, at)) if b == boot => at.elapsed() >= AGENT_BMC_CHECK,
            _ => true,
        }
    }

    /// After a deploy: media out, the disk as the boot device, a restart into it.
    async fn boot_written_disk(
        &self,
        host: &HostInfo,
        agent: &AgentService,
        progress: &Progress,
    ) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        let finish = finish_of(st, progress);
        if let Some(step) = self.eject_once(finish, &*bmc).await? {
            return Ok(step);
        }
        if !finish.boot_set {
            let mut boot = Self::boot_override(host, BootDevice::Hdd);
            boot.once = false;
            bmc.set_boot(boot).await?;
            finish.boot_set = true;
            return self.step_waiting("boot device set to the disk");
        }
        if !finish.restarted {
            finish.restarted = true;
            finish.restarted_at = Some(std::time::Instant::now());
            self.issue(st, &*bmc, PowerAction::ForceRestart).await?;
            return self.waiting_power("restarted into the written disk".into());
        }
        let restarted_at = finish.restarted_at;
        let power = self.observe_power(st, &*bmc).await?;
        if power != PowerState::On {
            return self.waiting_power("waiting for the host to come back on".into());
        }
        let reboot = restarted_at.map(|t| t.elapsed().as_secs_f64());
        self.record_phases(&host.key, progress, reboot);
        st.in_flight = None;
        st.deploy = None;
        st.agent_finish = None;
        agent.end(&host.key);
        Ok(Step::Done(()))
    }

    /// After inspection or cleaning: media out, power off.
    async fn power_off_after_agent(
        &self,
        host: &HostInfo,
        agent: &AgentService,
        progress: &Progress,
    ) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        let finish = finish_of(st, progress);
        if let Some(step) = self.eject_once(finish, &*bmc).await? {
            return Ok(step);
        }
        let step = self.drive_power(st, &*bmc, PowerAction::ForceOff).await?;
        if step.is_done() {
            self.record_phases(&host.key, progress, None);
            st.deploy = None;
            st.agent_finish = None;
            agent.end(&host.key);
        }
        Ok(step)
    }

    /// The agent's media out, once per finished session: the step taken, or `None` when that
    /// was done already.
    async fn eject_once(
        &self,
        finish: &mut AgentFinish,
        bmc: &dyn ferrometal_bmc::Bmc,
    ) -> Result<Option<Step>> {
        if finish.ejected {
            return Ok(None);
        }
        if bmc.media_status().await?.inserted {
            bmc.eject_media().await?;
        }
        finish.ejected = true;
        self.step_waiting("the deploy agent's media ejected")
            .map(Some)
    }

    /// Keeps a finished boot's phases for `take_phase_timings`.
    fn record_phases(&self, key: &str, progress: &Progress, reboot: Option<f64>) {
        let mut phases: Vec<PhaseTiming> = progress
            .timings
            .iter()
            .map(|(phase, seconds)| PhaseTiming {
                phase: phase.clone(),
                seconds: *seconds,
                note: (phase == "download+write")
                    .then(|| progress.write_mb_per_s.map(|r| format!("{r:.1} MB/s")))
                    .flatten(),
            })
            .collect();
        if let Some(seconds) = reboot {
            phases.push(PhaseTiming {
                phase: "rebootToPowerOn".to_string(),
                seconds,
                note: None,
            });
        }
        self.phases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string(), phases);
    }
}

#[cfg(test)]
mod tests {
    use ferrometal_agent::protocol::{
        Bios, Cpu, Disk, DiskType, Firmware, Hardware, Nic, SystemVendor, Vlan,
    };

    use super::*;

    /// The agent's report, field for field, is metal3's `HardwareDetails` once it reaches the
    /// server: nothing renamed, nothing lost.
    #[test]
    fn the_agents_hardware_reads_as_metal3s() {
        let hw = Hardware {
            system_vendor: Some(SystemVendor {
                manufacturer: Some("QEMU".into()),
                product_name: Some("Standard PC".into()),
                serial_number: Some("S1".into()),
            }),
            firmware: Some(Firmware {
                bios: Some(Bios {
                    date: Some("04/01/2014".into()),
                    vendor: Some("EFI Development Kit II".into()),
                    version: Some("0.0.0".into()),
                }),
            }),
            ram_mebibytes: 1024,
            nics: vec![Nic {
                name: "enp1s0".into(),
                model: Some("0x1af4 0x1041".into()),
                mac: "52:54:00:00:00:01".into(),
                ip: Some("10.0.2.15".into()),
                speed_gbps: 1,
                vlans: vec![Vlan {
                    id: Some(100),
                    name: Some("enp1s0.100".into()),
                }],
                vlan_id: None,
                pxe: false,
                pci_address: Some("0000:01:00.0".into()),
            }],
            storage: vec![Disk {
                name: "/dev/sda".into(),
                alternate_names: vec!["/dev/disk/by-path/pci-0000:00:1f.2-ata-1".into()],
                rotational: true,
                type_: Some(DiskType::Hdd),
                size_bytes: 5 << 30,
                vendor: Some("ATA".into()),
                model: Some("QEMU HARDDISK".into()),
                serial_number: Some("QM00001".into()),
                wwn: Some("0x5000c500a1b2c3d4".into()),
                wwn_vendor_extension: None,
                wwn_with_extension: Some("0x5000c500a1b2c3d4".into()),
                hctl: Some("0:0:0:0".into()),
            }],
            cpu: Some(Cpu {
                arch: "x86_64".into(),
                model: "QEMU Virtual CPU".into(),
                clock_megahertz: 2600.0,
                flags: vec!["sse2".into()],
                count: 2,
            }),
            hostname: Some("node-0".into()),
        };
        let progress = Progress {
            boot: "b".into(),
            media: Media::Building,
            called: true,
            ending: Some(Ending::Succeeded),
            hardware: Some(hw.clone()),
            timings: Vec::new(),
            write_mb_per_s: None,
            root_disk: None,
        };
        let details = agent_hardware(&progress).expect("metal3 reads it");
        assert_eq!(
            serde_json::to_value(&details).unwrap(),
            serde_json::to_value(&hw).unwrap()
        );
        assert_eq!(details.storage[0].hctl.as_deref(), Some("0:0:0:0"));
        assert_eq!(details.nics[0].vlans[0].id, Some(100));
    }
}
