//! A fast, stateful Redfish BMC fleet emulator.
//!
//! Many emulated systems sit behind one HTTP listener. Each system has its own
//! power state, boot override, virtual CD and inventory, plus an injectable
//! fault. A control API under `/emulator/` (no auth) exposes state, counters and
//! faults so tests and benchmarks can observe what a client really did.
//!
//! Redfish surface (Basic auth or an `X-Auth-Token` session on all but the
//! service root and session creation):
//!
//! - `/redfish/v1`, `/redfish/v1/SessionService[/Sessions[/{n}]]`
//! - `/redfish/v1/Systems[/sys-N]` (GET, PATCH `Boot` with `If-Match`),
//!   `.../Actions/ComputerSystem.Reset`, `.../Processors/CPUn`, `.../Memory/DIMMn`,
//!   `.../EthernetInterfaces/NICn`, `.../Storage/1/Drives/Diskn`; a system GET takes
//!   `$expand=.` or `*` with `($levels=N)` (N <= 3) and then carries its inventory inline
//! - `/redfish/v1/Managers[/bmc-sys-N]`, `.../VirtualMedia/Cd` with the
//!   `VirtualMedia.InsertMedia` / `VirtualMedia.EjectMedia` actions; InsertMedia fetches the
//!   image first and answers an unserved URL with sushy-tools' error (400, 500 or 502)
//! - `/redfish/v1/Systems/sys-N/Bios[/Settings]` and the attribute registry under
//!   `/redfish/v1/Registries`: BIOS settings, pending ones applied at the next boot
//! - `/redfish/v1/Chassis[/chassis-sys-N]`, `.../NetworkAdapters/NIC.Slot.1`: the system's
//!   network adapter and its firmware version
//! - `/redfish/v1/UpdateService` with `UpdateService.SimpleUpdate` (a system's BIOS, its
//!   manager's firmware or its network adapter's) and `/redfish/v1/TaskService/Tasks[/{n}]`: the update runs as a task
//!   (see `update` for the versions it installs and the images that fail)
//! - `/redfish/v1/EventService/Subscriptions[/{n}]`: event subscriptions (GET, POST, DELETE;
//!   `HttpHeaders` write-only)
//! - `/redfish/v1/Systems/sys-N/Storage/1/Volumes[/{n}]`: hardware RAID volumes, created with a
//!   POST (`RAIDType`, optional `Links.Drives` and `CapacityBytes`) and deleted with a DELETE
//!
//! Control API (no auth, not counted): `GET /emulator`, `GET /emulator/counters`,
//! `POST /emulator/counters/reset`, `GET /emulator/systems/{id}`,
//! `GET|PUT|DELETE /emulator/systems/{id}/fault`.
//!
//! The request path is kept cheap on purpose (benchmarks drive 10,000 systems):
//! state lives in a `Vec` indexed by the number in the system ID, counters are
//! atomics and each system has its own short-held mutex.

// Imports go one way: fault, counters, media and resp are leaves; state, config, inventory,
// chassis, subscriptions, update and volumes build on them; app holds the shared state; control,
// event_service, raid and redfish answer requests; server routes.
mod app;
mod bios;
mod chassis;
mod config;
mod control;
mod counters;
mod event_service;
mod fault;
mod hostile;
mod inventory;
mod media;
mod raid;
mod redfish;
mod resp;
mod server;
mod state;
mod subscriptions;
mod update;
mod volumes;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::EmulatorConfig;
pub use counters::{Counters, MethodCounts};
pub use fault::Fault;
pub use state::{BootOverride, PowerState, SystemSnapshot, VirtualMediaSnapshot};
pub use subscriptions::Subscription;

/// A running emulator. Dropping it stops the listener too; [`Emulator::shutdown`]
/// also waits for that.
pub struct Emulator {
    app: Arc<app::App>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Emulator {
    /// Binds `listen` (port 0 picks a free port) and starts serving.
    pub async fn start(config: EmulatorConfig, listen: SocketAddr) -> std::io::Result<Emulator> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let app = Arc::new(app::App::new(config));
        let task = tokio::spawn(server::accept_loop(listener, app.clone()));
        tracing::info!(%addr, systems = app.systems.len(), "Redfish emulator listening");
        Ok(Emulator { app, addr, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, no trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn system_count(&self) -> usize {
        self.app.systems.len()
    }

    /// The Redfish `Id` of system `index`, e.g. `sys-0`.
    pub fn system_id(&self, index: usize) -> String {
        state::system_id(index)
    }

    /// Full URL of system `index`'s ComputerSystem resource.
    pub fn system_url(&self, index: usize) -> String {
        format!("http://{}/redfish/v1/Systems/sys-{index}", self.addr)
    }

    /// Full URL of system `index`'s manager (BMC) resource.
    pub fn manager_url(&self, index: usize) -> String {
        format!("http://{}/redfish/v1/Managers/bmc-sys-{index}", self.addr)
    }

    /// Current state of system `index` (pending power transitions that are due
    /// are applied first). Panics if `index` is out of range.
    pub fn state(&self, index: usize) -> SystemSnapshot {
        self.app.systems[index].snapshot(index, std::time::Instant::now())
    }

    /// The EventService's subscriptions, with the HTTP headers a read never shows.
    pub fn subscriptions(&self) -> Vec<Subscription> {
        self.app.subscriptions().snapshot()
    }

    /// Sets or clears system `index`'s fault. Panics if `index` is out of range.
    pub fn set_fault(&self, index: usize, fault: Option<Fault>) {
        self.app.systems[index].set_fault(fault);
    }

    pub fn counters(&self) -> Counters {
        self.app.counters()
    }

    pub fn reset_counters(&self) {
        self.app.reset_counters();
    }

    /// Stops accepting, drops every open connection (including hung requests)
    /// and waits for the listener task to end.
    pub async fn shutdown(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}
