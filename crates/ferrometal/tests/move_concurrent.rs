//! `ferrometal move --concurrency 4` of 40 hosts between two `serve`s in front of the built-in
//! emulator: every host arrives at the target exactly once, with its own credentials Secret,
//! the shared user-data Secret and its HardwareData, in the state and power it had; none stays
//! at the source; no BMC receives a power, boot or media action; the progress log is one line
//! per phase and count, not one per host. Then the same move killed part way through the copy
//! and through the removal (hosts of the phase in flight at the abort) completes when run
//! again, each host at the target once.

mod move_common;
mod serve_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferrometal_emulator::{Emulator, EmulatorConfig};
use move_common::run_move;
use serde_json::Value;
use serve_common::{Serve, free_port, output_text as text, serve, until};

const NS: &str = "infra";
const HOSTS: usize = 40;
/// The move under test: the fleet's namespace, four hosts at a time.
const MOVE_ARGS: [&str; 4] = ["--namespace", NS, "--concurrency", "4"];
const FLAGS: [&str; 6] = [
    "--power-poll-interval",
    "1",
    "--error-backoff",
    "1",
    "--bmc-timeout",
    "3",
];

/// Every fourth host is provisioned with a live ISO (online, with the shared user data); the
/// others are available and off.
fn provisioned(i: usize) -> bool {
    i.is_multiple_of(4)
}

/// Host `host-<i>` on emulator system i with its own credentials Secret `bmc-<i>`.
fn fleet_yaml(emu: &Emulator) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: shared-ud, namespace: {NS}}}\nstringData: {{userData: \"#cloud-config\\n\"}}\n"
    );
    for i in 0..HOSTS {
        let address = emu
            .system_url(i)
            .replace("http://", "redfish-virtualmedia+http://");
        let online = provisioned(i);
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: bmc-{i}, namespace: {NS}}}\nstringData: {{username: admin, password: password}}\n\
             ---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: host-{i}, namespace: {NS}}}\nspec:\n  online: {online}\n  bmc: {{address: \"{address}\", credentialsName: bmc-{i}}}\n"
        ));
        if online {
            yaml.push_str(
                "  image: {url: \"http://127.0.0.1:1/live.iso\", format: live-iso}\n  userData: {name: shared-ud}\n",
            );
        }
    }
    yaml
}

fn list(s: &Serve, kind: &str) -> Vec<Value> {
    s.items(kind, NS)
}

fn name(o: &Value) -> String {
    o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What must survive the move, per host: state, image, power, spec.
fn facts(s: &Serve) -> BTreeMap<String, Value> {
    list(s, "bmh")
        .iter()
        .map(|h| {
            let st = &h["status"];
            (
                name(h),
                serde_json::json!([
                    st["provisioning"]["state"],
                    st["provisioning"]["image"],
                    st["poweredOn"],
                    h["spec"]
                ]),
            )
        })
        .collect()
}

/// Actions each emulated BMC received so far (power, boot, media).
fn actions(emu: &Emulator) -> Vec<Vec<String>> {
    (0..HOSTS).map(|i| emu.state(i).actions).collect()
}

struct Fleet {
    emu: Emulator,
    a: Serve,
    b: Serve,
    facts: BTreeMap<String, Value>,
    hardware: BTreeSet<String>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// The fleet enrolled at A, in its states, and an empty B.
async fn fleet() -> Fleet {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: HOSTS,
            // The ISO's URL is served by nothing: the move is what is tested.
            fetch_media: false,
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(da.path(), free_port(), &FLAGS);
    let b = serve(db.path(), free_port(), &FLAGS);
    let o = a.kubectl_stdin(&["apply", "-f", "-"], Some(&fleet_yaml(&emu)));
    assert!(o.status.success(), "{}", text(&o));
    let want: BTreeMap<String, String> = (0..HOSTS)
        .map(|i| {
            let state = if provisioned(i) {
                "provisioned"
            } else {
                "available"
            };
            (format!("host-{i}"), state.to_string())
        })
        .collect();
    until(
        "the fleet in its states at A",
        Duration::from_secs(240),
        || {
            let have: BTreeMap<String, String> = facts(&a)
                .into_iter()
                .map(|(k, f)| (k, f[0].as_str().unwrap_or("").to_string()))
                .collect();
            have == want
        },
    );
    let hardware: BTreeSet<String> = list(&a, "hardwaredata").iter().map(name).collect();
    assert_eq!(hardware.len(), HOSTS, "every host was inspected at A");
    Fleet {
        facts: facts(&a),
        hardware,
        emu,
        a,
        b,
        _dirs: (da, db),
    }
}

/// Each host at `to` once, in its state and power, unpaused, with its Secrets and HardwareData;
/// nothing of them left at `from`; no BMC action since `before`.
fn assert_moved(f: &Fleet, from: &Serve, to: &Serve, before: &[Vec<String>]) {
    let hosts = list(to, "bmh");
    let names: Vec<String> = hosts.iter().map(name).collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(names.len(), HOSTS, "hosts at the target: {names:?}");
    assert_eq!(unique.len(), HOSTS, "a host twice at the target: {names:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have = facts(to);
        if have == f.facts || Instant::now() > deadline {
            assert_eq!(have, f.facts, "hosts at the target differ from the source");
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    for h in list(to, "bmh") {
        let ann = &h["metadata"]["annotations"];
        assert!(ann["baremetalhost.metal3.io/paused"].is_null(), "{h:#}");
        assert!(ann["baremetalhost.metal3.io/status"].is_null(), "{h:#}");
        assert_eq!(h["status"]["operationalStatus"], "OK", "{h:#}");
        assert!(h["status"]["errorType"].is_null(), "{h:#}");
    }
    let secrets: BTreeMap<String, Value> = list(to, "secret")
        .into_iter()
        .map(|s| (name(&s), s["data"].clone()))
        .collect();
    for i in 0..HOSTS {
        let creds = &secrets
            .get(&format!("bmc-{i}"))
            .unwrap_or_else(|| panic!("bmc-{i} not at the target"));
        assert_eq!(creds["username"], "YWRtaW4=", "bmc-{i}");
    }
    assert!(secrets.contains_key("shared-ud"), "{:?}", secrets.keys());
    let hardware: BTreeSet<String> = list(to, "hardwaredata").iter().map(name).collect();
    assert_eq!(hardware, f.hardware);
    assert!(list(from, "bmh").is_empty(), "hosts left at the source");
    assert!(list(from, "hardwaredata").is_empty());
    let left: Vec<String> = list(from, "secret")
        .iter()
        .map(name)
        .filter(|n| n.starts_with("bmc-") || n == "shared-ud")
        .collect();
    assert!(
        left.is_empty(),
        "moved Secrets left at the source: {left:?}"
    );
    // The target polled every BMC since, and still no action reached any of them.
    let gets: Vec<u64> = (0..HOSTS).map(|i| f.emu.counters().system(i).get).collect();
    until(
        "the target polled every BMC",
        Duration::from_secs(60),
        || (0..HOSTS).all(|i| f.emu.counters().system(i).get >= gets[i] + 2),
    );
    assert_eq!(actions(&f.emu), before, "BMC actions during the move");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_40_hosts_four_at_a_time() {
    let f = fleet().await;
    let before = actions(&f.emu);
    let o = run_move(&f.a, &f.b, &MOVE_ARGS, None);
    let out = text(&o);
    eprintln!("move:\n{out}");
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("moved {HOSTS} of {HOSTS} hosts")),
        "{out}"
    );
    assert!(out.contains("0 failed"), "{out}");
    // One line per phase and count: no host is named before the closing table.
    let (log, table) = out.split_once("\nNAMESPACE").expect("the closing table");
    assert!(
        !log.contains("host-"),
        "hosts named in the progress log:\n{log}"
    );
    for phase in ["pause", "copy", "unpause", "remove"] {
        let start = format!("{phase:<9}{HOSTS} hosts, 4 at a time");
        assert!(log.contains(&start), "no {start:?}:\n{log}");
        let end = format!("{phase:<9}{HOSTS} of {HOSTS} in ");
        let line = log
            .lines()
            .find(|l| l.starts_with(&end))
            .unwrap_or_else(|| panic!("no {end:?}:\n{log}"));
        assert!(line.ends_with(", 0 failed"), "{line}");
    }
    // Counted per phase: every host's credentials Secret and the shared user data once.
    for counted in [
        format!("{HOSTS} paused"),
        format!("{HOSTS} created"),
        format!("{} Secrets created", HOSTS + 1),
        format!("{HOSTS} with HardwareData"),
        format!("{HOSTS} unpaused"),
        format!("{HOSTS} deleted"),
        format!("{} Secrets deleted", HOSTS + 1),
        format!("detach   {HOSTS} of {HOSTS} detached at the source"),
        format!("target   {HOSTS} of {HOSTS} in their source state"),
    ] {
        assert!(log.contains(&counted), "no {counted:?}:\n{log}");
    }
    assert_eq!(
        table.lines().filter(|l| l.contains(" moved")).count(),
        HOSTS,
        "{table}"
    );
    assert_moved(&f, &f.a, &f.b, &before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_40_hosts_killed_mid_phase_completes_when_run_again() {
    let f = fleet().await;
    let before = actions(&f.emu);
    // Killed after the 13th host's copy, then after the 21st host's removal: other hosts of
    // the phase are half-way at that moment (up to 4 at a time).
    for crash in ["copy:13", "remove:21"] {
        let o = run_move(&f.a, &f.b, &MOVE_ARGS, Some(crash));
        assert!(
            !o.status.success() && o.status.code().is_none(),
            "the move with the crash after {crash} did not die abnormally: {}",
            text(&o)
        );
        assert!(text(&o).contains("aborting"), "{}", text(&o));
    }
    let o = run_move(&f.a, &f.b, &MOVE_ARGS, None);
    let out = text(&o);
    eprintln!("the move run again:\n{out}");
    assert!(o.status.success(), "{out}");
    assert!(out.contains("0 failed"), "{out}");
    assert_moved(&f, &f.a, &f.b, &before);
}
