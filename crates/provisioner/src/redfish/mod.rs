//! The `redfish` backend: direct BMC control, no Ironic.
//!
//! Registration proves access with one power read, inspection reads the BMC's out-of-band
//! inventory, and provisioning boots a `live-iso` image from virtual media. Every call observes
//! the BMC first and issues at most one action, so calling again (after a requeue or a process
//! restart) continues where the BMC says things are instead of repeating work.
//!
//! Per host (keyed by `HostInfo::key`) the backend keeps one BMC client, so what the client
//! learned (reset target, ETag, virtual-media slot, `$expand` support) is reused, plus the one
//! power action in flight and the progress of a deployment. All of it is in memory: after a
//! restart the BMC's own state is the record.
//!
//! With the deploy agent (`with_agent`), disk images are written, inspection is in-band and
//! deprovisioning cleans disk metadata: the host boots the agent's ramdisk from virtual media.
//!
//! `provisioner` holds the backend with its per-host locks and clients, `host_state` what it
//! remembers per host, `power` how it drives power, `image` what it can deploy, `boot_media`
//! how an ISO is booted, `agent_boot` the work done through the agent, `settings` how BIOS
//! settings are applied, `updates` how firmware is flashed, `raid` how RAID volumes are
//! built, `hardware` how an inventory becomes `status.hardware`; this file implements the
//! trait with them.

mod agent_boot;
mod boot_media;
mod hardware;
mod host_state;
mod image;
mod options;
mod power;
mod provisioner;
mod raid;
mod settings;
mod updates;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{HardwareDetails, InspectionMode};
use ferrometal_bmc::{
    BmcError, BootDevice, BootMode, BootOverride, PowerAction, PowerState, Protocol,
};

pub use hardware::hardware_details;
pub use image::live_iso_url;
pub use options::RedfishOptions;
use power::power_action_of;
pub use provisioner::RedfishProvisioner;
use provisioner::unsupported;

use crate::{
    Deployment, FirmwareChanges, HostInfo, PowerOffMode, Provisioner, Registration, Result, Step,
};

#[async_trait::async_trait]
impl Provisioner for RedfishProvisioner {
    fn name(&self) -> &'static str {
        "redfish"
    }

    fn talks_to_bmcs(&self) -> bool {
        true
    }

    async fn has_capacity(&self, busy: usize) -> bool {
        busy < self.options.max_busy
    }

    async fn register(
        &self,
        host: &HostInfo,
        credentials_changed: bool,
    ) -> Result<Step<Registration>> {
        let mut st = self.lock(&host.key).await;
        let bmc = self.client(&mut st, host, credentials_changed)?;
        let power = self.observe_power(&mut st, &*bmc).await?;
        let provisioner_id = if !host.provisioner_id.is_empty() {
            host.provisioner_id.clone()
        } else if host.bmc.protocol() == Protocol::Redfish {
            // One more GET gives a stable, vendor-assigned ID; fall back to the key.
            match bmc.identity().await {
                Ok(identity) => identity.uuid.unwrap_or_else(|| host.key.clone()),
                Err(e @ BmcError::Unauthorized { .. }) => return Err(e.into()),
                Err(e) => {
                    tracing::debug!(host = %host.key, error = %e, "no system UUID; using the key");
                    host.key.clone()
                }
            }
        } else {
            host.key.clone()
        };
        Ok(Step::Done(Registration {
            provisioner_id,
            power,
        }))
    }

    async fn inspect(
        &self,
        host: &HostInfo,
        _refresh: bool,
    ) -> Result<Step<Option<HardwareDetails>>> {
        if host.inspection_mode == InspectionMode::Disabled {
            return Ok(Step::Done(None));
        }
        if self.agent.is_some()
            && host.inspection_mode == InspectionMode::Agent
            && host.bmc.protocol() == Protocol::Redfish
        {
            return self.inspect_with_agent(host).await;
        }
        if host.bmc.protocol() == Protocol::Ipmi {
            // IPMI has no inventory to read out of band; the host goes on uninspected.
            tracing::info!(host = %host.key, "IPMI BMC: no out-of-band inspection");
            return Ok(Step::Done(None));
        }
        let (_st, bmc) = self.session(host).await?;
        let inventory = bmc.inventory().await?;
        if !inventory.warnings.is_empty() {
            // Why a part is missing (e.g. "processors: the BMC reports none"); the host's
            // InspectionIncomplete condition names the missing parts.
            tracing::info!(host = %host.key, warnings = ?inventory.warnings, "partial inventory");
        }
        let details = hardware_details(&inventory, host.boot_mac_address.as_deref());
        Ok(Step::Done(Some(details)))
    }

    async fn prepare(&self, _host: &HostInfo) -> Result<Step> {
        Ok(Step::Done(()))
    }

    async fn change_firmware(&self, host: &HostInfo, changes: &FirmwareChanges) -> Result<Step> {
        if !changes.settings.is_empty() {
            match self.apply_settings(host, changes).await? {
                Step::Done(()) => {}
                waiting => return Ok(waiting),
            }
        }
        if !changes.updates.is_empty() {
            return self.apply_updates(host, &changes.updates).await;
        }
        Ok(Step::Done(()))
    }

    async fn configure_raid(
        &self,
        host: &HostInfo,
        volumes: &[ferrometal_api::HardwareRaidVolume],
    ) -> Result<Step> {
        self.build_raid(host, volumes).await
    }

    async fn provision(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        if self.agent.is_some()
            && deployment
                .image
                .as_ref()
                .is_some_and(|image| !image.is_live_iso())
        {
            return self.deploy_with_agent(host, deployment).await;
        }
        let url = live_iso_url(host, deployment)?;
        self.boot_media(host, url).await
    }

    fn take_phase_timings(&self, host_key: &str) -> Vec<crate::PhaseTiming> {
        self.phases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(host_key)
            .unwrap_or_default()
    }

    fn boots_agent(&self) -> bool {
        self.agent.is_some()
    }

    fn builds_software_raid(&self) -> bool {
        self.agent.is_some()
    }

    fn agent_boot_media(&self, host_key: &str) -> Option<crate::BootMedia> {
        let progress = self.agent.as_ref()?.progress(host_key)?;
        Some(match progress.media {
            crate::agent::Media::Building => crate::BootMedia::Building,
            // A deploy resumed from its record boots no media.
            crate::agent::Media::Ready(url) if url.is_empty() => return None,
            crate::agent::Media::Ready(url) => crate::BootMedia::Ready(url),
            crate::agent::Media::Failed(why) => crate::BootMedia::Failed(why),
        })
    }

    async fn deprovision(&self, host: &HostInfo) -> Result<Step> {
        if let Some(agent) = &self.agent {
            agent.forget_deploy(&host.key);
        }
        if self.cleans_with_agent(host) {
            return self.deprovision_with_agent(host).await;
        }
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        st.deploy = None;
        if host.bmc.protocol() == Protocol::Redfish {
            match bmc.media_status().await {
                Ok(media) if media.inserted => {
                    bmc.eject_media().await?;
                    return self.step_waiting("virtual media ejected");
                }
                Ok(_) => {}
                // A BMC without virtual media never had our image mounted.
                Err(BmcError::Unsupported { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            if host.boot_mode == Some(ferrometal_api::BootMode::UefiSecureBoot) {
                // As Ironic: secure boot turned on for the image is turned off with it.
                match bmc.secure_boot().await {
                    Ok(true) => {
                        bmc.set_secure_boot(false).await?;
                        return self.step_waiting("UEFI Secure Boot disabled");
                    }
                    Ok(false) | Err(BmcError::Unsupported { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        if host.disable_power_off {
            // Power must stay on: a restart takes the host out of the image instead.
            if !st.teardown_restarted {
                self.issue(st, &*bmc, PowerAction::ForceRestart).await?;
                st.teardown_restarted = true;
            }
            return Ok(Step::Done(()));
        }
        let step = self.drive_power(st, &*bmc, PowerAction::ForceOff).await?;
        if step.is_done() {
            st.teardown_restarted = false;
        }
        Ok(step)
    }

    async fn adopt(&self, host: &HostInfo, _deployment: &Deployment) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        self.observe_power(&mut st, &*bmc).await?;
        Ok(Step::Done(()))
    }

    async fn power_state(&self, host: &HostInfo) -> Result<PowerState> {
        let (mut st, bmc) = self.session(host).await?;
        self.observe_power(&mut st, &*bmc).await
    }

    async fn power_on(&self, host: &HostInfo) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        self.drive_power(&mut st, &*bmc, PowerAction::On).await
    }

    async fn power_off(&self, host: &HostInfo, mode: PowerOffMode) -> Result<Step> {
        if host.disable_power_off {
            return Err(unsupported(format!(
                "host {} has disablePowerOff set: its power is never switched off",
                host.key
            )));
        }
        let (mut st, bmc) = self.session(host).await?;
        let action = match mode {
            PowerOffMode::Soft => PowerAction::GracefulShutdown,
            PowerOffMode::Hard => PowerAction::ForceOff,
        };
        self.drive_power(&mut st, &*bmc, action).await
    }

    async fn operation(&self, host: &HostInfo, op: Operation) -> Result<Step> {
        let action = power_action_of(op);
        if host.disable_power_off && action.is_some_and(|a| a.target_state() == PowerState::Off) {
            return Err(unsupported(format!(
                "host {} has disablePowerOff set: {} would switch it off",
                host.key,
                op.as_str()
            )));
        }
        let (mut st, bmc) = self.session(host).await?;
        match action {
            Some(action) => self.issue(&mut st, &*bmc, action).await?,
            None => {
                bmc.set_boot(Self::boot_override(host, BootDevice::Pxe))
                    .await?
            }
        }
        Ok(Step::Done(()))
    }

    async fn boot_device(
        &self,
        host: &HostInfo,
        device: Option<BootDevice>,
        efi: bool,
    ) -> Result<()> {
        let (_st, bmc) = self.session(host).await?;
        match device {
            Some(device) => {
                bmc.set_boot(ferrometal_bmc::BootOverride {
                    device,
                    once: true,
                    mode: efi.then_some(BootMode::Uefi),
                })
                .await?
            }
            None => bmc.clear_boot().await?,
        }
        Ok(())
    }

    async fn boot_settings(&self, host: &HostInfo) -> Result<Option<BootOverride>> {
        let (_st, bmc) = self.session(host).await?;
        Ok(bmc.boot_override().await?)
    }

    async fn power_and_boot(&self, host: &HostInfo) -> Result<(PowerState, Option<BootOverride>)> {
        let (mut st, bmc) = self.session(host).await?;
        let (power, boot) = bmc.power_and_boot().await?;
        Self::observed_power(&mut st, power);
        Ok((power, boot))
    }

    async fn restore_boot(&self, host: &HostInfo, saved: Option<BootOverride>) -> Result<()> {
        let (_st, bmc) = self.session(host).await?;
        match saved {
            Some(o) => bmc.set_boot(o).await?,
            None => bmc.clear_boot().await?,
        }
        Ok(())
    }

    async fn virtual_media(&self, host: &HostInfo, url: Option<&str>) -> Result<()> {
        let (_st, bmc) = self.session(host).await?;
        match url {
            Some(url) => bmc.insert_media(url).await?,
            None => bmc.eject_media().await?,
        }
        Ok(())
    }

    async fn data_image(&self, host: &HostInfo, url: Option<&str>) -> Result<Step> {
        if host.bmc.protocol() != Protocol::Redfish {
            return Err(unsupported(format!(
                "host {}: a DataImage needs virtual media, which its IPMI BMC does not have",
                host.key
            )));
        }
        let (_st, bmc) = self.session(host).await?;
        let media = bmc.media_status().await?;
        match (url, media.inserted, media.image.as_deref()) {
            (None, false, _) => Ok(Step::Done(())),
            (Some(url), true, Some(image)) if image == url => Ok(Step::Done(())),
            (_, true, _) => {
                bmc.eject_media().await?;
                if url.is_none() {
                    return Ok(Step::Done(()));
                }
                self.step_waiting("virtual media ejected for the DataImage")
            }
            (Some(url), false, _) => {
                bmc.insert_media(url).await?;
                Ok(Step::Done(()))
            }
        }
    }

    async fn media_state(&self, host: &HostInfo) -> Result<ferrometal_bmc::MediaStatus> {
        let (_st, bmc) = self.session(host).await?;
        Ok(bmc.media_status().await?)
    }

    async fn detach(&self, host: &HostInfo) -> Result<Step> {
        self.forget(&host.key);
        Ok(Step::Done(()))
    }

    async fn delete(&self, host: &HostInfo) -> Result<Step> {
        self.forget(&host.key);
        Ok(Step::Done(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use ferrometal_api::spec_fault::SpecFault;
    use ferrometal_api::{CustomDeploy, Image, ImageFormat};
    use ferrometal_bmc::{BmcAddress, Credentials};

    fn host(address: &str) -> HostInfo {
        HostInfo {
            key: "ns~h".into(),
            provisioner_id: String::new(),
            bmc: BmcAddress::parse(address).unwrap(),
            credentials: Credentials::new("admin", "password"),
            disable_certificate_verification: false,
            boot_mac_address: None,
            boot_mode: None,
            inspection_mode: InspectionMode::Fast,
            root_device_hints: None,
            automated_cleaning_mode: ferrometal_api::AutomatedCleaningMode::Disabled,
            disable_power_off: false,
            preprovisioning_network_data: None,
        }
    }

    fn image(format: Option<ImageFormat>) -> Deployment {
        Deployment {
            image: Some(Image {
                url: "http://images/live.iso".into(),
                checksum: None,
                checksum_type: None,
                format,
                oci_auth_secret_name: None,
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn only_live_iso_over_redfish_is_deployable() {
        let rf = host("redfish+http://10.0.0.1/redfish/v1/Systems/1");
        assert_eq!(
            live_iso_url(&rf, &image(Some(ImageFormat::LiveIso))).unwrap(),
            "http://images/live.iso"
        );
        let err = live_iso_url(&rf, &image(Some(ImageFormat::Qcow2))).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        assert_eq!(
            err.message,
            "image format qcow2 needs the deploy agent (serve --agent-ramdisk) or the ironic provisioner; without them the redfish provisioner boots live-iso images only"
        );
        assert_eq!(err.spec_fault, Some(SpecFault::ImageFormatNotSupported));
        let err = live_iso_url(&rf, &image(None)).unwrap_err();
        assert!(err.message.contains("(unset)"), "{err}");

        let ipmi = host("ipmi://10.0.0.2");
        let err = live_iso_url(&ipmi, &image(Some(ImageFormat::LiveIso))).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        assert!(
            err.message.contains("IPMI") && err.message.contains("10.0.0.2"),
            "{err}"
        );
        assert_eq!(err.spec_fault, None, "the host's BMC, not the spec");

        let custom = Deployment {
            custom_deploy: Some(CustomDeploy {
                method: "install_coreos".into(),
            }),
            ..Deployment::default()
        };
        let err = live_iso_url(&rf, &custom).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        assert!(err.message.contains("install_coreos"), "{err}");
        assert_eq!(err.spec_fault, Some(SpecFault::CustomDeployNotSupported));
        let err = live_iso_url(&rf, &Deployment::default()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        let mut empty = image(Some(ImageFormat::LiveIso));
        empty.image.as_mut().unwrap().url = " ".into();
        let err = live_iso_url(&rf, &empty).unwrap_err();
        assert_eq!(err.spec_fault, Some(SpecFault::ImageUrlEmpty));
    }

    #[test]
    fn only_an_insert_refused_as_a_bad_request_is_the_image_urls_fault() {
        let http = |status| BmcError::Http {
            bmc: "10.0.0.1:443".into(),
            status,
            operation: "POST .../VirtualMedia.InsertMedia".into(),
            message: "Base.1.8.ActionParameterValueFormatError".into(),
        };
        // (error, the tenant's fault, the kind: Failed counts towards the retry limit)
        for (e, fault, kind) in [
            (
                http(400),
                Some(SpecFault::ImageUrlRefused),
                ErrorKind::Failed,
            ),
            (
                http(422),
                Some(SpecFault::ImageUrlRefused),
                ErrorKind::Failed,
            ),
            (http(404), None, ErrorKind::Failed),
            // The image server failed the BMC (sushy-tools: 500 unreachable, 502 its 5xx).
            (http(500), None, ErrorKind::Failed),
            (http(502), None, ErrorKind::Failed),
            // Busy: retried without counting.
            (http(503), None, ErrorKind::ServerError),
            (http(409), None, ErrorKind::ServerError),
            (
                BmcError::Unauthorized {
                    bmc: "10.0.0.1:443".into(),
                },
                None,
                ErrorKind::Credentials,
            ),
            (
                BmcError::Unreachable {
                    bmc: "10.0.0.1:443".into(),
                    reason: "refused".into(),
                },
                None,
                ErrorKind::Unreachable,
            ),
        ] {
            let err = image::insert_error(e.clone());
            assert_eq!(err.spec_fault, fault, "{e}");
            assert_eq!(err.kind, kind, "{e}");
            assert_eq!(
                err.message,
                e.to_string(),
                "the infra team's message is unchanged"
            );
        }
    }

    #[tokio::test]
    async fn detach_delete_and_capacity_touch_no_bmc() {
        // An address nothing listens on: any request would fail.
        let p = RedfishProvisioner::new(RedfishOptions::default());
        let h = host("redfish+http://127.0.0.1:9/redfish/v1/Systems/1");
        assert_eq!(p.detach(&h).await.unwrap(), Step::Done(()));
        assert_eq!(p.delete(&h).await.unwrap(), Step::Done(()));
        assert!(p.has_capacity(19).await);
        assert!(!p.has_capacity(20).await);
        assert_eq!(p.cached_hosts(), 0);
        let mut off = h.clone();
        off.disable_power_off = true;
        let err = p.power_off(&off, PowerOffMode::Soft).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        let err = p.operation(&off, Operation::ForceOff).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
    }
}
