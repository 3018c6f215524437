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
//!   `VirtualMedia.InsertMedia` / `VirtualMedia.EjectMedia` actions
//!
//! Control API (no auth, not counted): `GET /emulator`, `GET /emulator/counters`,
//! `POST /emulator/counters/reset`, `GET /emulator/systems/{id}`,
//! `GET|PUT|DELETE /emulator/systems/{id}/fault`.
//!
//! The request path is kept cheap on purpose (benchmarks drive 10,000 systems):
//! state lives in a `Vec` indexed by the number in the system ID, counters are
//! atomics and each system has its own short-held mutex.

mod control;
mod hostile;
mod inventory;
mod redfish;
mod resp;
mod server;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use state::{BootOverride, PowerState, SystemSnapshot, VirtualMediaSnapshot};

/// How the emulated fleet behaves.
#[derive(Clone)]
pub struct EmulatorConfig {
    /// Number of systems, named `sys-0` .. `sys-{systems-1}`.
    pub systems: usize,
    /// Time a power transition takes to land after a reset request (0 = immediate).
    pub power_delay: Duration,
    pub username: String,
    pub password: String,
    /// Leave `PowerCycle` out of `ResetType@Redfish.AllowableValues` (and reject it),
    /// as some real BMCs do.
    pub omit_power_cycle: bool,
    /// Power state every system starts in.
    pub initial_power: PowerState,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            systems: 20,
            power_delay: Duration::ZERO,
            username: "admin".into(),
            password: "password".into(),
            omit_power_cycle: false,
            initial_power: PowerState::Off,
        }
    }
}

// Hand-written so the password never reaches a log line.
impl std::fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("systems", &self.systems)
            .field("power_delay", &self.power_delay)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("omit_power_cycle", &self.omit_power_cycle)
            .field("initial_power", &self.initial_power)
            .finish()
    }
}

/// A fault injected into every request for one system's resources (system,
/// inventory, manager, virtual media).
///
/// JSON form (also the control endpoint's body):
/// `{"kind":"http500"|"hang"|"unauthorized"|"connection_reset"|"latency","latency_ms":N}`,
/// and the hostile BMCs: `{"kind":"foreign_links"|"redirect","origin":"http://host:port"}`,
/// `{"kind":"huge_body"|"long_error","bytes":N}`, `{"kind":"many_members","count":N}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FaultSpec", into = "FaultSpec")]
pub enum Fault {
    /// Answer 500 with a Redfish error body.
    Http500,
    /// Never answer; the request is held until the client gives up.
    Hang,
    /// Answer 401 whatever the credentials.
    Unauthorized,
    /// Close the TCP connection (with a reset) without any response.
    ConnectionReset,
    /// Answer normally after this delay.
    Latency(Duration),
    /// Every link and action target in the answers names this origin instead of ours.
    ForeignLinks(String),
    /// Answer every request with a 307 to the same path at this origin.
    Redirect(String),
    /// Answer 200 with a JSON body of this many bytes.
    HugeBody(u64),
    /// Answer 500 with a Redfish error whose message is this many bytes long.
    LongError(u64),
    /// Every collection in the answers lists its first member this many times.
    ManyMembers(u64),
}

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FaultKind {
    #[default]
    Http500,
    Hang,
    Unauthorized,
    ConnectionReset,
    Latency,
    ForeignLinks,
    Redirect,
    HugeBody,
    LongError,
    ManyMembers,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultSpec {
    kind: FaultKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
}

impl TryFrom<FaultSpec> for Fault {
    type Error = String;
    fn try_from(spec: FaultSpec) -> Result<Self, String> {
        Ok(match spec.kind {
            FaultKind::Http500 => Fault::Http500,
            FaultKind::Hang => Fault::Hang,
            FaultKind::Unauthorized => Fault::Unauthorized,
            FaultKind::ConnectionReset => Fault::ConnectionReset,
            FaultKind::Latency => match spec.latency_ms {
                Some(ms) => Fault::Latency(Duration::from_millis(ms)),
                None => return Err("fault kind \"latency\" needs \"latency_ms\"".into()),
            },
            FaultKind::ForeignLinks | FaultKind::Redirect => {
                let Some(origin) = spec.origin else {
                    return Err("this fault kind needs \"origin\"".into());
                };
                if matches!(spec.kind, FaultKind::Redirect) {
                    Fault::Redirect(origin)
                } else {
                    Fault::ForeignLinks(origin)
                }
            }
            FaultKind::HugeBody | FaultKind::LongError => match spec.bytes {
                // Bounded so a typo cannot make the emulator allocate the machine away.
                Some(n) if n <= 1 << 30 => {
                    if matches!(spec.kind, FaultKind::HugeBody) {
                        Fault::HugeBody(n)
                    } else {
                        Fault::LongError(n)
                    }
                }
                _ => return Err("this fault kind needs \"bytes\" (at most 1 GiB)".into()),
            },
            FaultKind::ManyMembers => match spec.count {
                Some(n) if n <= 1_000_000 => Fault::ManyMembers(n),
                _ => {
                    return Err(
                        "fault kind \"many_members\" needs \"count\" (at most 1,000,000)".into(),
                    );
                }
            },
        })
    }
}

impl From<Fault> for FaultSpec {
    fn from(fault: Fault) -> Self {
        let spec = |kind| FaultSpec {
            kind,
            ..FaultSpec::default()
        };
        match fault {
            Fault::Http500 => spec(FaultKind::Http500),
            Fault::Hang => spec(FaultKind::Hang),
            Fault::Unauthorized => spec(FaultKind::Unauthorized),
            Fault::ConnectionReset => spec(FaultKind::ConnectionReset),
            Fault::Latency(d) => FaultSpec {
                latency_ms: Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                ..spec(FaultKind::Latency)
            },
            Fault::ForeignLinks(origin) => FaultSpec {
                origin: Some(origin),
                ..spec(FaultKind::ForeignLinks)
            },
            Fault::Redirect(origin) => FaultSpec {
                origin: Some(origin),
                ..spec(FaultKind::Redirect)
            },
            Fault::HugeBody(n) => FaultSpec {
                bytes: Some(n),
                ..spec(FaultKind::HugeBody)
            },
            Fault::LongError(n) => FaultSpec {
                bytes: Some(n),
                ..spec(FaultKind::LongError)
            },
            Fault::ManyMembers(n) => FaultSpec {
                count: Some(n),
                ..spec(FaultKind::ManyMembers)
            },
        }
    }
}

/// Request counts by HTTP method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodCounts {
    pub get: u64,
    pub post: u64,
    pub patch: u64,
    pub delete: u64,
    /// Any other method (PUT, HEAD, ...).
    pub other: u64,
}

impl MethodCounts {
    pub fn total(&self) -> u64 {
        self.get + self.post + self.patch + self.delete + self.other
    }
}

/// Redfish request counters (control endpoint requests are not counted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Every Redfish request, including ones rejected or faulted.
    pub total: u64,
    pub by_method: MethodCounts,
    /// Requests for each system's resources (system, inventory, manager,
    /// virtual media), indexed by system index.
    pub systems: Vec<MethodCounts>,
    /// Sessions created and not yet deleted.
    pub open_sessions: u64,
}

impl Counters {
    /// Counts for one system (zero if the index is out of range).
    pub fn system(&self, index: usize) -> MethodCounts {
        self.systems.get(index).copied().unwrap_or_default()
    }
}

/// A running emulator. Dropping it stops the listener too; [`Emulator::shutdown`]
/// also waits for that.
pub struct Emulator {
    app: Arc<server::App>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Emulator {
    /// Binds `listen` (port 0 picks a free port) and starts serving.
    pub async fn start(config: EmulatorConfig, listen: SocketAddr) -> std::io::Result<Emulator> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let app = Arc::new(server::App::new(config));
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
