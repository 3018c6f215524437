//! Real peers for the BMC client tests, started through the project's scripts on 127.0.0.1
//! with fresh state. A peer that cannot start fails the test: nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory removed on drop.
pub struct TempDir(tempfile::TempDir);

impl Default for TempDir {
    fn default() -> TempDir {
        TempDir::new()
    }
}

impl TempDir {
    pub fn new() -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix("ferrometal-test.")
                .tempdir()
                .unwrap(),
        )
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
    pub fn path_str(&self) -> &str {
        self.0.path().to_str().unwrap()
    }
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn script(name: &str) -> PathBuf {
    repo_root().join("scripts").join(name)
}

pub(crate) fn run_script(name: &str, args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(script(name))
        .args(args)
        // A started peer is stopped with this test process even if it dies without clean-up.
        .env("FERROMETAL_PEER_OWNER", std::process::id().to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{name}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{name} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A sushy-tools Redfish emulator (fake driver).
pub struct Sushy {
    pub dir: TempDir,
    pub port: u16,
}

pub const SUSHY_SYSTEM_0: &str = "00000000-0000-4000-8000-000000000000";

impl Sushy {
    /// Requests sushy-tools received that change something (power, boot, media), in order.
    pub fn changes(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("sushy.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("POST ") || l.contains("PATCH "))
            .map(String::from)
            .collect()
    }

    pub fn start(systems: usize, auth: &str) -> Sushy {
        Sushy::start_with(systems, auth, &[])
    }

    /// With sushy-tools' own power delay left in: its fake driver lands each power change
    /// 1-11 s late, as a slow BMC does.
    pub fn start_slow(systems: usize, auth: &str) -> Sushy {
        Sushy::start_with(systems, auth, &["--keep-delay"])
    }

    fn start_with(systems: usize, auth: &str, extra: &[&str]) -> Sushy {
        let dir = TempDir::new();
        let count = systems.to_string();
        let mut args = vec!["start", dir.path_str(), "--systems", &count, "--auth", auth];
        args.extend_from_slice(extra);
        let out = run_script("sushy.sh", &args);
        let port = out.lines().last().unwrap().parse().expect("port");
        Sushy { dir, port }
    }

    pub fn system_url(&self, uuid: &str) -> String {
        format!("http://127.0.0.1:{}/redfish/v1/Systems/{uuid}", self.port)
    }

    pub fn address(&self, uuid: &str) -> String {
        format!(
            "redfish+http://127.0.0.1:{}/redfish/v1/Systems/{uuid}",
            self.port
        )
    }

    /// Reads a system as the peer sees it, bypassing the client under test.
    pub fn system(&self, uuid: &str) -> serde_json::Value {
        let out = Command::new("curl")
            .args(["-sf", "-u", "admin:password", &self.system_url(uuid)])
            .output()
            .expect("curl");
        assert!(out.status.success(), "curl {}", self.system_url(uuid));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn virtual_cd(&self, uuid: &str) -> serde_json::Value {
        let url = format!("{}/VirtualMedia/Cd", self.system_url(uuid));
        let out = Command::new("curl")
            .args(["-sf", "-u", "admin:password", &url])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Sushy {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script("sushy.sh"))
            .args(["stop", self.dir.path_str()])
            .status();
    }
}

/// An OpenIPMI ipmi_sim BMC whose chassis state lives in files.
pub struct IpmiSim {
    pub dir: TempDir,
    pub port: u16,
}

impl IpmiSim {
    pub fn start() -> IpmiSim {
        IpmiSim::start_with_password("password")
    }

    pub fn start_with_password(password: &str) -> IpmiSim {
        let dir = TempDir::new();
        let out = run_script("ipmi-sim.sh", &["start", dir.path_str(), "admin", password]);
        let port = out.lines().last().unwrap().parse().expect("port");
        IpmiSim { dir, port }
    }

    pub fn address(&self) -> String {
        format!("ipmi://127.0.0.1:{}", self.port)
    }

    pub fn chassis(&self, what: &str) -> String {
        std::fs::read_to_string(self.dir.path().join("chassis").join(what))
            .unwrap()
            .trim()
            .to_string()
    }
}

impl Drop for IpmiSim {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script("ipmi-sim.sh"))
            .args(["stop", self.dir.path_str()])
            .status();
    }
}

/// A static file server on loopback, for virtual-media images the peer downloads.
pub struct FileServer {
    pub dir: TempDir,
    pub port: u16,
    /// The address it listens on (127.0.0.1 unless [`FileServer::start_on`]).
    pub ip: String,
    /// With [`FileServer::https`]: the CA that signed the server's certificate (PEM).
    pub ca_file: Option<PathBuf>,
    _tls: Option<TempDir>,
    child: Child,
}

/// Python's file server behind TLS: port, directory, certificate chain, key.
const HTTPS: &str = r#"
import functools, http.server, ssl, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=sys.argv[2])
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[3], sys.argv[4])
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;

/// Python's file server, sending each file at `rate` bytes a second (a slow image server).
const THROTTLED: &str = r#"
import functools, http.server, sys, time
class Slow(http.server.SimpleHTTPRequestHandler):
    def copyfile(self, source, out):
        rate = int(sys.argv[2])
        while True:
            chunk = source.read(65536)
            if not chunk:
                break
            out.write(chunk)
            time.sleep(len(chunk) / rate)
    def log_message(self, *args):
        pass
handler = functools.partial(Slow, directory=sys.argv[3])
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"#;

impl FileServer {
    pub fn start() -> FileServer {
        FileServer::spawn(None)
    }

    /// Plain HTTP on `ip` (a lab's provisioning address, where VMs reach it) instead of
    /// loopback.
    pub fn start_on(ip: &str) -> FileServer {
        FileServer::spawn_on(ip, |command, port, dir| {
            command.args([
                "-m",
                "http.server",
                "--bind",
                ip,
                &port.to_string(),
                "--directory",
                dir,
            ]);
        })
    }

    /// Sends every file at `rate` bytes a second.
    pub fn throttled(rate: u64) -> FileServer {
        FileServer::spawn(Some(rate))
    }

    /// HTTPS with a certificate for 127.0.0.1 and 10.0.2.2 (a QEMU guest's name for the host)
    /// from a CA of its own, made with openssl: [`FileServer::ca_file`].
    pub fn https() -> FileServer {
        let tls = TempDir::new();
        let t = |name: &str| tls.path().join(name).to_string_lossy().into_owned();
        let run = |args: &[&str]| {
            let o = Command::new("openssl")
                .args(args)
                .output()
                .expect("openssl");
            assert!(
                o.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=file server test CA",
            "-keyout",
            &t("ca.key"),
            "-out",
            &t("ca.crt"),
        ]);
        run(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=10.0.2.2",
            "-keyout",
            &t("server.key"),
            "-out",
            &t("server.csr"),
        ]);
        std::fs::write(
            t("ext"),
            "subjectAltName=IP:10.0.2.2,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            &t("server.csr"),
            "-CA",
            &t("ca.crt"),
            "-CAkey",
            &t("ca.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &t("ext"),
            "-out",
            &t("server.crt"),
        ]);
        let mut server = FileServer::spawn_with(|command, port, dir| {
            command.args(["-c", HTTPS, &port.to_string(), dir]);
            command.args([t("server.crt"), t("server.key")]);
        });
        server.ca_file = Some(tls.path().join("ca.crt"));
        server._tls = Some(tls);
        server
    }

    fn spawn(rate: Option<u64>) -> FileServer {
        FileServer::spawn_with(|command, port, dir| {
            match rate {
                None => command.args([
                    "-m",
                    "http.server",
                    "--bind",
                    "127.0.0.1",
                    &port.to_string(),
                    "--directory",
                    dir,
                ]),
                Some(rate) => {
                    command.args(["-c", THROTTLED, &port.to_string(), &rate.to_string(), dir])
                }
            };
        })
    }

    fn spawn_with(args: impl FnOnce(&mut Command, u16, &str)) -> FileServer {
        FileServer::spawn_on("127.0.0.1", args)
    }

    fn spawn_on(ip: &str, args: impl FnOnce(&mut Command, u16, &str)) -> FileServer {
        let dir = TempDir::new();
        std::fs::write(dir.path().join("live.iso"), vec![0x42u8; 64 * 1024]).unwrap();
        let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut command = Command::new("python3");
        args(&mut command, port, dir.path_str());
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 http.server");
        wait_addr(ip, port);
        FileServer {
            dir,
            port,
            ip: ip.to_string(),
            ca_file: None,
            _tls: None,
            child,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://{}:{}/{name}", self.ip, self.port)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn wait_port(port: u16) {
    wait_addr("127.0.0.1", port)
}

pub fn wait_addr(ip: &str, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect((ip, port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {ip}:{port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `check` until it holds; a peer that never gets there fails the test with `what`.
pub async fn eventually<F: FnMut() -> bool>(what: &str, mut check: F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if check() {
            return;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
