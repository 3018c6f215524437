//! Runs `ferrometal serve` as a child process on a free loopback port. The binary's path comes
//! from the caller: only the `ferrometal` crate's own tests know it
//! (`env!("CARGO_BIN_EXE_ferrometal")`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub struct Serve {
    /// The `ferrometal` binary this server runs, also used for `ferrometal kubeconfig`.
    pub bin: PathBuf,
    pub child: Child,
    pub dir: PathBuf,
    pub port: u16,
    pub kubeconfig: PathBuf,
    pub url: String,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the server (`bin`, the `ferrometal` binary) and waits until it printed its kubeconfig
/// path and accepts connections.
pub fn serve(bin: &Path, dir: &Path, port: u16, extra: &[&str]) -> Serve {
    serve_with_env(bin, dir, port, extra, &[])
}

/// As [`serve`], with `env` set for serve and the processes it starts (a supervised Ironic
/// reads `OS_<SECTION>__<OPTION>` variables as configuration).
pub fn serve_with_env(
    bin: &Path,
    dir: &Path,
    port: u16,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Serve {
    let mut last_err = String::new();
    std::fs::create_dir_all(dir).unwrap();
    // The port may still be held by a previous, killed instance for a moment.
    for _ in 0..50 {
        let mut child = Command::new(bin)
            .args(["serve", "--data-dir"])
            .arg(dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            // A test that scans the log for secrets raises it with FERROMETAL_TEST_SERVE_LOG.
            .env(
                "FERROMETAL_LOG",
                std::env::var("FERROMETAL_TEST_SERVE_LOG").unwrap_or_else(|_| "warn".into()),
            )
            // `--provisioner ironic` finds the `ironic` the project's scripts install here.
            .env(
                "FERROMETAL_VENV",
                std::env::var_os("FERROMETAL_VENV")
                    .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv").into()),
            )
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
            .spawn()
            .expect("spawn ferrometal");
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        // Keep draining stdout so the server never writes into a closed pipe.
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut kubeconfig = None;
        let mut url = None;
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
            if let Some(p) = line.strip_prefix("kubeconfig: ") {
                kubeconfig = Some(PathBuf::from(p));
            }
            if let Some(u) = line.strip_prefix("url: ") {
                url = Some(u.to_string());
                break;
            }
        }
        match (kubeconfig, url) {
            (Some(kubeconfig), Some(url)) => {
                return Serve {
                    bin: bin.to_path_buf(),
                    child,
                    dir: dir.to_path_buf(),
                    port,
                    kubeconfig,
                    url,
                };
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                last_err = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    panic!("ferrometal serve did not start: {last_err}");
}

impl Serve {
    /// The admin's client configuration (its kubeconfig), for a `kube::Client`.
    pub async fn kube_config(&self) -> kube::Config {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap()
    }

    /// Runs kubectl against this server with a private cache.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.kubectl_with(&self.kubeconfig, args, stdin)
    }

    /// kubectl with another kubeconfig (another user).
    pub fn kubectl_with(&self, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("kubectl-cache"))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl is installed");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// kubectl that must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}\n--- serve ({}), newest log lines ---\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.process_state(),
            self.log_tail(40)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Whether the server process still runs, from /proc (a failed request may mean it died).
    pub fn process_state(&self) -> String {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()));
        // The state letter follows the command name in parentheses.
        match stat.ok().and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        }) {
            Some('Z') | None => format!("pid {} has exited", self.child.id()),
            Some(state) => format!("pid {} running, state {state}", self.child.id()),
        }
    }

    /// The last `lines` lines of serve's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_of(&self.dir.join("serve.log"), lines)
    }

    /// kubectl that must succeed and print JSON (`-o json`); returns it parsed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kubectl {args:?} printed no JSON ({e}): {out}"))
    }

    /// The items of `kubectl get KIND -n NAMESPACE -o json`; none when kubectl fails (a server
    /// being restarted, a kind not served yet).
    pub fn items(&self, kind: &str, namespace: &str) -> Vec<serde_json::Value> {
        let out = self.kubectl(&["get", kind, "-n", namespace, "-o", "json"]);
        if !out.status.success() {
            return Vec::new();
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// `status.provisioning.state` of every BareMetalHost in `namespace`, in list order.
    pub fn host_states(&self, namespace: &str) -> Vec<String> {
        self.ok(&[
            "get",
            "bmh",
            "-n",
            namespace,
            "-o",
            "jsonpath={.items[*].status.provisioning.state}",
        ])
        .split_whitespace()
        .map(String::from)
        .collect()
    }

    /// Polls `ok` every 200 ms until it holds; after two minutes panics with `what` and the
    /// server's log.
    pub fn wait(&self, what: &str, mut ok: impl FnMut() -> bool) {
        for _ in 0..600 {
            if ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        panic!(
            "never: {what}\n{}",
            std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
        );
    }

    /// kubectl that must fail; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    }

    /// A kubeconfig for `user` in `groups` minted by `ferrometal kubeconfig`, written next to
    /// the admin's.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str], namespace: &str) -> PathBuf {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["kubeconfig", "--data-dir"]).arg(&self.dir).args([
            "--user",
            user,
            "--namespace",
            namespace,
        ]);
        for g in groups {
            cmd.args(["--group", g]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "ferrometal kubeconfig: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = self.dir.join(format!("kubeconfig-{user}"));
        std::fs::write(&path, &out.stdout).unwrap();
        path
    }

    /// `user` as a tenant of `namespace` (a RoleBinding to `ferrometal-tenant`), and their
    /// kubeconfig.
    pub fn tenant(&self, user: &str, namespace: &str) -> PathBuf {
        self.ok(&[
            "create",
            "rolebinding",
            &format!("{user}-tenant"),
            "-n",
            namespace,
            "--clusterrole=ferrometal-tenant",
            &format!("--user={user}"),
        ]);
        self.user_kubeconfig(user, &[], namespace)
    }

    /// A HostDeployPolicy `lend` in `infra` that admits claims from `tenant`.
    pub fn lend(&self, infra: &str, tenant: &str) {
        let policy = format!(
            "apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {{name: lend, namespace: {infra}}}\nspec: {{hostClaimNamespaces: {{names: [{tenant}]}}}}\n"
        );
        let o = self.kubectl_stdin(&["apply", "-f", "-"], Some(&policy));
        assert!(o.status.success(), "{}", output_text(&o));
    }

    /// A kubeconfig like the admin's with `token` (a ServiceAccount's) as the credential,
    /// written next to it as `kubeconfig-NAME`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let admin = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let admin_token = std::fs::read_to_string(self.dir.join("token")).unwrap();
        assert!(admin.contains(admin_token.trim()));
        let path = self.dir.join(format!("kubeconfig-{name}"));
        std::fs::write(&path, admin.replace(admin_token.trim(), token)).unwrap();
        path
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a log file (empty if it cannot be read).
pub fn tail_of(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `check` every 250 ms until it holds; panics after `limit` with `what`.
pub fn until(what: &str, limit: std::time::Duration, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// A finished command's stdout then stderr, as text.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
