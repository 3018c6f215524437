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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrometal_api::annotations::Operation;
use ferrometal_api::{
    CpuDetails, DiskType, HardwareDetails, HardwareSystemVendor, ImageFormat, InspectionMode,
    NicDetails, StorageDetails,
};
use ferrometal_bmc::{
    Bmc, BmcAddress, BmcError, BmcOptions, BootDevice, BootMode, BootOverride, Inventory,
    PowerAction, PowerState, Protocol, RequestObserver,
};

use crate::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, ProvisionerError, Registration,
    Result, Step,
};

/// Knobs of the redfish backend.
#[derive(Clone)]
pub struct RedfishOptions {
    /// Per-request BMC timeout.
    pub request_timeout: Duration,
    /// Hosts that may be inspecting, provisioning or deprovisioning at once (metal3: 20).
    pub max_busy: usize,
    /// Told about every BMC request, for counting.
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// How long a soft power-off may take before the host is forced off.
    pub soft_power_off_grace: Duration,
    /// Requeue while waiting for the BMC to report a power change.
    pub poll_interval: Duration,
    /// Requeue between two quick steps (media inserted, boot override set).
    pub step_interval: Duration,
    /// A power action the BMC still has not carried out after this long is an error (and is
    /// issued again on the next call).
    pub action_timeout: Duration,
    /// Everything else a client needs (auth mode, IPMI tool and cipher suite). Its timeout,
    /// observer and TLS flag are replaced by the fields above and the host's setting.
    pub client: BmcOptions,
}

impl Default for RedfishOptions {
    fn default() -> Self {
        RedfishOptions {
            request_timeout: Duration::from_secs(10),
            max_busy: 20,
            observer: None,
            soft_power_off_grace: Duration::from_secs(180),
            poll_interval: Duration::from_secs(2),
            step_interval: Duration::from_millis(200),
            action_timeout: Duration::from_secs(120),
            client: BmcOptions::default(),
        }
    }
}

impl std::fmt::Debug for RedfishOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedfishOptions")
            .field("request_timeout", &self.request_timeout)
            .field("max_busy", &self.max_busy)
            .field("observer", &self.observer.is_some())
            .field("soft_power_off_grace", &self.soft_power_off_grace)
            .field("poll_interval", &self.poll_interval)
            .field("step_interval", &self.step_interval)
            .field("action_timeout", &self.action_timeout)
            .finish_non_exhaustive()
    }
}

/// What the client was built from; a change means a new client.
struct Fingerprint {
    address: BmcAddress,
    username: String,
    password: String,
    insecure: bool,
}

impl Fingerprint {
    fn of(host: &HostInfo) -> Fingerprint {
        Fingerprint {
            address: host.bmc.clone(),
            username: host.credentials.username.clone(),
            password: host.credentials.password().to_string(),
            insecure: host.disable_certificate_verification,
        }
    }

    fn matches(&self, other: &Fingerprint) -> bool {
        self.address == other.address
            && self.username == other.username
            && self.password == other.password
            && self.insecure == other.insecure
    }
}

/// A power action issued and not yet observed.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    action: PowerAction,
    issued: Instant,
}

impl InFlight {
    fn target(&self) -> PowerState {
        self.action.target_state()
    }
}

/// How far this process got with one deployment (one image URL).
#[derive(Debug, Clone, Default)]
struct DeployProgress {
    url: String,
    /// This process inserted the media (so an On host did not boot it yet).
    inserted: bool,
    boot_set: bool,
    /// On was issued after the media and boot override were in place.
    powered_on: bool,
    /// ForceRestart was issued after the media and boot override were in place.
    restarted: bool,
}

#[derive(Default)]
struct HostState {
    client: Option<(Fingerprint, Arc<dyn Bmc>)>,
    in_flight: Option<InFlight>,
    deploy: Option<DeployProgress>,
    /// Deprovisioning a host whose power must stay on restarted it already.
    teardown_restarted: bool,
}

/// The redfish backend. Cheap to share (`Arc`); all state is behind short-held locks, with one
/// async lock per host so two calls for the same BMC never interleave their actions.
pub struct RedfishProvisioner {
    options: RedfishOptions,
    hosts: Mutex<HashMap<String, Arc<tokio::sync::Mutex<HostState>>>>,
}

impl RedfishProvisioner {
    pub fn new(options: RedfishOptions) -> RedfishProvisioner {
        RedfishProvisioner {
            options,
            hosts: Mutex::new(HashMap::new()),
        }
    }

    pub fn options(&self) -> &RedfishOptions {
        &self.options
    }

    /// Hosts with cached state (a client, an action in flight or a deployment).
    pub fn cached_hosts(&self) -> usize {
        self.map().len()
    }

    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<HostState>>>> {
        self.hosts.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<HostState> {
        let cell = self.map().entry(key.to_string()).or_default().clone();
        cell.lock_owned().await
    }

    fn forget(&self, key: &str) {
        self.map().remove(key);
    }

    /// The cached client, rebuilt when the address, credentials or TLS setting changed.
    fn client(&self, st: &mut HostState, host: &HostInfo, fresh: bool) -> Result<Arc<dyn Bmc>> {
        let wanted = Fingerprint::of(host);
        if !fresh
            && let Some((fingerprint, bmc)) = &st.client
            && fingerprint.matches(&wanted)
        {
            return Ok(bmc.clone());
        }
        if let Some((old, _)) = &st.client
            && old.address != wanted.address
        {
            // Another BMC may be another machine: nothing remembered applies.
            st.in_flight = None;
            st.deploy = None;
            st.teardown_restarted = false;
        }
        let options = BmcOptions {
            timeout: self.options.request_timeout,
            disable_certificate_verification: host.disable_certificate_verification,
            observer: self.options.observer.clone(),
            ..self.options.client.clone()
        };
        let bmc = ferrometal_bmc::connect(&host.bmc, host.credentials.clone(), options)?;
        st.client = Some((wanted, bmc.clone()));
        Ok(bmc)
    }

    async fn session(
        &self,
        host: &HostInfo,
    ) -> Result<(tokio::sync::OwnedMutexGuard<HostState>, Arc<dyn Bmc>)> {
        let mut st = self.lock(&host.key).await;
        let bmc = self.client(&mut st, host, false)?;
        Ok((st, bmc))
    }

    fn waiting_power<T>(&self, reason: String) -> Result<Step<T>> {
        Ok(Step::waiting(self.options.poll_interval, reason))
    }

    /// Reads the power and settles the action in flight once the BMC shows its effect, so a
    /// stale one (say, from an operation nobody waited for) never blocks or fails a later call.
    async fn observe_power(&self, st: &mut HostState, bmc: &dyn Bmc) -> Result<PowerState> {
        let now = bmc.power_state().await?;
        if st.in_flight.is_some_and(|f| f.target() == now) {
            st.in_flight = None;
        }
        Ok(now)
    }

    /// Issues `action` once, remembering it as the BMC's one action in flight.
    async fn issue(&self, st: &mut HostState, bmc: &dyn Bmc, action: PowerAction) -> Result<()> {
        bmc.power(action).await?;
        st.in_flight = Some(InFlight {
            action,
            issued: Instant::now(),
        });
        tracing::debug!(
            bmc = bmc.endpoint(),
            action = action.as_str(),
            "power action issued"
        );
        Ok(())
    }

    /// Observes the power and moves it towards the target of `action`: Done once the BMC
    /// reports it; otherwise the action is issued once and later calls only check. A soft
    /// power-off that outlasts the grace period is followed by ForceOff.
    async fn drive_power(
        &self,
        st: &mut HostState,
        bmc: &dyn Bmc,
        action: PowerAction,
    ) -> Result<Step> {
        let now = self.observe_power(st, bmc).await?;
        self.drive_power_from(st, bmc, action, now).await
    }

    /// [`Self::drive_power`] with the power this call already observed.
    async fn drive_power_from(
        &self,
        st: &mut HostState,
        bmc: &dyn Bmc,
        action: PowerAction,
        now: PowerState,
    ) -> Result<Step> {
        let target = action.target_state();
        if now == target {
            return Ok(Step::Done(()));
        }
        if let Some(f) = st.in_flight.filter(|f| f.target() == target) {
            let age = f.issued.elapsed();
            if f.action == PowerAction::GracefulShutdown {
                if action == PowerAction::ForceOff {
                    // A hard request does not wait out a soft one's grace period.
                    self.issue(st, bmc, PowerAction::ForceOff).await?;
                    return self.waiting_power("ForceOff issued over a soft power off".into());
                }
                if age < self.options.soft_power_off_grace {
                    return self.waiting_power(format!(
                        "soft power off issued {}s ago; BMC reports {now}",
                        age.as_secs()
                    ));
                }
                self.issue(st, bmc, PowerAction::ForceOff).await?;
                return self.waiting_power(format!(
                    "soft power off did not finish within {}s; forced off",
                    self.options.soft_power_off_grace.as_secs()
                ));
            }
            if age < self.options.action_timeout {
                return self.waiting_power(format!(
                    "{} issued {}s ago; BMC reports {now}",
                    f.action.as_str(),
                    age.as_secs()
                ));
            }
            // Forget it so the next call (after the controller's backoff) issues it again.
            st.in_flight = None;
            return Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!(
                    "BMC {} still reports power {now} {}s after {} was issued",
                    bmc.endpoint(),
                    age.as_secs(),
                    f.action.as_str()
                ),
            ));
        }
        if is_moving_to(now, target) {
            return self.waiting_power(format!("BMC reports {now}"));
        }
        match self.issue(st, bmc, action).await {
            Err(e)
                if action == PowerAction::GracefulShutdown && e.kind == ErrorKind::Unsupported =>
            {
                // No ACPI shutdown on this BMC: the soft request degrades to hard at once.
                self.issue(st, bmc, PowerAction::ForceOff).await?;
            }
            other => other?,
        }
        self.waiting_power(format!(
            "{} issued; BMC reported {now}",
            st.in_flight.map_or("power action", |f| f.action.as_str())
        ))
    }

    fn step_waiting(&self, reason: &str) -> Result<Step> {
        Ok(Step::waiting(self.options.step_interval, reason))
    }

    fn boot_override(host: &HostInfo, device: BootDevice) -> BootOverride {
        BootOverride {
            device,
            once: true,
            mode: Some(match host.boot_mode {
                Some(ferrometal_api::BootMode::Legacy) => BootMode::Legacy,
                _ => BootMode::Uefi,
            }),
        }
    }
}

fn is_moving_to(now: PowerState, target: PowerState) -> bool {
    matches!(
        (now, target),
        (PowerState::PoweringOn, PowerState::On) | (PowerState::PoweringOff, PowerState::Off)
    )
}

fn unsupported(message: impl Into<String>) -> ProvisionerError {
    ProvisionerError::new(ErrorKind::Unsupported, message)
}

/// Checks that the redfish backend can deploy this, and returns the image URL to boot.
pub fn live_iso_url<'a>(host: &HostInfo, deployment: &'a Deployment) -> Result<&'a str> {
    let Some(image) = &deployment.image else {
        return Err(match &deployment.custom_deploy {
            Some(custom) => unsupported(format!(
                "custom deploy method {:?} needs the ironic provisioner; the redfish provisioner boots live-iso images only",
                custom.method
            )),
            None => ProvisionerError::new(ErrorKind::InvalidInput, "no image to provision"),
        });
    };
    if host.bmc.protocol() == Protocol::Ipmi {
        return Err(unsupported(format!(
            "BMC {} speaks IPMI, which has no virtual media: image provisioning needs a Redfish BMC or the ironic provisioner",
            host.bmc.authority()
        )));
    }
    if !image.is_live_iso() {
        let format = match image.format {
            Some(ImageFormat::Raw) => "raw",
            Some(ImageFormat::Qcow2) => "qcow2",
            Some(ImageFormat::Vdi) => "vdi",
            Some(ImageFormat::Vmdk) => "vmdk",
            Some(ImageFormat::LiveIso) => "live-iso",
            None => "(unset)",
        };
        return Err(unsupported(format!(
            "image format {format} needs the ironic provisioner; the redfish provisioner boots live-iso images only"
        )));
    }
    if image.url.trim().is_empty() {
        return Err(ProvisionerError::new(
            ErrorKind::InvalidInput,
            "image.url is empty",
        ));
    }
    Ok(&image.url)
}

/// Turns an out-of-band inventory into `status.hardware`. What the BMC does not report stays
/// empty (a CPU count of 0, no NICs), as Ironic records it: the controller names the gaps in
/// a condition and the host goes on, since neither backend needs them to deploy.
pub fn hardware_details(inv: &Inventory, boot_mac: Option<&str>) -> HardwareDetails {
    let unknown = ferrometal_bmc::Cpu::default();
    let first = inv.cpus.first().unwrap_or(&unknown);
    let cpu = CpuDetails {
        arch: cpu_arch(&first.architecture),
        model: first.model.clone(),
        clock_megahertz: inv.cpus.iter().map(|c| c.speed_mhz).max().unwrap_or(0) as f64,
        flags: Vec::new(),
        // metal3 counts logical CPUs: threads, else cores, else one per socket.
        count: inv
            .cpus
            .iter()
            .map(|c| {
                if c.threads > 0 {
                    i64::from(c.threads)
                } else {
                    i64::from(c.cores.max(1))
                }
            })
            .sum(),
    };
    let boot_mac = boot_mac.map(str::to_ascii_lowercase);
    let nics = inv
        .nics
        .iter()
        .map(|n| NicDetails {
            name: n.name.clone(),
            model: None,
            mac: n.mac.clone(),
            ip: None,
            speed_gbps: (n.speed_mbps / 1000) as i64,
            pxe: boot_mac
                .as_deref()
                .is_some_and(|b| b == n.mac.to_ascii_lowercase()),
            ..NicDetails::default()
        })
        .collect();
    let storage = inv
        .disks
        .iter()
        .map(|d| {
            let kind = if d.protocol.eq_ignore_ascii_case("nvme") {
                Some(DiskType::Nvme)
            } else if d.media_type.eq_ignore_ascii_case("ssd") {
                Some(DiskType::Ssd)
            } else if d.media_type.eq_ignore_ascii_case("hdd") {
                Some(DiskType::Hdd)
            } else {
                None
            };
            let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
            StorageDetails {
                name: d.name.clone(),
                rotational: kind == Some(DiskType::Hdd),
                type_: kind,
                size_bytes: i64::try_from(d.size_bytes).unwrap_or(i64::MAX),
                // The BMC client reports no drive manufacturer.
                vendor: None,
                model: text(&d.model),
                serial_number: text(&d.serial_number),
                ..StorageDetails::default()
            }
        })
        .collect();
    let id = &inv.identity;
    HardwareDetails {
        system_vendor: Some(HardwareSystemVendor {
            manufacturer: id.manufacturer.clone(),
            product_name: id.model.clone(),
            serial_number: id.serial_number.clone(),
        }),
        firmware: None,
        ram_mebibytes: i64::try_from(inv.total_memory_mib()).unwrap_or(i64::MAX),
        nics,
        storage,
        cpu: Some(cpu),
        hostname: None,
    }
}

/// Redfish `ProcessorArchitecture`/`InstructionSet` to the names inspection agents report.
fn cpu_arch(redfish: &str) -> String {
    match redfish.to_ascii_lowercase().as_str() {
        "x86" | "x86-64" | "x86_64" => "x86_64".into(),
        "arm" | "arm-a64" | "aarch64" => "aarch64".into(),
        "arm-a32" => "arm".into(),
        "ia-64" => "ia64".into(),
        "power" | "powerisa" => "ppc64le".into(),
        "mips" | "mips64" => "mips64".into(),
        other => other.into(),
    }
}

fn power_action_of(op: Operation) -> Option<PowerAction> {
    Some(match op {
        Operation::PowerCycle => PowerAction::PowerCycle,
        Operation::GracefulRestart => PowerAction::GracefulRestart,
        Operation::ForceRestart => PowerAction::ForceRestart,
        Operation::ForceOff => PowerAction::ForceOff,
        Operation::ForceOn => PowerAction::ForceOn,
        Operation::GracefulShutdown => PowerAction::GracefulShutdown,
        Operation::PxeOnce => return None,
    })
}

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

    async fn provision(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        let url = live_iso_url(host, deployment)?;
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        if st.deploy.as_ref().is_none_or(|d| d.url != url) {
            st.deploy = Some(DeployProgress {
                url: url.to_string(),
                ..DeployProgress::default()
            });
            st.teardown_restarted = false;
        }
        let media = bmc.media_status().await?;
        let ours = media.inserted && media.image.as_deref() == Some(url);
        let power = self.observe_power(st, &*bmc).await?;

        if !ours {
            // Ironic's ramdisk deploy order: off, media + boot, on. Inserting only into a host
            // that is off makes "our media + On" mean the host booted it, even after a restart.
            if !host.disable_power_off && power != PowerState::Off {
                return match self
                    .drive_power_from(st, &*bmc, PowerAction::ForceOff, power)
                    .await?
                {
                    Step::Done(()) => self.step_waiting("powered off; inserting media next"),
                    waiting => Ok(waiting),
                };
            }
            bmc.insert_media(url).await?;
            let progress = st.deploy.as_mut().expect("set above");
            progress.inserted = true;
            progress.boot_set = false;
            progress.powered_on = false;
            progress.restarted = false;
            tracing::debug!(host = %host.key, "virtual media inserted");
            return self.step_waiting("virtual media inserted");
        }

        let progress = st.deploy.clone().expect("set above");
        let booted = progress.powered_on || progress.restarted;
        match power {
            PowerState::On if booted => {
                st.in_flight = None;
                Ok(Step::Done(()))
            }
            // Media ours and On, with no memory of inserting it: a previous run powered the
            // host on with the image (media goes only into hosts that are off). Hosts whose
            // power must stay on cannot tell, so they get the restart.
            PowerState::On if !progress.inserted && !host.disable_power_off => Ok(Step::Done(())),
            PowerState::On | PowerState::Off if !progress.boot_set => {
                if host.boot_mode == Some(ferrometal_api::BootMode::UefiSecureBoot)
                    && !bmc.secure_boot().await?
                {
                    // Observed again on the next call before the boot override is set.
                    bmc.set_secure_boot(true).await?;
                    return self.step_waiting("UEFI Secure Boot enabled");
                }
                bmc.set_boot(Self::boot_override(host, BootDevice::Cd))
                    .await?;
                st.deploy.as_mut().expect("set above").boot_set = true;
                self.step_waiting("boot override set to Cd once")
            }
            PowerState::On => {
                self.issue(st, &*bmc, PowerAction::ForceRestart).await?;
                st.deploy.as_mut().expect("set above").restarted = true;
                self.waiting_power("restarted into the image".into())
            }
            PowerState::Off | PowerState::PoweringOn | PowerState::PoweringOff => {
                // Media and boot override are in place: whatever powers it on now boots them.
                let step = self
                    .drive_power_from(st, &*bmc, PowerAction::On, power)
                    .await?;
                st.deploy.as_mut().expect("set above").powered_on = true;
                Ok(step)
            }
            PowerState::Unknown => Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!("BMC {} reports an unknown power state", bmc.endpoint()),
            )),
        }
    }

    async fn deprovision(&self, host: &HostInfo) -> Result<Step> {
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
    use ferrometal_api::{CustomDeploy, Image};
    use ferrometal_bmc::{Cpu, Credentials, Disk, MemoryModule, Nic, SystemIdentity};

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
            "image format qcow2 needs the ironic provisioner; the redfish provisioner boots live-iso images only"
        );
        let err = live_iso_url(&rf, &image(None)).unwrap_err();
        assert!(err.message.contains("(unset)"), "{err}");

        let ipmi = host("ipmi://10.0.0.2");
        let err = live_iso_url(&ipmi, &image(Some(ImageFormat::LiveIso))).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        assert!(
            err.message.contains("IPMI") && err.message.contains("10.0.0.2"),
            "{err}"
        );

        let custom = Deployment {
            custom_deploy: Some(CustomDeploy {
                method: "install_coreos".into(),
            }),
            ..Deployment::default()
        };
        let err = live_iso_url(&rf, &custom).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        assert!(err.message.contains("install_coreos"), "{err}");
        let err = live_iso_url(&rf, &Deployment::default()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
    }

    fn inventory() -> Inventory {
        Inventory {
            identity: SystemIdentity {
                uuid: Some("u".into()),
                manufacturer: Some("Acme".into()),
                model: Some("R1".into()),
                serial_number: Some("S1".into()),
            },
            cpus: vec![
                Cpu {
                    model: "Xeon".into(),
                    architecture: "x86".into(),
                    cores: 16,
                    threads: 32,
                    speed_mhz: 3000,
                },
                Cpu {
                    model: "Xeon".into(),
                    architecture: "x86".into(),
                    cores: 16,
                    threads: 0,
                    speed_mhz: 3200,
                },
            ],
            memory: vec![
                MemoryModule {
                    capacity_mib: 16384,
                    ..MemoryModule::default()
                };
                4
            ],
            nics: vec![
                Nic {
                    name: "NIC0".into(),
                    mac: "52:54:00:00:00:01".into(),
                    speed_mbps: 25_000,
                    link_up: Some(true),
                },
                Nic {
                    name: "NIC1".into(),
                    mac: "52:54:00:00:00:02".into(),
                    speed_mbps: 10_000,
                    link_up: None,
                },
            ],
            disks: vec![
                Disk {
                    name: "Disk0".into(),
                    size_bytes: 960,
                    media_type: "SSD".into(),
                    model: "NV".into(),
                    serial_number: "D0".into(),
                    protocol: "NVMe".into(),
                },
                Disk {
                    name: "Disk1".into(),
                    size_bytes: 4000,
                    media_type: "HDD".into(),
                    model: String::new(),
                    serial_number: "D1".into(),
                    protocol: "SAS".into(),
                },
                Disk {
                    name: "Disk2".into(),
                    size_bytes: 480,
                    media_type: "SSD".into(),
                    protocol: "SATA".into(),
                    ..Disk::default()
                },
            ],
            warnings: vec![],
        }
    }

    #[test]
    fn inventory_becomes_hardware_details() {
        let hw = hardware_details(
            &inventory(),
            Some("52:54:00:00:00:02".to_uppercase().as_str()),
        );
        let cpu = hw.cpu.unwrap();
        assert_eq!(cpu.arch, "x86_64");
        assert_eq!(cpu.model, "Xeon");
        assert_eq!(cpu.count, 32 + 16);
        assert_eq!(cpu.clock_megahertz, 3200.0);
        assert_eq!(hw.ram_mebibytes, 65536);
        assert_eq!(hw.nics.len(), 2);
        assert_eq!((hw.nics[0].speed_gbps, hw.nics[0].pxe), (25, false));
        assert_eq!((hw.nics[1].speed_gbps, hw.nics[1].pxe), (10, true));
        let kinds: Vec<_> = hw
            .storage
            .iter()
            .map(|s| (s.type_.unwrap(), s.rotational))
            .collect();
        assert_eq!(
            kinds,
            [
                (DiskType::Nvme, false),
                (DiskType::Hdd, true),
                (DiskType::Ssd, false)
            ]
        );
        assert_eq!(hw.storage[1].model, None);
        assert_eq!(hw.storage[0].serial_number.as_deref(), Some("D0"));
        let vendor = hw.system_vendor.unwrap();
        assert_eq!(vendor.manufacturer.as_deref(), Some("Acme"));
        assert_eq!(vendor.product_name.as_deref(), Some("R1"));
        assert_eq!(vendor.serial_number.as_deref(), Some("S1"));
    }

    #[test]
    fn missing_cpus_or_nics_are_recorded_empty() {
        let mut inv = inventory();
        inv.cpus.clear();
        inv.nics.clear();
        inv.warnings = vec!["processors: the BMC reports none".into()];
        let hw = hardware_details(&inv, None);
        let cpu = hw.cpu.unwrap();
        assert_eq!((cpu.count, cpu.arch.as_str()), (0, ""));
        assert!(hw.nics.is_empty());
        // What the BMC did report is kept.
        assert_eq!(hw.ram_mebibytes, 65536);
        assert_eq!(hw.storage.len(), 3);
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
