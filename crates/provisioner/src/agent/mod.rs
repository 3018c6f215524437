//! The server side of ferrometal's deploy agent: per host and per boot, a session that builds
//! the boot ISO (the ramdisk with this boot's configuration), hands the agent its instructions
//! and keeps what it reports, until the backend that started it ends it.
//!
//! Each boot gets its own token (bound to that host and that boot) and its own unguessable
//! media name; both stop working when the session ends. The token reaches the host only inside
//! the ISO and travels back only in the Authorization header: it is never in a URL, a log line,
//! an Event or status. The HTTP side (the agent API over HTTPS, the media over HTTP for BMCs)
//! is the binary's; it calls `instruction`, `report`, `config_drive` and `media_path`.
//!
//! `session` is the per-boot bookkeeping (pure), `media` writes ISOs and config drives.

pub mod media;
pub mod session;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrometal_agent::protocol::{AgentConfig, Hardware, Instruction, Report};
use rand::Rng;

pub use session::{Ending, Purpose, Session};

/// Where the agent service finds its ramdisk and how hosts and BMCs reach it.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The ramdisk's ISO (`scripts/agent-ramdisk.sh` builds `agent.iso`).
    pub ramdisk_iso: PathBuf,
    /// Per-boot ISOs and scratch space (emptied at start).
    pub work_dir: PathBuf,
    /// Deploys the agent finished, kept across restarts until the backend ends them, so a
    /// process killed between the agent's report and the host's boot into the disk does not
    /// write the image again.
    pub state_dir: PathBuf,
    /// The agent API's base URL as hosts reach it (HTTPS), e.g. `https://10.0.2.2:6385`.
    pub api_url: String,
    /// The media server's base URL as BMCs reach it (HTTP), e.g. `http://127.0.0.1:6386`.
    pub media_url: String,
    /// PEM of the CA that signed the agent API's certificate.
    pub ca_pem: String,
    /// PEM certificates the agent trusts for image downloads besides the system's roots.
    pub image_ca_pem: Option<String>,
    /// How long in-band inspection listens for LLDP (zero: not at all).
    pub lldp_wait: Duration,
    /// How long a booted host may take to call the API for the first time.
    pub boot_timeout: Duration,
    /// How long the agent may stay silent once it called (a deploy's download included).
    pub silence_timeout: Duration,
}

/// Data for a deploy's config drive.
#[derive(Debug, Clone, Default)]
pub struct ConfigDriveData {
    pub meta_data: serde_json::Value,
    pub user_data: Option<String>,
    pub network_data: Option<serde_json::Value>,
}

/// What one boot's media carry besides the agent.
#[derive(Debug, Clone, Default)]
pub struct BootData {
    /// The deploy's config drive, served to the agent to write after the image.
    pub config_drive: Option<ConfigDriveData>,
    /// The ramdisk's own addressing (network_data.json); DHCP when `None`.
    pub network_data: Option<serde_json::Value>,
}

/// A session's boot media, as the backend sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Media {
    Building,
    /// The URL to insert into the BMC's virtual CD.
    Ready(String),
    Failed(String),
}

/// What a backend reads of a session.
#[derive(Debug, Clone)]
pub struct Progress {
    pub boot: String,
    pub media: Media,
    /// The agent called at least once.
    pub called: bool,
    pub ending: Option<Ending>,
    pub hardware: Option<Hardware>,
    pub timings: Vec<(String, f64)>,
    pub write_mb_per_s: Option<f64>,
    pub root_disk: Option<String>,
}

/// A refused agent API request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error("unknown or expired agent token")]
    Token,
    #[error("no config drive for this boot")]
    NoConfigDrive,
}

struct Entry {
    session: Session,
    fingerprint: String,
    token: String,
    media_name: String,
    media: Media,
    config_drive: Option<Vec<u8>>,
}

#[derive(Default)]
struct State {
    /// By host key.
    entries: HashMap<String, Entry>,
    /// Token -> host key.
    tokens: HashMap<String, String>,
    /// Media name -> file, for the media server.
    files: HashMap<String, PathBuf>,
}

pub struct AgentService {
    options: AgentOptions,
    state: Mutex<State>,
    /// The ramdisk ISO's tree, extracted once; each boot's ISO is written from it.
    tree: tokio::sync::OnceCell<Result<PathBuf, String>>,
}

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

impl AgentService {
    pub fn new(options: AgentOptions) -> std::io::Result<Arc<AgentService>> {
        let _ = std::fs::remove_dir_all(&options.work_dir);
        std::fs::create_dir_all(options.work_dir.join("media"))?;
        std::fs::create_dir_all(&options.state_dir)?;
        Ok(Arc::new(AgentService {
            options,
            state: Mutex::new(State::default()),
            tree: tokio::sync::OnceCell::new(),
        }))
    }

    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a session for `key` unless one with the same `fingerprint` (what it is for) runs;
    /// a session for something else is ended first. The boot media are built in the background.
    pub fn begin(
        self: &Arc<Self>,
        key: &str,
        fingerprint: &str,
        purpose: Purpose,
        boot: BootData,
    ) -> Progress {
        let BootData {
            config_drive,
            network_data,
        } = boot;
        let mut state = self.lock();
        if let Some(entry) = state.entries.get(key) {
            if entry.fingerprint == fingerprint {
                return self.view(entry);
            }
            self.remove(&mut state, key);
        }
        if !matches!(purpose, Purpose::Deploy { .. }) {
            self.forget_deploy(key);
        }
        if let Some(boot) = self.finished_deploy(key, fingerprint) {
            // Written before a restart: the image is on the disk, only the boot into it is left.
            let mut session = Session::new(boot, purpose, Instant::now());
            session.ending = Some(Ending::Succeeded);
            // No boot media and no token: no agent will call for this session.
            let entry = Entry {
                session,
                fingerprint: fingerprint.to_string(),
                token: String::new(),
                media_name: String::new(),
                media: Media::Ready(String::new()),
                config_drive: None,
            };
            let view = self.view(&entry);
            state.entries.insert(key.to_string(), entry);
            return view;
        }
        let boot = random_hex(6);
        let token = random_hex(32);
        let media_name = format!("{}.iso", random_hex(16));
        let mut purpose = purpose;
        if let (Purpose::Deploy { spec, .. }, Some(_)) = (&mut purpose, &config_drive) {
            spec.config_drive_url = Some(format!(
                "{}/v1/config-drive",
                self.options.api_url.trim_end_matches('/')
            ));
        }
        let entry = Entry {
            session: Session::new(boot.clone(), purpose, Instant::now()),
            fingerprint: fingerprint.to_string(),
            token: token.clone(),
            media_name: media_name.clone(),
            media: Media::Building,
            config_drive: None,
        };
        let view = self.view(&entry);
        state.tokens.insert(token.clone(), key.to_string());
        state.entries.insert(key.to_string(), entry);
        drop(state);

        let service = self.clone();
        let key = key.to_string();
        tokio::spawn(async move {
            let built = service
                .build(&boot, &token, &media_name, network_data, config_drive)
                .await;
            let mut state = service.lock();
            let media_path = service.options.work_dir.join("media").join(&media_name);
            match state.entries.get_mut(&key) {
                Some(entry) if entry.session.boot == boot => match built {
                    Ok(drive) => {
                        entry.session.set_media_ready(Instant::now());
                        entry.config_drive = drive;
                        entry.media = Media::Ready(format!(
                            "{}/{media_name}",
                            service.options.media_url.trim_end_matches('/')
                        ));
                        state.files.insert(media_name, media_path);
                    }
                    Err(e) => entry.media = Media::Failed(e),
                },
                // Ended while building: nothing may stay behind.
                _ => {
                    let _ = std::fs::remove_file(media_path);
                }
            }
        });
        view
    }

    async fn build(
        &self,
        boot: &str,
        token: &str,
        media_name: &str,
        network_data: Option<serde_json::Value>,
        config_drive: Option<ConfigDriveData>,
    ) -> Result<Option<Vec<u8>>, String> {
        let tree = self
            .tree
            .get_or_init(|| extract_tree(&self.options.ramdisk_iso, &self.options.work_dir))
            .await
            .clone()?;
        let config = AgentConfig {
            api_url: self.options.api_url.clone(),
            ca_pem: self.options.ca_pem.clone(),
            token: token.to_string(),
            network_data,
            image_ca_pem: self.options.image_ca_pem.clone(),
            lldp_wait_seconds: u32::try_from(self.options.lldp_wait.as_secs()).unwrap_or(u32::MAX),
        };
        let json = serde_json::to_vec(&config).map_err(|e| e.to_string())?;
        let cpio = media::cpio(&[(
            ferrometal_agent::protocol::CONFIG_PATH.trim_start_matches('/'),
            0o600,
            &json,
        )]);
        let out = self.options.work_dir.join("media").join(media_name);
        media::boot_iso(&tree, &cpio, &out).await?;
        match config_drive {
            Some(data) => {
                let work = self.options.work_dir.join(format!("drive-{boot}"));
                let drive = media::config_drive(
                    &work,
                    &data.meta_data,
                    data.user_data.as_deref(),
                    data.network_data.as_ref(),
                )
                .await;
                let _ = tokio::fs::remove_dir_all(&work).await;
                Ok(Some(drive?))
            }
            None => Ok(None),
        }
    }

    fn view(&self, entry: &Entry) -> Progress {
        let s = &entry.session;
        let overdue = s.overdue(
            Instant::now(),
            self.options.boot_timeout,
            self.options.silence_timeout,
        );
        Progress {
            boot: s.boot.clone(),
            media: entry.media.clone(),
            called: s.hello.is_some(),
            ending: s.ending.clone().or(overdue.map(Ending::Failed)),
            hardware: s.hardware.clone(),
            timings: s.timings.clone(),
            write_mb_per_s: s.write_mb_per_s,
            root_disk: s.root_disk.clone(),
        }
    }

    /// The session of `key`, if one runs.
    pub fn progress(&self, key: &str) -> Option<Progress> {
        let state = self.lock();
        state.entries.get(key).map(|e| self.view(e))
    }

    /// Ends the session of `key`: its token and media stop working, its files go.
    pub fn end(&self, key: &str) {
        self.remove(&mut self.lock(), key);
    }

    /// The record of a finished deploy outlives its session: a process killed after the host
    /// booted the written disk but before that was stored must not write the image again. It
    /// goes when the disk's life moves on (cleaning, inspection, deprovisioning, another image).
    fn remove(&self, state: &mut State, key: &str) {
        if let Some(entry) = state.entries.remove(key) {
            state.tokens.remove(&entry.token);
            if let Some(path) = state.files.remove(&entry.media_name) {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Forgets that `key`'s disk holds a finished deploy (deprovisioning, or the host gone).
    pub fn forget_deploy(&self, key: &str) {
        let _ = std::fs::remove_file(self.record_path(key));
    }

    /// Sessions running (for metrics and tests).
    pub fn sessions(&self) -> usize {
        self.lock().entries.len()
    }

    fn with_session<T>(
        &self,
        token: &str,
        f: impl FnOnce(&str, &mut Entry) -> Result<T, Refused>,
    ) -> Result<T, Refused> {
        let mut state = self.lock();
        let key = state.tokens.get(token).cloned().ok_or(Refused::Token)?;
        let entry = state.entries.get_mut(&key).ok_or(Refused::Token)?;
        f(&key, entry)
    }

    /// The host a token belongs to, while its session runs (for the audit log).
    pub fn host_of(&self, token: &str) -> Option<String> {
        if token.is_empty() {
            return None;
        }
        self.lock().tokens.get(token).cloned()
    }

    pub fn instruction(&self, token: &str) -> Result<Instruction, Refused> {
        self.with_session(token, |_, e| Ok(e.session.instruction(Instant::now())))
    }

    pub fn report(&self, token: &str, report: Report) -> Result<(), Refused> {
        let finished = self.with_session(token, |key, e| {
            let before = e.session.ending.is_some();
            e.session.report(report, Instant::now());
            let deployed = !before
                && e.session.ending == Some(Ending::Succeeded)
                && matches!(e.session.purpose, Purpose::Deploy { .. });
            Ok(deployed.then(|| {
                (
                    key.to_string(),
                    e.fingerprint.clone(),
                    e.session.boot.clone(),
                )
            }))
        })?;
        // Written outside the lock: a slow disk must not hold up other agents.
        if let Some((key, fingerprint, boot)) = finished {
            let record = serde_json::json!({"key": key, "fingerprint": fingerprint, "boot": boot});
            if let Err(e) = std::fs::write(self.record_path(&key), record.to_string()) {
                tracing::warn!(error = %e, "recording a finished deploy failed");
            }
        }
        Ok(())
    }

    /// Where a finished deploy of `key` is recorded. Keys are `namespace~name`, which the API
    /// server keeps to lower-case letters, digits, `-` and `.`; anything else is replaced.
    fn record_path(&self, key: &str) -> PathBuf {
        let safe: String = key
            .chars()
            .map(|c| match c {
                'a'..='z' | '0'..='9' | '-' | '.' | '~' => c,
                _ => '_',
            })
            .collect();
        self.options.state_dir.join(format!("deployed-{safe}.json"))
    }

    /// The boot of a deploy with this fingerprint the agent finished before a restart.
    fn finished_deploy(&self, key: &str, fingerprint: &str) -> Option<String> {
        let path = self.record_path(key);
        let text = std::fs::read_to_string(&path).ok()?;
        let record: serde_json::Value = serde_json::from_str(&text).ok()?;
        if record["key"] == key && record["fingerprint"] == fingerprint {
            record["boot"].as_str().map(String::from)
        } else {
            let _ = std::fs::remove_file(path);
            None
        }
    }

    pub fn config_drive(&self, token: &str) -> Result<Vec<u8>, Refused> {
        self.with_session(token, |_, e| {
            e.config_drive.clone().ok_or(Refused::NoConfigDrive)
        })
    }

    /// The file behind a media name, while its session runs.
    pub fn media_path(&self, name: &str) -> Option<PathBuf> {
        self.lock().files.get(name).cloned()
    }
}

async fn extract_tree(iso: &Path, work: &Path) -> Result<PathBuf, String> {
    let tree = work.join("ramdisk-tree");
    let _ = tokio::fs::remove_dir_all(&tree).await;
    media::extract(iso, &tree).await?;
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ferrometal_agent::protocol::{DeploySpec, Outcome};

    use super::*;

    fn options(dir: &Path) -> AgentOptions {
        AgentOptions {
            ramdisk_iso: dir.join("missing.iso"),
            work_dir: dir.join("work"),
            state_dir: dir.join("sessions"),
            api_url: "https://10.0.2.2:6385".into(),
            media_url: "http://127.0.0.1:6386".into(),
            ca_pem: String::new(),
            image_ca_pem: None,
            lldp_wait: Duration::ZERO,
            boot_timeout: Duration::from_secs(600),
            silence_timeout: Duration::from_secs(600),
        }
    }

    fn deploy() -> Purpose {
        Purpose::Deploy {
            spec: Box::new(DeploySpec {
                image_url: "http://images/disk.qcow2".into(),
                format: "qcow2".into(),
                checksum: "abc".into(),
                checksum_type: "auto".into(),
                root_device_hints: Default::default(),
                config_drive_url: None,
                software_raid: Vec::new(),
            }),
            clean: false,
        }
    }

    fn token(service: &AgentService, key: &str) -> String {
        service.lock().entries[key].token.clone()
    }

    #[tokio::test]
    async fn tokens_are_per_boot_and_a_finished_deploy_outlives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let one = AgentService::new(options(dir.path())).unwrap();
        one.begin("ns~a", "image-1", deploy(), BootData::default());
        one.begin("ns~b", "image-1", deploy(), BootData::default());
        let (a, b) = (token(&one, "ns~a"), token(&one, "ns~b"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(matches!(
            one.instruction(&a),
            Ok(Instruction::Deploy { .. })
        ));
        assert_eq!(one.instruction("forged"), Err(Refused::Token));
        let id = match one.instruction(&a).unwrap() {
            Instruction::Deploy { id, .. } => id,
            other => panic!("{other:?}"),
        };
        let done = Report {
            id: Some(id),
            outcome: Outcome::Deployed {
                root_disk: "/dev/vda".into(),
            },
            timings: BTreeMap::new(),
            write_mb_per_s: None,
        };
        // b's token cannot report for a: b's session stays where it was.
        one.report(&b, done.clone()).unwrap();
        assert_eq!(one.progress("ns~b").unwrap().ending, None);
        one.report(&a, done).unwrap();
        assert_eq!(
            one.progress("ns~a").unwrap().ending,
            Some(Ending::Succeeded)
        );

        // A restart: the deploy of the same image is known done, another image is not.
        drop(one);
        let two = AgentService::new(options(dir.path())).unwrap();
        assert_eq!(
            two.instruction(&a),
            Err(Refused::Token),
            "old tokens die with the process"
        );
        let again = two.begin("ns~a", "image-1", deploy(), BootData::default());
        assert_eq!(again.ending, Some(Ending::Succeeded));
        // Still known after the session ended (killed before "provisioned" was stored).
        two.end("ns~a");
        let again = two.begin("ns~a", "image-1", deploy(), BootData::default());
        assert_eq!(again.ending, Some(Ending::Succeeded));
        two.end("ns~a");
        // Cleaning moves the disk on: the same image is written again after it.
        two.begin("ns~a", "clean", Purpose::Clean, BootData::default());
        two.end("ns~a");
        let fresh = two.begin("ns~a", "image-1", deploy(), BootData::default());
        assert_eq!(fresh.ending, None, "cleaning forgets the finished deploy");
        two.end("ns~a");
        let other = two.begin("ns~b", "image-2", deploy(), BootData::default());
        assert_eq!(other.ending, None);
    }
}
