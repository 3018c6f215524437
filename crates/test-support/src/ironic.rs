//! A real standalone Ironic for tests, started through `scripts/ironic.sh` on 127.0.0.1 with a
//! fresh state directory and HTTP basic auth. A peer that cannot start fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ferrometal_provisioner::ironic::IronicEndpoint;

pub const USER: &str = "ferrometal";
pub const PASSWORD: &str = "ironic-test-secret";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/ironic.sh")
        .canonicalize()
        .unwrap()
}

pub struct Ironic {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Ironic {
    pub fn start() -> Ironic {
        let dir = tempfile::Builder::new()
            .prefix("ferrometal-ironic.")
            .tempdir()
            .unwrap();
        let port = run(dir.path(), &[]);
        Ironic { dir, port }
    }

    /// Kills Ironic and starts it again on the same port with an empty database.
    pub fn restart_with_empty_database(&self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
        let port = run(self.dir.path(), &["--port", &self.port.to_string()]);
        assert_eq!(port, self.port);
    }

    pub fn endpoint(&self) -> IronicEndpoint {
        IronicEndpoint::new(format!("http://127.0.0.1:{}", self.port))
            .with_basic_auth(USER, PASSWORD)
    }

    /// A node as Ironic shows it, bypassing the backend under test; `None` when absent.
    pub fn node(&self, name: &str) -> Option<serde_json::Value> {
        self.read("1.81", &format!("/v1/nodes/{name}"))
    }

    /// `GET path` at API `version`, bypassing the backend under test; panics unless found.
    pub fn get_at(&self, version: &str, path: &str) -> serde_json::Value {
        self.read(version, path)
            .unwrap_or_else(|| panic!("GET {path}: not found"))
    }

    fn read(&self, version: &str, path: &str) -> Option<serde_json::Value> {
        let out = Command::new("curl")
            .args([
                "-s",
                "-u",
                &format!("{USER}:{PASSWORD}"),
                "-H",
                &format!("X-OpenStack-Ironic-API-Version: {version}"),
                "-w",
                "\n%{http_code}",
                &format!("http://127.0.0.1:{}{path}", self.port),
            ])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap();
        match code {
            "200" => Some(serde_json::from_str(body).unwrap()),
            "404" => None,
            other => panic!("GET {path}: HTTP {other}: {body}"),
        }
    }

    pub fn state(&self, name: &str) -> Option<String> {
        self.node(name)
            .map(|n| n["provision_state"].as_str().unwrap_or("").to_string())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ironic.log")).unwrap_or_default()
    }
}

fn run(dir: &Path, extra: &[&str]) -> u16 {
    let out = Command::new("bash")
        .arg(script())
        .args(["start", dir.to_str().unwrap()])
        .args(["--auth", "http_basic", &format!("{USER}:{PASSWORD}")])
        .args(extra)
        // Ironic is stopped with this test process even if it dies without clean-up.
        .env("FERROMETAL_PEER_OWNER", std::process::id().to_string())
        .stdin(Stdio::null())
        .output()
        .expect("cannot run scripts/ironic.sh");
    assert!(
        out.status.success(),
        "scripts/ironic.sh start failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()
        .unwrap()
        .parse()
        .expect("port")
}

impl Drop for Ironic {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

/// Calls a provisioner step until `Done`; any error fails the test. Bounded, never timed.
#[macro_export]
macro_rules! done {
    ($what:expr, $call:expr) => {{
        let mut rounds = 0;
        loop {
            match $call.await {
                Ok($crate::__macro_support::Step::Done(v)) => break v,
                Ok($crate::__macro_support::Step::Waiting { .. }) => {}
                Err(e) => panic!("{}: {e:?}", $what),
            }
            rounds += 1;
            assert!(rounds < 900, "{} never finished", $what);
            $crate::__macro_support::sleep(::std::time::Duration::from_millis(200)).await;
        }
    }};
}
