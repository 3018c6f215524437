//! The `ironic` backend: OpenStack Ironic does the BMC work (every dialect its drivers speak,
//! image writing, cleaning) and ferrometal drives it through its REST API.
//!
//! Each host is one Ironic node named `namespace~name`. Every call reads the node once (one
//! `GET /v1/nodes/{name}`), looks at its `provision_state`, and issues at most one action, so
//! calls never block and repeat safely. What the process remembers per host is small: which
//! action it issued and has not reported yet, the driver_info it wrote, and the phase the host
//! reached (manageable, available, active with which deployment). That memory is what lets a
//! host recover when Ironic loses its database: a node that vanished is created again and
//! brought back to that phase, and an active host is adopted, never deployed again.
//!
//! `provisioner` holds the backend and what every verb shares, `memo` the per-host memory,
//! `actions` the node requests several verbs share, `recover` the healing of a vanished node;
//! each verb has its own file (`register`, `inspect`, `provision` with prepare, `adopt`,
//! `deprovision`, `power`, `remove`, `firmware` for BIOS settings and firmware updates, `vmedia`
//! for DataImages, `raid` for software RAID), and this file dispatches the trait's calls to them.

pub mod client;
pub mod node;
pub mod supervisor;

mod actions;
mod adopt;
mod deprovision;
mod errors;
mod firmware;
mod inspect;
mod memo;
mod options;
mod power;
mod provision;
mod provisioner;
mod raid;
mod recover;
mod register;
mod remove;
mod vmedia;

use std::time::Instant;

use ferrometal_api::HardwareDetails;
use ferrometal_api::annotations::Operation;
use ferrometal_bmc::PowerState;

pub use client::{API_VERSION, ApiError, IronicEndpoint, LockRetry};
use errors::{Fail, vmedia_unsupported};
pub use options::IronicOptions;
pub use provisioner::IronicProvisioner;
pub use supervisor::{DEFAULT_KERNEL_PARAMS, IronicSupervisor, SupervisorConfig};

use crate::{
    Deployment, ErrorKind, FirmwareChanges, HostInfo, PowerOffMode, Provisioner, ProvisionerError,
    Registration, Result, Step,
};

#[async_trait::async_trait]
impl Provisioner for IronicProvisioner {
    fn name(&self) -> &'static str {
        "ironic"
    }

    /// Ironic's agent builds them in a manual cleaning before the deploy (`raid`), when there
    /// is an agent ramdisk to boot.
    fn builds_software_raid(&self) -> bool {
        self.driver_opts().has_ramdisk()
    }

    /// Ironic answers `/v1`; a positive answer is reused for `cache_ttl` so a reconcile does not
    /// cost an extra request.
    async fn is_ready(&self) -> bool {
        let fresh = self
            .ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed() < self.options.cache_ttl);
        if fresh {
            return true;
        }
        let ok = self.client.get("/v1").await.is_ok();
        *self.ready.lock().unwrap_or_else(|p| p.into_inner()) = ok.then(Instant::now);
        ok
    }

    /// Ironic's own count of busy nodes against `max_busy`. The count is reused for
    /// `cache_ttl`, and each grant adds one so a burst of hosts cannot all pass on one count.
    async fn has_capacity(&self, _busy: usize) -> bool {
        {
            let mut cached = self.capacity.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, count)) = cached.as_mut()
                && at.elapsed() < self.options.cache_ttl
            {
                if *count < self.options.max_busy {
                    *count += 1;
                    return true;
                }
                return false;
            }
        }
        match self.busy_nodes().await {
            Ok(count) => {
                let ok = count < self.options.max_busy;
                *self.capacity.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((Instant::now(), count + usize::from(ok)));
                ok
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot count busy Ironic nodes");
                false
            }
        }
    }

    async fn register(
        &self,
        host: &HostInfo,
        credentials_changed: bool,
    ) -> Result<Step<Registration>> {
        let r = self.do_register(host, credentials_changed).await;
        self.finish(host, r)
    }

    async fn inspect(
        &self,
        host: &HostInfo,
        _refresh: bool,
    ) -> Result<Step<Option<HardwareDetails>>> {
        let r = self.do_inspect(host).await;
        self.finish(host, r)
    }

    async fn prepare(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_prepare(host).await;
        self.finish(host, r)
    }

    async fn change_firmware(&self, host: &HostInfo, changes: &FirmwareChanges) -> Result<Step> {
        let r = self.do_change_firmware(host, changes).await;
        self.finish(host, r)
    }

    async fn provision(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        let r = self.do_provision(host, deployment).await;
        self.finish(host, r)
    }

    async fn deprovision(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_deprovision(host).await;
        self.finish(host, r)
    }

    async fn adopt(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        let r = self.do_adopt(host, deployment).await;
        self.finish(host, r)
    }

    /// Ironic's view of the power (one request). While a vanished node is being brought back
    /// the answer is `Unknown`, which changes nothing in the host's status.
    async fn power_state(&self, host: &HostInfo) -> Result<PowerState> {
        let mut memo = self.memo(&host.key).await;
        match self.steady(host, &mut memo).await {
            Ok(Some(node)) => Ok(node::power_of(&node)),
            Ok(None) | Err(Fail::Api(ApiError::Locked(_), _)) => Ok(PowerState::Unknown),
            Err(e) => Err(self.error(host, e)),
        }
    }

    async fn power_on(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_power(host, "power on").await;
        self.finish(host, r)
    }

    async fn power_off(&self, host: &HostInfo, mode: PowerOffMode) -> Result<Step> {
        if host.disable_power_off {
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "host {} has disablePowerOff set: its power is never switched off",
                    host.key
                ),
            ));
        }
        let target = match mode {
            PowerOffMode::Soft => "soft power off",
            PowerOffMode::Hard => "power off",
        };
        let r = self.do_power(host, target).await;
        self.finish(host, r)
    }

    async fn operation(&self, host: &HostInfo, op: Operation) -> Result<Step> {
        if host.disable_power_off && matches!(op, Operation::ForceOff | Operation::GracefulShutdown)
        {
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "host {} has disablePowerOff set: {} would switch it off",
                    host.key,
                    op.as_str()
                ),
            ));
        }
        let r = self.do_operation(host, op).await;
        self.finish(host, r)
    }

    async fn boot_device(
        &self,
        host: &HostInfo,
        device: Option<ferrometal_bmc::BootDevice>,
        _efi: bool,
    ) -> Result<()> {
        use ferrometal_bmc::BootDevice as B;
        // Ironic clears a one-time device itself at the next boot; the node's boot mode
        // capability, not the request, says UEFI or BIOS.
        let Some(device) = device else {
            return Ok(());
        };
        let name = match device {
            B::Pxe => "pxe",
            B::Hdd => "disk",
            B::Cd => "cdrom",
            B::BiosSetup => "bios",
            B::UefiHttp => {
                return Err(ProvisionerError::new(
                    ErrorKind::Unsupported,
                    "Ironic's boot device API has no UEFI HTTP boot",
                ));
            }
        };
        let r = self.do_boot_device(host, name).await;
        self.finish(host, r.map(Step::Done))?;
        Ok(())
    }

    async fn data_image(&self, host: &HostInfo, url: Option<&str>) -> Result<Step> {
        let r = self.do_data_image(host, url).await;
        self.finish(host, r)
    }

    async fn virtual_media(&self, host: &HostInfo, _url: Option<&str>) -> Result<()> {
        Err(vmedia_unsupported(host))
    }

    async fn media_state(&self, host: &HostInfo) -> Result<ferrometal_bmc::MediaStatus> {
        Err(vmedia_unsupported(host))
    }

    async fn detach(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_remove(host).await;
        self.finish(host, r)
    }

    async fn delete(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_remove(host).await;
        self.finish(host, r)
    }
}
