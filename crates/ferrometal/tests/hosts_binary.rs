//! The host lifecycle through the shipped binary, as users run it: `serve` with its in-process
//! controllers (killed with SIGKILL mid-provisioning and restarted), `controller` against a
//! separate `serve --no-controllers` (cluster mode), `/metrics`, and `demo --exit`.

mod serve_common;

use std::process::{Command, Stdio};
use std::time::Duration;

use ferrometal_emulator::{Emulator, EmulatorConfig};
use ferrometal_test_support::images::ImageServer;
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

fn hosts_yaml(emu: &Emulator, names: &[(usize, String)]) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: default}\nstringData: {username: admin, password: password}\n",
    );
    for (i, name) in names {
        let address = emu
            .system_url(*i)
            .replace("http://", "redfish-virtualmedia+http://");
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  online: false\n  bmc: {{address: \"{address}\", credentialsName: bmc}}\n"
        ));
    }
    yaml
}

/// Served for the whole test binary: the emulator, like a real BMC, fetches what it inserts.
static IMAGES: std::sync::LazyLock<ImageServer> = std::sync::LazyLock::new(ImageServer::start);

/// Online with a served live ISO, as a merge patch.
fn live_iso_patch() -> String {
    serde_json::json!({"spec": {"online": true,
        "image": {"url": IMAGES.url("live.iso"), "format": "live-iso"}}})
    .to_string()
}

fn states(s: &Serve) -> Vec<(String, String)> {
    let out = s.ok(&["get", "bmh", "-o", "json"]);
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["metadata"]["name"].as_str().unwrap().to_string(),
                h["status"]["provisioning"]["state"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

fn wait_all(s: &Serve, count: usize, state: &str) {
    let mut last = Vec::new();
    for _ in 0..600 {
        last = states(s);
        if last.len() == count && last.iter().all(|(_, st)| st == state) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "not all {count} hosts became {state}: {last:?}\n{}",
        std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default()
    );
}

async fn emulator(systems: usize) -> Emulator {
    Emulator::start(
        EmulatorConfig {
            systems,
            power_delay: Duration::from_millis(300),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn fast_controller_flags() -> Vec<String> {
    [
        "--power-poll-interval",
        "2",
        "--error-backoff",
        "1",
        "--bmc-timeout",
        "3",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn count(actions: &[String], needle: &str) -> usize {
    actions.iter().filter(|a| a.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_survives_sigkill_mid_provisioning_without_repeating_destructive_actions() {
    const HOSTS: usize = 20;
    let emu = emulator(HOSTS).await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let metrics_port = free_port();
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut flags = fast_controller_flags();
    flags.extend(["--metrics-listen".to_string(), metrics.clone()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut s = serve(dir.path(), port, &flags);

    let names: Vec<(usize, String)> = (0..HOSTS).map(|i| (i, format!("node-{i:02}"))).collect();
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&hosts_yaml(&emu, &names)));
    wait_all(&s, HOSTS, "available");
    let table = s.ok(&["get", "bmh"]);
    assert!(table.lines().next().unwrap().contains("STATE"), "{table}");
    assert!(table.contains("available"), "{table}");

    // /metrics: reconciles, hosts per state, BMC requests.
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("ferrometal_host_reconciles_total"), "{text}");
    assert!(
        text.contains("ferrometal_hosts{state=\"available\"} 20"),
        "{text}"
    );
    assert!(
        text.contains("ferrometal_bmc_requests_total{protocol=\"redfish\",method=\"GET\"}"),
        "{text}"
    );
    assert!(!text.contains("password"));

    // Provision all of them, and kill the server while that is under way.
    for (_, name) in &names {
        s.ok(&[
            "patch",
            "bmh",
            name,
            "--type",
            "merge",
            "-p",
            &live_iso_patch(),
        ]);
    }
    let mut killed_midway = false;
    for _ in 0..400 {
        let inserted = (0..HOSTS)
            .filter(|i| emu.state(*i).virtual_media.inserted)
            .count();
        let provisioned = states(&s)
            .iter()
            .filter(|(_, st)| st == "provisioned")
            .count();
        if inserted > 0 && provisioned < HOSTS {
            killed_midway = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    s.kill();
    assert!(killed_midway, "the kill must land mid-provisioning");

    let s = serve(dir.path(), port, &flags);
    wait_all(&s, HOSTS, "provisioned");
    for i in 0..HOSTS {
        let bmc = emu.state(i);
        assert!(bmc.virtual_media.inserted, "system {i}");
        assert_eq!(bmc.power_state.as_str(), "On", "system {i}");
        assert_eq!(
            count(&bmc.actions, "InsertMedia"),
            1,
            "media inserted once on {i}: {:?}",
            bmc.actions
        );
        assert_eq!(
            count(&bmc.actions, "EjectMedia"),
            0,
            "no eject on {i}: {:?}",
            bmc.actions
        );
        assert_eq!(
            count(&bmc.actions, "ForceOff") + count(&bmc.actions, "GracefulShutdown"),
            0,
            "no power-off on {i}: {:?}",
            bmc.actions
        );
    }
}

fn job_cli(s: &Serve, args: &[&str]) -> std::process::Output {
    Command::new(&s.bin)
        .args(["job", "run", "--kubeconfig"])
        .arg(&s.kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

fn job_json(s: &Serve, name: &str) -> Value {
    serde_json::from_str(&s.ok(&["get", "bmcjob", name, "-o", "json"])).unwrap()
}

/// `ferrometal job run`, and serve killed with SIGKILL while a job's power-off is under way:
/// after the restart the job goes on from that task, and the BMC received each destructive
/// action once. A second job queued behind the first runs after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bmcjobs_from_the_cli_resume_after_sigkill_without_repeating_an_action() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
            // Long enough that the kill lands while the power-off is pending.
            power_delay: Duration::from_millis(3000),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flags = fast_controller_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut s = serve(dir.path(), port, &flags);
    let yaml = hosts_yaml(&emu, &[(0, "node-00".into())]).replace("online: false", "online: true");
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    wait_all(&s, 1, "available");
    for _ in 0..100 {
        if emu.state(0).power_state.as_str() == "On" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let before = emu.state(0).actions.len();
    let o = job_cli(
        &s,
        &["--host", "node-00", "--name", "j1", "power=off", "power=on"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "bmcjob/j1 created"
    );
    let bad = job_cli(&s, &["--host", "node-00", "power=maybe"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("power is one of"));

    let mut issued = false;
    for _ in 0..300 {
        let j = job_json(&s, "j1");
        if j["status"]["tasks"][0]["issued"] == true && emu.state(0).pending_power_state.is_some() {
            issued = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        issued,
        "the power-off was never sent: {}",
        job_json(&s, "j1")
    );
    s.kill();

    let s = serve(dir.path(), port, &flags);
    let o = job_cli(
        &s,
        &[
            "--host",
            "node-00",
            "--name",
            "j2",
            "--wait",
            "power=status",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("task 1/1 power=status Succeeded: power is On"),
        "{out}"
    );
    assert!(
        out.contains("Completed: all tasks succeeded; desired state restored"),
        "{out}"
    );

    let j1 = job_json(&s, "j1");
    assert_eq!(j1["status"]["phase"], "Completed", "{j1}");
    assert!(
        j1["status"]["completionTime"].as_str() <= j2_start(&s).as_deref(),
        "j2 ran after j1"
    );
    let actions = emu.state(0).actions[before..].to_vec();
    assert_eq!(count(&actions, "ForceOff"), 1, "{actions:?}");
    let ons = actions
        .iter()
        .filter(|a| *a == "Reset:On" || *a == "Reset:ForceOn")
        .count();
    assert_eq!(ons, 1, "{actions:?}");
    let host: Value =
        serde_json::from_str(&s.ok(&["get", "bmh", "node-00", "-o", "json"])).unwrap();
    assert!(
        host["metadata"]["annotations"]
            .get("ferrometal.io/bmcjob")
            .is_none(),
        "the host is handed back: {host}"
    );
}

fn j2_start(s: &Serve) -> Option<String> {
    job_json(s, "j2")["status"]["startTime"]
        .as_str()
        .map(String::from)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_against_a_separate_serve_is_cluster_mode() {
    let emu = emulator(2).await;
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    // No controllers in the server: CRDs come from the controller's --install-crds.
    let mut controller = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .arg("--install-crds")
        .args(fast_controller_flags())
        .env("FERROMETAL_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("controller.log")).unwrap())
        .spawn()
        .unwrap();
    let mut crds = false;
    for _ in 0..300 {
        if s.kubectl(&["get", "crd", "baremetalhosts.metal3.io"])
            .status
            .success()
        {
            crds = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(crds, "controller installed the CRDs");
    // kubectl explain finds the CRDs through the OpenAPI documents (real plurals).
    assert!(
        s.ok(&["explain", "hardwaredata.spec.hardware"])
            .contains("KIND:       HardwareData")
    );
    assert!(
        s.ok(&["explain", "bmh.spec.bmc"])
            .contains("credentialsName")
    );
    let names = vec![(1, "remote".to_string())];
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&hosts_yaml(&emu, &names)));
    wait_all(&s, 1, "available");
    s.ok(&[
        "patch",
        "bmh",
        "remote",
        "--type",
        "merge",
        "-p",
        &live_iso_patch(),
    ]);
    wait_all(&s, 1, "provisioned");
    let bmc = emu.state(1);
    assert!(bmc.virtual_media.inserted);
    assert_eq!(bmc.power_state.as_str(), "On");
    assert_eq!(bmc.last_boot_source.as_deref(), Some("Cd"));
    assert!(emu.state(0).actions.is_empty());
    s.ok(&["delete", "bmh", "remote", "--wait=false"]);
    for _ in 0..300 {
        if s.ok(&["get", "bmh", "-o", "name"]).trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        s.ok(&["get", "bmh", "-o", "name"]).trim().is_empty(),
        "host deleted through the finalizer"
    );
    assert!(
        !emu.state(1).virtual_media.inserted,
        "deprovisioned before delete"
    );
    let _ = controller.kill();
    let _ = controller.wait();
}

/// As a user would try it: a provisioned host paused, `online: false` set, unpaused. The BMC
/// is powered off because of the unpause; the power poll (1 h here) never comes into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_changed_while_paused_reaches_the_bmc_at_unpause() {
    let emu = emulator(1).await;
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &[
            "--power-poll-interval",
            "3600",
            "--error-backoff",
            "1",
            "--bmc-timeout",
            "3",
        ],
    );
    let names = vec![(0, "p".to_string())];
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&hosts_yaml(&emu, &names)));
    wait_all(&s, 1, "available");
    s.ok(&[
        "patch",
        "bmh",
        "p",
        "--type",
        "merge",
        "-p",
        &live_iso_patch(),
    ]);
    wait_all(&s, 1, "provisioned");
    for _ in 0..300 {
        if emu.state(0).power_state.as_str() == "On" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(emu.state(0).power_state.as_str(), "On");
    s.ok(&["annotate", "bmh", "p", "baremetalhost.metal3.io/paused="]);
    s.ok(&[
        "patch",
        "bmh",
        "p",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"online":false}}"#,
    ]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(emu.state(0).power_state.as_str(), "On", "paused: untouched");
    s.ok(&["annotate", "bmh", "p", "baremetalhost.metal3.io/paused-"]);
    for _ in 0..300 {
        if emu.state(0).power_state.as_str() == "Off" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        emu.state(0).power_state.as_str(),
        "Off",
        "unpausing acted on online: false: {:?}\n{}",
        emu.state(0).actions,
        std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default()
    );
}

/// The race a user hits by hand: the host is paused while a power-on it asked for is still on
/// its way (issued, not yet seen), `online: false` is set, the host unpaused. The power-on
/// lands after the unpause; the host must still end off, long before the next power poll
/// (1 h here), and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_on_in_flight_at_pause_is_undone_at_unpause() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
            power_delay: Duration::from_secs(3),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &[
            "--power-poll-interval",
            "3600",
            "--error-backoff",
            "1",
            "--bmc-timeout",
            "3",
        ],
    );
    let names = vec![(0, "r".to_string())];
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&hosts_yaml(&emu, &names)));
    wait_all(&s, 1, "available");
    assert_eq!(emu.state(0).power_state.as_str(), "Off");
    s.ok(&[
        "patch",
        "bmh",
        "r",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"online":true}}"#,
    ]);
    // The power-on is issued: the emulator holds it for 3 s before it lands.
    let mut issued = false;
    for _ in 0..300 {
        if emu.state(0).pending_power_state.is_some() {
            issued = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(issued, "no power-on issued: {:?}", emu.state(0).actions);
    s.ok(&["annotate", "bmh", "r", "baremetalhost.metal3.io/paused="]);
    s.ok(&[
        "patch",
        "bmh",
        "r",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"online":false}}"#,
    ]);
    s.ok(&["annotate", "bmh", "r", "baremetalhost.metal3.io/paused-"]);
    // Whatever the order of events at the BMC, the host ends off and stays off.
    let mut off_since = None;
    for _ in 0..600 {
        let st = emu.state(0);
        if st.power_state.as_str() == "Off" && st.pending_power_state.is_none() {
            let since = *off_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > Duration::from_secs(5) {
                break;
            }
        } else {
            off_since = None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = emu.state(0);
    assert!(
        st.power_state.as_str() == "Off" && st.pending_power_state.is_none(),
        "the host is {} (pending {:?}) after unpause with online: false: {:?}\n{}",
        st.power_state.as_str(),
        st.pending_power_state,
        st.actions,
        std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default()
    );
    let powered_on = s.ok(&["get", "bmh", "r", "-o", "jsonpath={.status.poweredOn}"]);
    assert_eq!(powered_on, "false");
}

/// A slow BMC: sushy-tools with its own power delay (1-11 s per change) left in. Hosts still
/// converge: provisioned and on, then off, each seen on the peer.
#[test]
fn hosts_converge_on_a_slow_bmc() {
    let sushy = peers::Sushy::start_slow(2, "admin:password");
    let files = peers::FileServer::start();
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &["--power-poll-interval", "3", "--error-backoff", "2"],
    );
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: default}\nstringData: {username: admin, password: password}\n",
    );
    let uuids = [
        "00000000-0000-4000-8000-000000000000",
        "00000000-0000-4000-8000-000000000001",
    ];
    for (i, uuid) in uuids.iter().enumerate() {
        let address = sushy
            .address(uuid)
            .replace("redfish+http", "redfish-virtualmedia+http");
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: slow-{i}, namespace: default}}\nspec:\n  online: false\n  bmc: {{address: \"{address}\", credentialsName: bmc}}\n"
        ));
    }
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    wait_all(&s, 2, "available");
    let patch = format!(
        r#"{{"spec":{{"online":true,"image":{{"url":"{}","format":"live-iso"}}}}}}"#,
        files.url("live.iso")
    );
    for i in 0..2 {
        s.ok(&[
            "patch",
            "bmh",
            &format!("slow-{i}"),
            "--type",
            "merge",
            "-p",
            &patch,
        ]);
    }
    wait_all(&s, 2, "provisioned");
    let power = |uuid: &str| {
        sushy.system(uuid)["PowerState"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let converged = |want: &str| {
        for _ in 0..600 {
            if uuids.iter().all(|u| power(u) == want) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    };
    assert!(converged("On"), "not every slow BMC reached On");
    for uuid in uuids {
        assert_eq!(sushy.virtual_cd(uuid)["Inserted"], true);
    }
    for i in 0..2 {
        s.ok(&[
            "patch",
            "bmh",
            &format!("slow-{i}"),
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"online":false}}"#,
        ]);
    }
    assert!(converged("Off"), "not every slow BMC reached Off");
    // The status follows once the controller has seen it (its next observation).
    let status_off = |i: usize| {
        s.ok(&[
            "get",
            "bmh",
            &format!("slow-{i}"),
            "-o",
            "jsonpath={.status.poweredOn}",
        ]) == "false"
    };
    let mut reported = false;
    for _ in 0..300 {
        if (0..2).all(status_off) {
            reported = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(reported, "the BMCs are off but a status still says on");
}

#[test]
fn demo_exits_with_every_host_where_expected() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args([
            "demo",
            "--hosts",
            "4",
            "--exit",
            "--timeout",
            "120",
            "--data-dir",
        ])
        .arg(dir.path().join("demo"))
        .env("FERROMETAL_LOG", "warn,ferrometal=info")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all 4 hosts available"), "{stdout}");
    assert!(stdout.contains("1 hosts provisioned"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("demo-")).collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert_eq!(
        rows.iter()
            .filter(|l| l.contains(" provisioned ") && l.contains("live-iso"))
            .count(),
        1,
        "{stdout}"
    );
    assert_eq!(
        rows.iter().filter(|l| l.contains(" available ")).count(),
        3,
        "{stdout}"
    );
    // Stopped by --exit: no invitation to explore a server that is gone.
    assert!(!stdout.contains("Explore with kubectl"), "{stdout}");
    // The web console's address, with the port it got.
    let console = stdout
        .lines()
        .find_map(|l| l.split("web console: ").nth(1))
        .unwrap_or_else(|| panic!("no console URL: {stdout}"));
    assert!(
        console.starts_with("http://127.0.0.1:") && !console.starts_with("http://127.0.0.1:0/"),
        "{console}"
    );
    // The metrics endpoint's log names the port it got, not the :0 it asked for.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("serving /metrics"))
        .unwrap_or_else(|| panic!("no metrics line: {stderr}"));
    let port: String = line
        .split("addr=127.0.0.1:")
        .nth(1)
        .unwrap_or_else(|| panic!("{line}"))
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert_ne!(port.parse::<u16>().unwrap_or(0), 0, "{line}");
}

use ferrometal_test_support::peers;

/// `serve --provisioner ironic` starts and supervises its own Ironic (from the project venv) and
/// drives a sushy-tools host through it to available and a live ISO.
#[test]
fn serve_with_a_supervised_ironic() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &[
            "--provisioner",
            "ironic",
            "--power-poll-interval",
            "3",
            "--error-backoff",
            "2",
        ],
    );
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc, namespace: default}}\nstringData: {{username: admin, password: password}}\n---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: via-ironic, namespace: default}}\nspec:\n  online: false\n  inspectionMode: disabled\n  automatedCleaningMode: disabled\n  bmc: {{address: \"{address}\", credentialsName: bmc}}\n"
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    wait_all(&s, 1, "available");
    let patch = format!(
        r#"{{"spec":{{"online":true,"image":{{"url":"{}","format":"live-iso"}}}}}}"#,
        files.url("live.iso")
    );
    s.ok(&[
        "patch",
        "bmh",
        "via-ironic",
        "--type",
        "merge",
        "-p",
        &patch,
    ]);
    wait_all(&s, 1, "provisioned");
    let cd = sushy.virtual_cd(peers::SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
    // Ironic's files live beside the store.
    assert!(dir.path().join("ironic").is_dir());

    // serve killed with SIGKILL: its Ironic (and Ironic's workers) go too.
    let marker = dir.path().to_string_lossy().to_string();
    assert!(!processes_mentioning(&marker).is_empty(), "Ironic runs");
    let mut s = s;
    s.kill();
    let mut left = Vec::new();
    for _ in 0..600 {
        left = processes_mentioning(&marker);
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        left.is_empty(),
        "left running after serve was killed: {left:?}"
    );
}

/// (pid, command line) of every process whose command line or standard output mentions
/// `needle` (Ironic renames its processes, but they all log to a file under the data dir).
fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
        let stdout = std::fs::read_link(entry.path().join("fd/1"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        if (cmd.contains(needle) || stdout.contains(needle)) && pid != std::process::id() {
            out.push((pid, cmd));
        }
    }
    out
}
