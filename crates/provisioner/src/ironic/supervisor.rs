//! Ironic as an implementation detail of standalone ferrometal: a config generated under the
//! data directory (SQLite, no message bus, one all-in-one process, HTTP basic auth with
//! generated credentials), the schema created once, the process started, watched, restarted
//! with backoff when it dies, and stopped with the supervisor.
//!
//! Its API listens on loopback unless told otherwise: the agent ramdisk (IPA) on a host must
//! reach it (lookup, heartbeats, inspection data) and Ironic must reach the agent, so with a
//! ramdisk it listens on the provisioning network's address, as metal3's Ironic does. The
//! ISOs Ironic builds for virtual media land in `<dir>/http`, which the caller serves to BMCs
//! at `http_url` (metal3's httpd).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::client::IronicEndpoint;

/// How to run Ironic.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Everything Ironic keeps lives under `<data_dir>/ironic`.
    pub data_dir: PathBuf,
    /// The `ironic` program; default: on PATH, else in `$VIRTUAL_ENV`/`$FERROMETAL_VENV`/`.venv`.
    pub program: Option<PathBuf>,
    /// TCP port; default: a free one.
    pub port: Option<u16>,
    /// Where the API listens (default 127.0.0.1): a provisioning network address when hosts'
    /// agent ramdisks must reach it.
    pub listen: IpAddr,
    /// Ironic's API as the agent ramdisk reaches it (`ipa-api-url`, inspection callbacks).
    /// Default: `http://LISTEN:PORT`.
    pub callback_url: Option<String>,
    /// Where BMCs fetch what Ironic publishes under `<dir>/http` (virtual media ISOs, config
    /// drives): the caller serves that directory there.
    pub http_url: Option<String>,
    /// Kernel parameters of the agent ramdisk's boot (Ironic's `kernel_append_params`).
    pub kernel_params: String,
    /// How long Ironic may take to answer `/v1` after a start.
    pub start_timeout: Duration,
    /// First pause before a restart, doubled after each quick death up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

/// metal3's default (`console=ttyS0`) plus Ironic's own: the agent logs to the serial console.
pub const DEFAULT_KERNEL_PARAMS: &str = "nofb vga=normal console=tty0 console=ttyS0,115200";

impl SupervisorConfig {
    /// The directory Ironic publishes into (serve it at `http_url`).
    pub fn http_root(&self) -> PathBuf {
        self.data_dir.join("ironic").join("http")
    }

    pub fn new(data_dir: impl Into<PathBuf>) -> SupervisorConfig {
        SupervisorConfig {
            data_dir: data_dir.into(),
            program: None,
            port: None,
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            callback_url: None,
            http_url: None,
            kernel_params: DEFAULT_KERNEL_PARAMS.to_string(),
            start_timeout: Duration::from_secs(120),
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SupervisorError(pub String);

/// A running, supervised Ironic. Dropping it stops Ironic.
pub struct IronicSupervisor {
    endpoint: IronicEndpoint,
    dir: PathBuf,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    pid: Arc<AtomicU32>,
    starts: Arc<AtomicU32>,
}

/// Finds `ironic` on PATH or in the project's virtualenv.
pub fn find_program() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("ironic"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        ["VIRTUAL_ENV", "FERROMETAL_VENV"]
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from)
            .chain([PathBuf::from(".venv")])
            .map(|v| v.join("bin/ironic"))
            .find(|p| p.is_file())
    })
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents.as_bytes())
}

fn free_port(ip: IpAddr) -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind((ip, 0))?.local_addr()?.port())
}

/// The generated credentials, reused across restarts of ferrometal.
fn credentials(dir: &Path) -> Result<(String, String), SupervisorError> {
    let file = dir.join("credentials");
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Some((user, password)) = text.trim().split_once(':')
        && !password.is_empty()
    {
        return Ok((user.to_string(), password.to_string()));
    }
    let password: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    let user = "ferrometal".to_string();
    write_private(&file, &format!("{user}:{password}\n"))
        .map_err(|e| SupervisorError(format!("writing {}: {e}", file.display())))?;
    Ok((user, password))
}

/// What varies in the generated configuration.
#[derive(Debug, Clone)]
pub struct ConfigValues<'a> {
    pub dir: &'a Path,
    pub htpasswd: &'a Path,
    pub listen: IpAddr,
    pub port: u16,
    pub callback_url: &'a str,
    pub http_url: Option<&'a str>,
    pub kernel_params: &'a str,
}

/// Debian's isolinux and syslinux files, which Ironic needs to build BIOS-bootable ISOs.
const ISOLINUX_BIN: &str = "/usr/lib/ISOLINUX/isolinux.bin";
const LDLINUX_C32: &str = "/usr/lib/syslinux/modules/bios/ldlinux.c32";

/// The Ironic configuration for one standalone process under `dir`.
pub fn config_text(v: &ConfigValues<'_>) -> String {
    let d = v.dir.display();
    let port = v.port;
    let host_ip = v.listen;
    let callback = v.callback_url;
    // Without a served directory nothing is published: a URL nobody answers would only
    // turn into a BMC's download error.
    let http_url = v.http_url.unwrap_or("http://127.0.0.1:9/unused");
    let kernel_params = v.kernel_params;
    format!(
        "[DEFAULT]
auth_strategy = http_basic
http_basic_auth_user_file = {htpasswd}
rpc_transport = none
host = ferrometal
use_stderr = true
enabled_hardware_types = fake-hardware,redfish,ipmi,idrac
enabled_boot_interfaces = fake,ipxe,pxe,redfish-virtual-media,redfish-https,idrac-redfish-virtual-media
enabled_deploy_interfaces = fake,direct,ramdisk,custom-agent
enabled_power_interfaces = fake,redfish,ipmitool,idrac-redfish
enabled_management_interfaces = fake,redfish,ipmitool,idrac-redfish
enabled_inspect_interfaces = fake,no-inspect,redfish,idrac-redfish,agent
enabled_bios_interfaces = fake,no-bios,redfish,idrac-redfish
enabled_raid_interfaces = fake,no-raid,agent,redfish,idrac-redfish
enabled_vendor_interfaces = fake,no-vendor,ipmitool,redfish,idrac-redfish
enabled_firmware_interfaces = fake,no-firmware,redfish
enabled_console_interfaces = fake,no-console
enabled_rescue_interfaces = fake,no-rescue,agent
enabled_network_interfaces = noop
default_network_interface = noop
isolinux_bin = {ISOLINUX_BIN}
ldlinux_c32 = {LDLINUX_C32}
[api]
host_ip = {host_ip}
port = {port}
[conductor]
automated_clean = false
[database]
connection = sqlite:///{d}/ironic.sqlite
[dhcp]
dhcp_provider = none
[service_catalog]
endpoint_override = {callback}
[deploy]
http_root = {d}/http
http_url = {http_url}
external_callback_url = {callback}
# metal3's default: the agent stays up between inspection, cleaning and deployment instead
# of a reboot into it for each.
fast_track = true
# metal3's metadata cleaning: partition tables and signatures wiped, no full-disk erase.
erase_devices_priority = 0
erase_devices_metadata_priority = 10
[agent]
# Ironic fetches the agent's logs after each deploy into a local directory when asked;
# keep them only for failures.
deploy_logs_collect = on_failure
deploy_logs_storage_backend = local
deploy_logs_local_path = {d}/agent-logs
[redfish]
kernel_append_params = {kernel_params}
# How soon a BIOS step (and a firmware update) is seen done after the node's reboot; Ironic's
# default is a minute.
firmware_update_status_interval = 15
[pxe]
tftp_root = {d}/tftp
kernel_append_params = {kernel_params}
[oslo_concurrency]
lock_path = {d}/locks
",
        htpasswd = v.htpasswd.display()
    )
}

impl IronicSupervisor {
    /// Writes the config, prepares the database, starts Ironic and waits for its API.
    pub async fn start(config: SupervisorConfig) -> Result<IronicSupervisor, SupervisorError> {
        let program = config
            .program
            .clone()
            .or_else(find_program)
            .ok_or_else(|| SupervisorError("the ironic program is not on PATH nor in a virtualenv; install it (scripts/setup-ironic.sh) or pass its path".into()))?;
        let dir = config.data_dir.join("ironic");
        for sub in ["", "http", "tftp", "locks", "agent-logs"] {
            std::fs::create_dir_all(dir.join(sub))
                .map_err(|e| SupervisorError(format!("creating {}: {e}", dir.display())))?;
        }
        let (user, password) = credentials(&dir)?;
        let hash = bcrypt::hash(&password, 8)
            .map_err(|e| SupervisorError(format!("hashing the Ironic password: {e}")))?;
        let htpasswd = dir.join("htpasswd");
        write_private(&htpasswd, &format!("{user}:{hash}\n"))
            .map_err(|e| SupervisorError(format!("writing {}: {e}", htpasswd.display())))?;
        let port = match config.port {
            Some(p) => p,
            None => free_port(config.listen)
                .map_err(|e| SupervisorError(format!("no free port: {e}")))?,
        };
        let conf = dir.join("ironic.conf");
        let host = match config.listen {
            ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            ip => ip,
        };
        let url = match host {
            IpAddr::V6(ip) => format!("http://[{ip}]:{port}"),
            IpAddr::V4(ip) => format!("http://{ip}:{port}"),
        };
        let callback_url = config.callback_url.clone().unwrap_or_else(|| url.clone());
        let text = config_text(&ConfigValues {
            dir: &dir,
            htpasswd: &htpasswd,
            listen: config.listen,
            port,
            callback_url: &callback_url,
            http_url: config.http_url.as_deref(),
            kernel_params: &config.kernel_params,
        });
        write_private(&conf, &text)
            .map_err(|e| SupervisorError(format!("writing {}: {e}", conf.display())))?;

        // The schema once; later starts only upgrade it (a no-op when current).
        let dbsync = program.with_file_name("ironic-dbsync");
        let verb = if dir.join("ironic.sqlite").exists() {
            "upgrade"
        } else {
            "create_schema"
        };
        let out = Command::new(&dbsync)
            .arg("--config-file")
            .arg(&conf)
            .arg(verb)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|e| SupervisorError(format!("running {}: {e}", dbsync.display())))?;
        if !out.status.success() {
            return Err(SupervisorError(format!(
                "ironic-dbsync {verb} failed: {}",
                tail(&String::from_utf8_lossy(&out.stderr), 20)
            )));
        }

        let endpoint = IronicEndpoint::new(url).with_basic_auth(user, password);
        let run = Runner {
            program,
            conf,
            log: dir.join("ironic.log"),
            url: endpoint.url.clone(),
            start_timeout: config.start_timeout,
        };
        let mut child = run.spawn()?;
        if let Err(e) = run.wait_ready(&mut child).await {
            let _ = child.kill().await;
            return Err(e);
        }
        let pid = Arc::new(AtomicU32::new(child.id().unwrap_or(0)));
        let starts = Arc::new(AtomicU32::new(1));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(supervise(
            run,
            child,
            stopped,
            pid.clone(),
            starts.clone(),
            (config.min_backoff, config.max_backoff),
        ));
        tracing::info!(url = %endpoint.url, "ironic started");
        Ok(IronicSupervisor {
            endpoint,
            dir,
            stop,
            task: Some(task),
            pid,
            starts,
        })
    }

    /// Where Ironic answers, with the generated credentials.
    pub fn endpoint(&self) -> IronicEndpoint {
        self.endpoint.clone()
    }

    /// Ironic's directory (config, SQLite file, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current process id, if running.
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    /// How many times Ironic was started (1 + restarts).
    pub fn starts(&self) -> u32 {
        self.starts.load(Ordering::SeqCst)
    }

    /// Stops Ironic and waits until it has exited.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for IronicSupervisor {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            // The child is spawned with kill_on_drop: aborting the task kills it.
            task.abort();
        }
    }
}

struct Runner {
    program: PathBuf,
    conf: PathBuf,
    log: PathBuf,
    url: String,
    start_timeout: Duration,
}

/// Asks the kernel to send Ironic SIGTERM when the process that started it dies, however it
/// dies (`kill -9` included), so it never outlives serve. SIGTERM, not SIGKILL: Ironic's main
/// process then stops its own workers. The signal follows the spawning thread; spawns happen
/// on the runtime's worker threads, which live as long as the process.
fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    #[allow(
        unsafe_code,
        reason = "pre_exec runs between fork and exec; prctl is only there"
    )]
    // SAFETY: prctl is async-signal-safe and touches nothing shared with the parent.
    unsafe {
        let parent = std::process::id() as libc::pid_t;
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "the parent exited before Ironic started",
                ));
            }
            Ok(())
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

impl Runner {
    fn spawn(&self) -> Result<Child, SupervisorError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| SupervisorError(format!("opening {}: {e}", self.log.display())))?;
        let err = log
            .try_clone()
            .map_err(|e| SupervisorError(format!("{}: {e}", self.log.display())))?;
        let mut cmd = Command::new(&self.program);
        cmd.arg("--config-file")
            .arg(&self.conf)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            .kill_on_drop(true);
        die_with_parent(&mut cmd);
        cmd.spawn()
            .map_err(|e| SupervisorError(format!("starting {}: {e}", self.program.display())))
    }

    async fn wait_ready(&self, child: &mut Child) -> Result<(), SupervisorError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("HTTP client");
        let deadline = Instant::now() + self.start_timeout;
        loop {
            if let Ok(r) = http.get(format!("{}/v1", self.url)).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(SupervisorError(format!(
                    "ironic exited ({status}) before answering; log: {}",
                    tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 20)
                )));
            }
            if Instant::now() > deadline {
                return Err(SupervisorError(format!(
                    "ironic did not answer at {} within {}s",
                    self.url,
                    self.start_timeout.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn supervise(
    run: Runner,
    mut child: Child,
    mut stopped: watch::Receiver<bool>,
    pid: Arc<AtomicU32>,
    starts: Arc<AtomicU32>,
    (min_backoff, max_backoff): (Duration, Duration),
) {
    let mut backoff = min_backoff;
    let mut started = Instant::now();
    loop {
        tokio::select! {
            status = child.wait() => {
                pid.store(0, Ordering::SeqCst);
                if *stopped.borrow() {
                    return;
                }
                // A process that ran a while died of something new: start over quickly.
                if started.elapsed() > Duration::from_secs(60) {
                    backoff = min_backoff;
                }
                tracing::warn!(status = ?status.ok(), retry_in = ?backoff, "ironic exited; restarting");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = stopped.changed() => return,
                }
                backoff = (backoff * 2).min(max_backoff);
                match run.spawn() {
                    Ok(mut c) => {
                        pid.store(c.id().unwrap_or(0), Ordering::SeqCst);
                        starts.fetch_add(1, Ordering::SeqCst);
                        started = Instant::now();
                        if let Err(e) = run.wait_ready(&mut c).await {
                            tracing::warn!(error = %e, "restarted ironic is not answering");
                        }
                        child = c;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot restart ironic");
                        // Leave a dead child in place so the loop comes round again.
                        child = match Command::new("true").kill_on_drop(true).spawn() {
                            Ok(c) => c,
                            Err(_) => return,
                        };
                    }
                }
            }
            _ = stopped.changed() => {
                terminate(&mut child).await;
                pid.store(0, Ordering::SeqCst);
                return;
            }
        }
    }
}

/// SIGTERM so Ironic releases its node locks, then SIGKILL if it lingers.
async fn terminate(child: &mut Child) {
    if let Some(id) = child.id() {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(id.to_string())
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.kill().await;
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
