//! The `fixture` backend: in memory, deterministic, no I/O. For the controller's tests and
//! benchmarks.
//!
//! Each host has a simulated power state. A long-running step (inspect, provision, deprovision,
//! power on/off) answers `Waiting` a configurable number of times before `Done`; the others are
//! `Done` at once. Failures can be injected per host and method, and every call is logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{
    CpuDetails, HardwareDetails, HardwareSystemVendor, InspectionMode, NicDetails, StorageDetails,
};
use ferrometal_bmc::PowerState;

use crate::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, ProvisionerError, Registration,
    Result, Step,
};

/// The trait's methods, for waits, failures and the call log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Register,
    Inspect,
    Prepare,
    Provision,
    Deprovision,
    Adopt,
    PowerState,
    PowerOn,
    PowerOff,
    Operation,
    Detach,
    Delete,
}

impl Method {
    pub const ALL: [Method; 12] = [
        Method::Register,
        Method::Inspect,
        Method::Prepare,
        Method::Provision,
        Method::Deprovision,
        Method::Adopt,
        Method::PowerState,
        Method::PowerOn,
        Method::PowerOff,
        Method::Operation,
        Method::Detach,
        Method::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Register => "register",
            Method::Inspect => "inspect",
            Method::Prepare => "prepare",
            Method::Provision => "provision",
            Method::Deprovision => "deprovision",
            Method::Adopt => "adopt",
            Method::PowerState => "power_state",
            Method::PowerOn => "power_on",
            Method::PowerOff => "power_off",
            Method::Operation => "operation",
            Method::Detach => "detach",
            Method::Delete => "delete",
        }
    }

    /// Steps that take a while on real hardware; they wait by default.
    fn is_long(self) -> bool {
        matches!(
            self,
            Method::Inspect
                | Method::Provision
                | Method::Deprovision
                | Method::PowerOn
                | Method::PowerOff
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Failure {
    kind: ErrorKind,
    /// `None`: until healed.
    remaining: Option<u32>,
}

#[derive(Debug, Default)]
struct HostSim {
    registered: bool,
    power: Option<PowerState>,
    /// Calls answered `Waiting` so far for the step in progress, per method.
    progress: HashMap<Method, u32>,
    hardware: Option<HardwareDetails>,
    provisioned_image: Option<String>,
    /// The user data given with the last provisioning.
    provisioned_user_data: Option<String>,
    /// Last one-time boot device set by an operation (`Pxe`).
    boot_once: Option<&'static str>,
}

#[derive(Debug)]
struct Inner {
    hosts: HashMap<String, HostSim>,
    failures: HashMap<(String, Method), Failure>,
    waits: HashMap<Method, u32>,
    calls: Vec<(String, &'static str)>,
    record_calls: bool,
    capacity: usize,
    requeue: Duration,
    initial_power: PowerState,
    ready: bool,
}

/// The in-memory backend. All methods are cheap and never block on I/O.
#[derive(Debug)]
pub struct FixtureProvisioner {
    inner: Mutex<Inner>,
}

impl Default for FixtureProvisioner {
    fn default() -> Self {
        FixtureProvisioner::new()
    }
}

impl FixtureProvisioner {
    /// Long steps (inspect, provision, deprovision, power on/off) wait once with a 10 ms
    /// requeue, everything else is Done at once; capacity 20; hosts start powered off.
    pub fn new() -> FixtureProvisioner {
        let waits = Method::ALL
            .into_iter()
            .map(|m| (m, u32::from(m.is_long())))
            .collect();
        FixtureProvisioner {
            inner: Mutex::new(Inner {
                hosts: HashMap::new(),
                failures: HashMap::new(),
                waits,
                calls: Vec::new(),
                record_calls: true,
                capacity: 20,
                requeue: Duration::from_millis(10),
                initial_power: PowerState::Off,
                ready: true,
            }),
        }
    }

    /// Every step Done on its first call.
    pub fn immediate() -> FixtureProvisioner {
        FixtureProvisioner::new().with_all_waits(0)
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `method` answers `Waiting` this many times before `Done`.
    pub fn with_waits(self, method: Method, waits: u32) -> Self {
        self.inner().waits.insert(method, waits);
        self
    }

    pub fn with_all_waits(self, waits: u32) -> Self {
        for m in Method::ALL {
            self.inner().waits.insert(m, waits);
        }
        self
    }

    pub fn with_requeue(self, requeue: Duration) -> Self {
        self.inner().requeue = requeue;
        self
    }

    pub fn with_capacity(self, capacity: usize) -> Self {
        self.inner().capacity = capacity;
        self
    }

    pub fn with_initial_power(self, power: PowerState) -> Self {
        self.inner().initial_power = power;
        self
    }

    /// Benchmarks with many hosts can turn the call log off.
    pub fn with_call_log(self, record: bool) -> Self {
        self.inner().record_calls = record;
        self
    }

    /// Makes `method` fail for `key` with `kind` until [`FixtureProvisioner::heal`].
    pub fn fail(&self, key: &str, method: Method, kind: ErrorKind) {
        self.inner().failures.insert(
            (key.to_string(), method),
            Failure {
                kind,
                remaining: None,
            },
        );
    }

    /// Makes `method` fail for `key` the next `times` calls only.
    pub fn fail_times(&self, key: &str, method: Method, kind: ErrorKind, times: u32) {
        self.inner().failures.insert(
            (key.to_string(), method),
            Failure {
                kind,
                remaining: Some(times),
            },
        );
    }

    pub fn heal(&self, key: &str, method: Method) {
        self.inner().failures.remove(&(key.to_string(), method));
    }

    /// Removes every injected failure for `key`.
    pub fn heal_all(&self, key: &str) {
        self.inner().failures.retain(|(k, _), _| k != key);
    }

    pub fn set_ready(&self, ready: bool) {
        self.inner().ready = ready;
    }

    /// Every call so far, oldest first: (host key, method name).
    pub fn calls(&self) -> Vec<(String, &'static str)> {
        self.inner().calls.clone()
    }

    pub fn clear_calls(&self) {
        self.inner().calls.clear();
    }

    /// Calls of `method` for `key`.
    pub fn count(&self, key: &str, method: Method) -> usize {
        self.inner()
            .calls
            .iter()
            .filter(|(k, m)| k == key && *m == method.as_str())
            .count()
    }

    /// The simulated power of a host (`None` before it was ever seen).
    pub fn power(&self, key: &str) -> Option<PowerState> {
        self.inner().hosts.get(key).and_then(|h| h.power)
    }

    /// Changes a host's power behind the controller's back (someone pressed the button).
    pub fn set_power(&self, key: &str, power: PowerState) {
        self.inner().hosts.entry(key.to_string()).or_default().power = Some(power);
    }

    pub fn is_registered(&self, key: &str) -> bool {
        self.inner().hosts.get(key).is_some_and(|h| h.registered)
    }

    /// The image URL the host was last provisioned with, until deprovisioned.
    pub fn provisioned_image(&self, key: &str) -> Option<String> {
        self.inner()
            .hosts
            .get(key)
            .and_then(|h| h.provisioned_image.clone())
    }

    /// The user data the host was last provisioned with.
    pub fn provisioned_user_data(&self, key: &str) -> Option<String> {
        self.inner()
            .hosts
            .get(key)
            .and_then(|h| h.provisioned_user_data.clone())
    }

    /// The one-time boot device last set by an operation (`"Pxe"`).
    pub fn boot_once(&self, key: &str) -> Option<&'static str> {
        self.inner().hosts.get(key).and_then(|h| h.boot_once)
    }

    /// What inspecting `key` returns, instead of the generated details.
    pub fn set_hardware(&self, key: &str, details: HardwareDetails) {
        self.inner()
            .hosts
            .entry(key.to_string())
            .or_default()
            .hardware = Some(details);
    }

    /// Records the call, applies any injected failure, and makes sure the host exists.
    fn enter<'a>(inner: &'a mut Inner, key: &str, method: Method) -> Result<&'a mut HostSim> {
        if inner.record_calls {
            inner.calls.push((key.to_string(), method.as_str()));
        }
        let slot = (key.to_string(), method);
        if let Some(f) = inner.failures.get_mut(&slot) {
            let kind = f.kind;
            match &mut f.remaining {
                Some(0) => {
                    inner.failures.remove(&slot);
                }
                Some(n) => {
                    *n -= 1;
                    if *n == 0 {
                        inner.failures.remove(&slot);
                    }
                    return Err(injected(key, method, kind));
                }
                None => return Err(injected(key, method, kind)),
            }
        }
        let initial = inner.initial_power;
        let host = inner.hosts.entry(key.to_string()).or_default();
        host.power.get_or_insert(initial);
        Ok(host)
    }

    /// Counts one more call of a long step: Waiting until the configured number is reached.
    fn progress(&self, key: &str, method: Method) -> Result<Option<Step>> {
        let mut inner = self.inner();
        let waits = inner.waits.get(&method).copied().unwrap_or(0);
        let requeue = inner.requeue;
        let host = Self::enter(&mut inner, key, method)?;
        let done = host.progress.entry(method).or_insert(0);
        if *done < waits {
            *done += 1;
            return Ok(Some(Step::waiting(
                requeue,
                format!("fixture {} {}/{}", method.as_str(), done, waits),
            )));
        }
        host.progress.remove(&method);
        Ok(None)
    }

    /// Drives the simulated power towards `target`, waiting as configured unless already there.
    fn drive_power(&self, key: &str, method: Method, target: PowerState) -> Result<Step> {
        {
            let mut inner = self.inner();
            let host = inner.hosts.get(key);
            if host.is_some_and(|h| h.power == Some(target)) {
                let host = Self::enter(&mut inner, key, method)?;
                host.progress.remove(&method);
                return Ok(Step::Done(()));
            }
        }
        if let Some(waiting) = self.progress(key, method)? {
            return Ok(waiting);
        }
        self.set_power(key, target);
        Ok(Step::Done(()))
    }
}

fn injected(key: &str, method: Method, kind: ErrorKind) -> ProvisionerError {
    ProvisionerError::new(
        kind,
        format!(
            "injected {} failure in {} for {key}",
            kind.as_str(),
            method.as_str()
        ),
    )
}

/// Deterministic, plausible hardware for a host key.
pub fn generated_hardware(key: &str, boot_mac: Option<&str>) -> HardwareDetails {
    // FNV-1a: stable across runs and platforms, unlike the std hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mac = boot_mac.map(str::to_ascii_lowercase).unwrap_or_else(|| {
        let b = hash.to_be_bytes();
        format!("52:54:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
    });
    HardwareDetails {
        system_vendor: Some(HardwareSystemVendor {
            manufacturer: Some("Ferrometal".into()),
            product_name: Some("Fixture Server".into()),
            serial_number: Some(format!("FX{:08x}", hash as u32)),
        }),
        firmware: None,
        ram_mebibytes: 65536,
        nics: vec![NicDetails {
            name: "eth0".into(),
            model: None,
            mac,
            ip: None,
            speed_gbps: 25,
            pxe: true,
            ..NicDetails::default()
        }],
        storage: vec![StorageDetails {
            name: "/dev/nvme0n1".into(),
            rotational: false,
            type_: Some(ferrometal_api::DiskType::Nvme),
            size_bytes: 960_197_124_096,
            vendor: None,
            model: Some("Fixture NVMe".into()),
            serial_number: Some(format!("FXD{:08x}", (hash >> 32) as u32)),
            ..StorageDetails::default()
        }],
        cpu: Some(CpuDetails {
            arch: "x86_64".into(),
            model: "Fixture CPU".into(),
            clock_megahertz: 3000.0,
            flags: Vec::new(),
            count: 32,
        }),
        hostname: None,
    }
}

#[async_trait::async_trait]
impl Provisioner for FixtureProvisioner {
    fn name(&self) -> &'static str {
        "fixture"
    }

    async fn is_ready(&self) -> bool {
        self.inner().ready
    }

    async fn has_capacity(&self, busy: usize) -> bool {
        busy < self.inner().capacity
    }

    async fn register(
        &self,
        host: &HostInfo,
        _credentials_changed: bool,
    ) -> Result<Step<Registration>> {
        if let Some(waiting) = self.progress(&host.key, Method::Register)? {
            return Ok(waiting.map_waiting());
        }
        let mut inner = self.inner();
        let sim = inner.hosts.entry(host.key.clone()).or_default();
        sim.registered = true;
        let provisioner_id = if host.provisioner_id.is_empty() {
            format!("fixture-{}", host.key)
        } else {
            host.provisioner_id.clone()
        };
        Ok(Step::Done(Registration {
            provisioner_id,
            power: sim.power.unwrap_or(PowerState::Off),
        }))
    }

    async fn inspect(
        &self,
        host: &HostInfo,
        _refresh: bool,
    ) -> Result<Step<Option<HardwareDetails>>> {
        if host.inspection_mode == InspectionMode::Disabled {
            Self::enter(&mut self.inner(), &host.key, Method::Inspect)?;
            return Ok(Step::Done(None));
        }
        if let Some(waiting) = self.progress(&host.key, Method::Inspect)? {
            return Ok(waiting.map_waiting());
        }
        let inner = self.inner();
        let details = inner
            .hosts
            .get(&host.key)
            .and_then(|h| h.hardware.clone())
            .unwrap_or_else(|| generated_hardware(&host.key, host.boot_mac_address.as_deref()));
        Ok(Step::Done(Some(details)))
    }

    async fn prepare(&self, host: &HostInfo) -> Result<Step> {
        Ok(self
            .progress(&host.key, Method::Prepare)?
            .unwrap_or(Step::Done(())))
    }

    async fn provision(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        if deployment.image.is_none() && deployment.custom_deploy.is_none() {
            Self::enter(&mut self.inner(), &host.key, Method::Provision)?;
            return Err(ProvisionerError::new(
                ErrorKind::InvalidInput,
                "no image to provision",
            ));
        }
        if let Some(waiting) = self.progress(&host.key, Method::Provision)? {
            return Ok(waiting);
        }
        let mut inner = self.inner();
        let sim = inner.hosts.entry(host.key.clone()).or_default();
        sim.power = Some(PowerState::On);
        sim.provisioned_image = deployment
            .image
            .as_ref()
            .map(|i| i.url.clone())
            .or_else(|| deployment.custom_deploy.as_ref().map(|c| c.method.clone()));
        sim.provisioned_user_data = deployment.user_data.clone();
        Ok(Step::Done(()))
    }

    async fn deprovision(&self, host: &HostInfo) -> Result<Step> {
        if let Some(waiting) = self.progress(&host.key, Method::Deprovision)? {
            return Ok(waiting);
        }
        let mut inner = self.inner();
        let sim = inner.hosts.entry(host.key.clone()).or_default();
        sim.provisioned_image = None;
        if !host.disable_power_off {
            sim.power = Some(PowerState::Off);
        }
        Ok(Step::Done(()))
    }

    async fn adopt(&self, host: &HostInfo, _deployment: &Deployment) -> Result<Step> {
        Ok(self
            .progress(&host.key, Method::Adopt)?
            .unwrap_or(Step::Done(())))
    }

    async fn power_state(&self, host: &HostInfo) -> Result<PowerState> {
        let mut inner = self.inner();
        let sim = Self::enter(&mut inner, &host.key, Method::PowerState)?;
        Ok(sim.power.unwrap_or(PowerState::Off))
    }

    async fn power_on(&self, host: &HostInfo) -> Result<Step> {
        self.drive_power(&host.key, Method::PowerOn, PowerState::On)
    }

    async fn power_off(&self, host: &HostInfo, _mode: PowerOffMode) -> Result<Step> {
        if host.disable_power_off {
            Self::enter(&mut self.inner(), &host.key, Method::PowerOff)?;
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "host {} has disablePowerOff set: its power is never switched off",
                    host.key
                ),
            ));
        }
        self.drive_power(&host.key, Method::PowerOff, PowerState::Off)
    }

    async fn operation(&self, host: &HostInfo, op: Operation) -> Result<Step> {
        let mut inner = self.inner();
        let sim = Self::enter(&mut inner, &host.key, Method::Operation)?;
        let off = matches!(op, Operation::ForceOff | Operation::GracefulShutdown);
        if off && host.disable_power_off {
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "host {} has disablePowerOff set: {} would switch it off",
                    host.key,
                    op.as_str()
                ),
            ));
        }
        match op {
            Operation::PxeOnce => sim.boot_once = Some("Pxe"),
            _ if off => sim.power = Some(PowerState::Off),
            _ => sim.power = Some(PowerState::On),
        }
        Ok(Step::Done(()))
    }

    async fn detach(&self, host: &HostInfo) -> Result<Step> {
        let mut inner = self.inner();
        let sim = Self::enter(&mut inner, &host.key, Method::Detach)?;
        sim.registered = false;
        sim.progress.clear();
        Ok(Step::Done(()))
    }

    async fn delete(&self, host: &HostInfo) -> Result<Step> {
        let mut inner = self.inner();
        let sim = Self::enter(&mut inner, &host.key, Method::Delete)?;
        sim.registered = false;
        sim.progress.clear();
        sim.provisioned_image = None;
        Ok(Step::Done(()))
    }
}

impl Step<()> {
    /// A `Waiting` step re-typed (only called on `Waiting`).
    fn map_waiting<T>(self) -> Step<T> {
        match self {
            Step::Waiting {
                requeue_after,
                reason,
            } => Step::Waiting {
                requeue_after,
                reason,
            },
            Step::Done(()) => unreachable!("map_waiting is only called on Waiting"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::Image;
    use ferrometal_bmc::{BmcAddress, Credentials};

    fn host(key: &str) -> HostInfo {
        HostInfo {
            key: key.into(),
            provisioner_id: String::new(),
            bmc: BmcAddress::parse("redfish+http://127.0.0.1:1/redfish/v1/Systems/1").unwrap(),
            credentials: Credentials::new("admin", "password"),
            disable_certificate_verification: false,
            boot_mac_address: Some("AA:BB:CC:DD:EE:FF".into()),
            boot_mode: None,
            inspection_mode: InspectionMode::Fast,
            root_device_hints: None,
            automated_cleaning_mode: ferrometal_api::AutomatedCleaningMode::Disabled,
            disable_power_off: false,
        }
    }

    fn deployment() -> Deployment {
        Deployment {
            image: Some(Image {
                url: "http://img/live.iso".into(),
                checksum: None,
                checksum_type: None,
                format: None,
                oci_auth_secret_name: None,
            }),
            ..Deployment::default()
        }
    }

    #[tokio::test]
    async fn long_steps_wait_once_by_default_then_finish() {
        let p = FixtureProvisioner::new();
        let h = host("ns~a");
        let reg = p.register(&h, false).await.unwrap();
        assert_eq!(
            reg,
            Step::Done(Registration {
                provisioner_id: "fixture-ns~a".into(),
                power: PowerState::Off
            })
        );
        assert!(p.is_registered("ns~a"));

        let first = p.inspect(&h, false).await.unwrap();
        assert!(
            matches!(first, Step::Waiting { requeue_after, .. } if requeue_after == Duration::from_millis(10))
        );
        let Step::Done(Some(hw)) = p.inspect(&h, false).await.unwrap() else {
            panic!("inspection should be done")
        };
        assert_eq!(hw.nics[0].mac, "aa:bb:cc:dd:ee:ff");
        assert_eq!(hw, generated_hardware("ns~a", Some("aa:bb:cc:dd:ee:ff")));
        // The next inspection starts over.
        assert!(!p.inspect(&h, true).await.unwrap().is_done());

        assert!(p.prepare(&h).await.unwrap().is_done());
        assert!(!p.provision(&h, &deployment()).await.unwrap().is_done());
        assert_eq!(p.power("ns~a"), Some(PowerState::Off));
        assert!(p.provision(&h, &deployment()).await.unwrap().is_done());
        assert_eq!(p.power("ns~a"), Some(PowerState::On));
        assert_eq!(
            p.provisioned_image("ns~a").as_deref(),
            Some("http://img/live.iso")
        );
        assert!(!p.deprovision(&h).await.unwrap().is_done());
        assert!(p.deprovision(&h).await.unwrap().is_done());
        assert_eq!(p.power("ns~a"), Some(PowerState::Off));
        assert_eq!(p.provisioned_image("ns~a"), None);
        assert!(p.delete(&h).await.unwrap().is_done());
        assert!(!p.is_registered("ns~a"));
    }

    #[tokio::test]
    async fn power_follows_calls_and_is_done_when_already_there() {
        let p = FixtureProvisioner::new().with_waits(Method::PowerOn, 2);
        let h = host("ns~p");
        assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);
        // Already off: Done at once, no waiting.
        assert!(p.power_off(&h, PowerOffMode::Soft).await.unwrap().is_done());
        assert!(!p.power_on(&h).await.unwrap().is_done());
        assert!(!p.power_on(&h).await.unwrap().is_done());
        assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);
        assert!(p.power_on(&h).await.unwrap().is_done());
        assert_eq!(p.power_state(&h).await.unwrap(), PowerState::On);
        assert!(p.power_on(&h).await.unwrap().is_done());

        // Someone presses the button.
        p.set_power("ns~p", PowerState::Off);
        assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);

        let mut keep_on = h.clone();
        keep_on.disable_power_off = true;
        let err = p.power_off(&keep_on, PowerOffMode::Hard).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
    }

    #[tokio::test]
    async fn operations_change_power_or_boot() {
        let p = FixtureProvisioner::immediate();
        let h = host("ns~o");
        for (op, power) in [
            (Operation::ForceOn, PowerState::On),
            (Operation::ForceOff, PowerState::Off),
            (Operation::PowerCycle, PowerState::On),
            (Operation::GracefulShutdown, PowerState::Off),
            (Operation::GracefulRestart, PowerState::On),
            (Operation::ForceRestart, PowerState::On),
        ] {
            assert!(p.operation(&h, op).await.unwrap().is_done());
            assert_eq!(p.power("ns~o"), Some(power), "{op:?}");
        }
        assert_eq!(p.boot_once("ns~o"), None);
        p.operation(&h, Operation::PxeOnce).await.unwrap();
        assert_eq!(p.boot_once("ns~o"), Some("Pxe"));
        assert_eq!(p.power("ns~o"), Some(PowerState::On));
    }

    #[tokio::test]
    async fn injected_failures_are_per_host_and_method() {
        let p = FixtureProvisioner::immediate();
        let (a, b) = (host("ns~a"), host("ns~b"));
        p.fail("ns~a", Method::Register, ErrorKind::Credentials);
        let err = p.register(&a, false).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Credentials);
        assert_eq!(
            err.message,
            "injected credentials failure in register for ns~a"
        );
        // Still failing until healed; other hosts and methods are unaffected.
        assert!(p.register(&a, false).await.is_err());
        assert!(p.register(&b, false).await.is_ok());
        assert!(p.power_state(&a).await.is_ok());
        p.heal("ns~a", Method::Register);
        assert!(p.register(&a, false).await.is_ok());

        p.fail_times("ns~b", Method::Provision, ErrorKind::Unreachable, 2);
        for _ in 0..2 {
            let err = p.provision(&b, &deployment()).await.unwrap_err();
            assert_eq!(err.kind, ErrorKind::Unreachable);
        }
        assert!(p.provision(&b, &deployment()).await.unwrap().is_done());

        p.fail("ns~b", Method::PowerOn, ErrorKind::Failed);
        p.fail("ns~b", Method::PowerOff, ErrorKind::Failed);
        p.heal_all("ns~b");
        assert!(p.power_on(&b).await.is_ok());
    }

    #[tokio::test]
    async fn calls_are_logged_in_order_and_capacity_is_a_limit() {
        let p = FixtureProvisioner::immediate().with_capacity(2);
        let h = host("ns~c");
        p.register(&h, false).await.unwrap();
        p.power_state(&h).await.unwrap();
        let mut disabled = h.clone();
        disabled.inspection_mode = InspectionMode::Disabled;
        assert_eq!(p.inspect(&disabled, false).await.unwrap(), Step::Done(None));
        p.detach(&h).await.unwrap();
        assert_eq!(
            p.calls(),
            vec![
                ("ns~c".to_string(), "register"),
                ("ns~c".to_string(), "power_state"),
                ("ns~c".to_string(), "inspect"),
                ("ns~c".to_string(), "detach"),
            ]
        );
        assert_eq!(p.count("ns~c", Method::PowerState), 1);
        p.clear_calls();
        assert!(p.calls().is_empty());
        assert!(p.has_capacity(1).await);
        assert!(!p.has_capacity(2).await);

        let quiet = FixtureProvisioner::immediate().with_call_log(false);
        quiet.power_state(&h).await.unwrap();
        assert!(quiet.calls().is_empty());

        p.set_ready(false);
        assert!(!p.is_ready().await);
        let err = p.provision(&h, &Deployment::default()).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
    }

    #[test]
    fn generated_hardware_is_deterministic_and_distinct() {
        assert_eq!(
            generated_hardware("ns~x", None),
            generated_hardware("ns~x", None)
        );
        assert_ne!(
            generated_hardware("ns~x", None).nics[0].mac,
            generated_hardware("ns~y", None).nics[0].mac
        );
    }
}
