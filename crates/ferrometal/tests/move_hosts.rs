//! `ferrometal move` between two `ferrometal serve`s (A and B) in front of one sushy-tools
//! Redfish peer: hosts provisioned with a live ISO and available hosts move with their Secrets
//! and HardwareData, reach the same state at the target without being provisioned again, and
//! the BMCs receive no power, boot or media request (POST/PATCH) during the move or after it;
//! the same with Ironic as the provisioner on both sides; and a move killed after each phase
//! (and midway through each) completes when run again.

mod move_common;
mod serve_common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrometal_test_support::peers::{FileServer, Sushy};
use move_common::run_move;
use serde_json::Value;
use serve_common::{Serve, free_port, output_text as text, serve};

const NS: &str = "infra";
/// sushy-tools' password (Sushy::system reads with it too); never in the move's output, plain
/// or base64.
const PASSWORD: &str = "password";
const PASSWORD_B64: &str = "cGFzc3dvcmQ";

fn uuid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

fn serve_flags(ironic: bool) -> Vec<&'static str> {
    let mut flags = vec!["--power-poll-interval", "2", "--error-backoff", "1"];
    if ironic {
        flags.extend(["--provisioner", "ironic"]);
    } else {
        flags.extend(["--bmc-timeout", "3"]);
    }
    flags
}

/// Hosts `host-<i>` for sushy system i: `provisioned` ones online with the live ISO and their own
/// user-data Secret, the others offline (available). One credentials Secret for all.
fn fleet_yaml(
    sushy: &Sushy,
    iso: &str,
    provisioned: &[usize],
    available: &[usize],
    ironic: bool,
) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc-creds, namespace: {NS}}}\nstringData: {{username: admin, password: {PASSWORD}}}\n"
    );
    let extra = if ironic {
        "  inspectionMode: disabled\n  automatedCleaningMode: disabled\n"
    } else {
        ""
    };
    for &i in provisioned.iter().chain(available) {
        let address = sushy
            .address(&uuid(i))
            .replace("redfish+http", "redfish-virtualmedia+http");
        let online = provisioned.contains(&i);
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: host-{i}, namespace: {NS}, labels: {{rack: r{}}}}}\nspec:\n  online: {online}\n  bmc: {{address: \"{address}\", credentialsName: bmc-creds}}\n{extra}",
            i % 3
        ));
        if online {
            yaml.push_str(&format!(
                "  image: {{url: \"{iso}\", format: live-iso}}\n  userData: {{name: host-{i}-ud}}\n---\n\
                 apiVersion: v1\nkind: Secret\nmetadata: {{name: host-{i}-ud, namespace: {NS}}}\nstringData: {{userData: \"#cloud-config\\nhostname: host-{i}\\n\"}}\n"
            ));
        }
    }
    yaml
}

fn list(s: &Serve, kind: &str) -> Vec<Value> {
    s.items(kind, NS)
}

fn names(s: &Serve, kind: &str) -> BTreeSet<String> {
    list(s, kind)
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn states(s: &Serve) -> BTreeMap<String, String> {
    list(s, "bmh")
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

fn wait_states(s: &Serve, want: &BTreeMap<String, String>, what: &str) {
    let mut last = BTreeMap::new();
    for _ in 0..360 {
        last = states(s);
        if &last == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{what}: want {want:?}, have {last:?}\n{}",
        std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default()
    );
}

/// GET requests sushy-tools has answered (power polls and other reads).
fn gets(sushy: &Sushy) -> usize {
    std::fs::read_to_string(sushy.dir.path().join("sushy.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"GET "))
        .count()
}

/// The POST/PATCH requests that act on a machine (power, boot, media): a Redfish client's
/// session login (Ironic's sushy library opens one; sushy-tools refuses it with basic auth on)
/// changes nothing.
fn actions(sushy: &Sushy) -> Vec<String> {
    sushy
        .changes()
        .into_iter()
        .filter(|l| !l.contains("/SessionService/Sessions"))
        .collect()
}

/// Waits until sushy-tools saw no new action for `quiet`; returns them all.
fn settled_changes(sushy: &Sushy, quiet: Duration) -> Vec<String> {
    let mut last = actions(sushy);
    let mut since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    while since.elapsed() < quiet {
        assert!(Instant::now() < deadline, "the BMCs never settled");
        std::thread::sleep(Duration::from_millis(250));
        let now = actions(sushy);
        if now.len() != last.len() {
            last = now;
            since = Instant::now();
        }
    }
    last
}

/// Waits until the BMCs answered `n` more GETs than `before` (a power poll has happened).
fn wait_polls(sushy: &Sushy, before: usize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while gets(sushy) < before + n {
        assert!(Instant::now() < deadline, "no power poll reached the BMCs");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn must_move(from: &Serve, to: &Serve, extra: &[&str]) -> String {
    let started = Instant::now();
    let o = run_move(from, to, extra, None);
    let out = text(&o);
    assert!(o.status.success(), "move failed:\n{out}");
    assert!(
        !out.contains(PASSWORD) && !out.contains(PASSWORD_B64),
        "a password was printed:\n{out}"
    );
    eprintln!("move took {:.1}s:\n{out}", started.elapsed().as_secs_f64());
    out
}

/// Everything about the hosts that must survive a move: state, image, power, spec.
fn host_facts(s: &Serve) -> BTreeMap<String, (String, Value, Value, Value)> {
    list(s, "bmh")
        .into_iter()
        .map(|h| {
            (
                h["metadata"]["name"].as_str().unwrap().to_string(),
                (
                    h["status"]["provisioning"]["state"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    h["status"]["provisioning"]["image"].clone(),
                    h["status"]["poweredOn"].clone(),
                    h["spec"].clone(),
                ),
            )
        })
        .collect()
}

/// The destination holds exactly the moved hosts, unpaused, in their states, with their data;
/// the origin holds none of them and none of their Secrets or HardwareData.
fn assert_moved(
    from: &Serve,
    to: &Serve,
    want: &BTreeMap<String, (String, Value, Value, Value)>,
    hardware: &BTreeSet<String>,
) {
    let want_states: BTreeMap<String, String> =
        want.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    wait_states(
        to,
        &want_states,
        "moved hosts in their states at the target",
    );
    // The status restored, powered as before; the spec as it was.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have = host_facts(to);
        if &have == want || Instant::now() > deadline {
            assert_eq!(&have, want, "hosts at the target differ from the source");
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    for h in list(to, "bmh") {
        let ann = &h["metadata"]["annotations"];
        assert!(ann["baremetalhost.metal3.io/paused"].is_null(), "{h:#}");
        assert!(ann["baremetalhost.metal3.io/status"].is_null(), "{h:#}");
    }
    let mut secrets: BTreeSet<String> = want
        .iter()
        .filter(|(_, v)| v.3["userData"].is_object())
        .map(|(k, _)| format!("{k}-ud"))
        .collect();
    secrets.insert("bmc-creds".into());
    let at_target = names(to, "secret");
    assert!(
        secrets.is_subset(&at_target),
        "{secrets:?} not all at the target: {at_target:?}"
    );
    assert_eq!(&names(to, "hardwaredata"), hardware);
    for hd in list(to, "hardwaredata") {
        assert_eq!(
            hd["metadata"]["ownerReferences"][0]["kind"],
            "BareMetalHost"
        );
    }
    assert!(names(from, "bmh").is_empty(), "hosts left at the origin");
    assert!(names(from, "hardwaredata").is_empty());
    let left = names(from, "secret");
    assert!(
        secrets.is_disjoint(&left),
        "moved Secrets left at the origin: {left:?}"
    );
}

/// Starts two serves and a fleet at A: hosts `provisioned` provisioned and `available` available.
struct Setup {
    sushy: Sushy,
    _files: FileServer,
    iso: String,
    a: Serve,
    b: Serve,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn setup(provisioned: &[usize], available: &[usize], ironic: bool) -> Setup {
    let n = provisioned.len() + available.len();
    let sushy = Sushy::start(n, "admin:password");
    let files = FileServer::start();
    let iso = files.url("live.iso");
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(da.path(), free_port(), &serve_flags(ironic));
    let b = serve(db.path(), free_port(), &serve_flags(ironic));
    let o = a.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&fleet_yaml(&sushy, &iso, provisioned, available, ironic)),
    );
    assert!(o.status.success(), "{}", text(&o));
    let want: BTreeMap<String, String> = provisioned
        .iter()
        .map(|i| (format!("host-{i}"), "provisioned".to_string()))
        .chain(
            available
                .iter()
                .map(|i| (format!("host-{i}"), "available".to_string())),
        )
        .collect();
    let started = Instant::now();
    wait_states(&a, &want, "the fleet at A");
    eprintln!(
        "{n} hosts ready at A in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Setup {
        sushy,
        _files: files,
        iso,
        a,
        b,
        _dirs: (da, db),
    }
}

/// Nodes in the Ironic a serve supervises (its SQLite database under the data directory).
fn ironic_nodes(s: &Serve) -> usize {
    let db = find_file(&s.dir, "ironic.sqlite").expect("the supervised Ironic's database");
    let out = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from nodes').fetchone()[0])",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn find_file(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = find_file(&path, name)
        {
            return Some(found);
        }
    }
    None
}

fn pivot(provisioned: &[usize], available: &[usize], ironic: bool) {
    // Bound by name: `..` would drop the file server and the serves' directories at once.
    let Setup {
        sushy,
        iso,
        a,
        b,
        _files,
        _dirs,
    } = setup(provisioned, available, ironic);
    if ironic {
        assert_eq!(ironic_nodes(&a), provisioned.len() + available.len());
    }
    let before = settled_changes(&sushy, Duration::from_secs(3));
    let facts = host_facts(&a);
    let hardware = names(&a, "hardwaredata");
    let secrets_a = names(&a, "secret");

    // A dry run changes nothing anywhere.
    let o = run_move(&a, &b, &["--namespace", NS, "--dry-run"], None);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for name in facts.keys() {
        assert!(out.contains(name), "{name} not listed:\n{out}");
    }
    assert!(out.contains("nothing was changed"), "{out}");
    assert!(
        !out.contains(PASSWORD) && !out.contains(PASSWORD_B64),
        "{out}"
    );
    assert_eq!(host_facts(&a), facts);
    for h in list(&a, "bmh") {
        assert!(
            h["metadata"]["annotations"]["baremetalhost.metal3.io/paused"].is_null(),
            "the dry run paused {h:#}"
        );
    }
    assert_eq!(names(&a, "hardwaredata"), hardware);
    assert_eq!(names(&a, "secret"), secrets_a);
    assert!(names(&b, "bmh").is_empty());
    assert!(names(&b, "secret").is_empty());

    // The move.
    let out = must_move(&a, &b, &["--namespace", NS]);
    assert!(
        out.contains(&format!("moved {} of {} hosts", facts.len(), facts.len())),
        "{out}"
    );
    assert!(out.contains("0 failed"), "{out}");
    // A let go of every host through its own provisioner before deleting it.
    let n = facts.len();
    assert!(
        out.contains(&format!("detach   {n} of {n} detached at the source")),
        "{out}"
    );
    if ironic {
        // So A's Ironic, still running, has no node left whose power it would enforce.
        assert_eq!(ironic_nodes(&a), 0);
    }
    assert_moved(&a, &b, &facts, &hardware);
    for (_, (_, image, _, spec)) in facts.iter().filter(|(_, f)| f.0 == "provisioned") {
        assert_eq!(image["url"], iso.as_str());
        assert_eq!(spec["image"]["url"], iso.as_str());
    }
    // B polled every host's power (at least once more each), and still no BMC was told to do
    // anything: nothing deprovisioned at A, nothing provisioned again at B.
    wait_polls(&sushy, gets(&sushy), 2 * facts.len());
    let after = settled_changes(&sushy, Duration::from_secs(3));
    assert_eq!(
        after[before.len()..].to_vec(),
        Vec::<String>::new(),
        "BMC actions during or after the move"
    );
    // The target manages them without complaint (with Ironic: registered and adopted).
    for h in list(&b, "bmh") {
        assert!(h["status"]["errorType"].is_null(), "{h:#}");
        assert_eq!(h["status"]["operationalStatus"], "OK", "{h:#}");
    }
    for (name, f) in &facts {
        let i: usize = name.trim_start_matches("host-").parse().unwrap();
        let system = sushy.system(&uuid(i));
        let on = f.2.as_bool().unwrap_or(false);
        assert_eq!(
            system["PowerState"],
            if on { "On" } else { "Off" },
            "{name}"
        );
        if f.0 == "provisioned" {
            assert_eq!(sushy.virtual_cd(&uuid(i))["Inserted"], true, "{name}");
        }
    }
    eprintln!(
        "{} hosts moved; BMC POST/PATCH before the move {}, after {}; GETs {}",
        facts.len(),
        before.len(),
        after.len(),
        gets(&sushy)
    );
}

#[test]
fn move_redfish() {
    let provisioned: Vec<usize> = (0..10).collect();
    let available: Vec<usize> = (10..15).collect();
    pivot(&provisioned, &available, false);
}

#[test]
fn move_ironic() {
    pivot(&[0, 1], &[2], true);
}

#[test]
fn move_crash_each_phase() {
    let Setup {
        sushy,
        a,
        b,
        _files,
        _dirs,
        ..
    } = setup(&[0, 1], &[2], false);
    let before = settled_changes(&sushy, Duration::from_secs(3));
    let facts = host_facts(&a);
    let hardware = names(&a, "hardwaredata");

    // Bad input first: errors name the flag and the path, and nothing changes.
    let o = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["move", "--from", "/nonexistent/kubeconfig", "--to"])
        .arg(&b.kubeconfig)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let out = text(&o);
    assert!(
        out.contains("--from /nonexistent/kubeconfig"),
        "the error names neither flag nor path: {out}"
    );
    let o = run_move(&a, &a, &[], None);
    assert!(!o.status.success());
    assert!(text(&o).contains("same cluster"), "{}", text(&o));
    let o = run_move(&a, &b, &[], Some("nonsense"));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("FERROMETAL_MOVE_CRASH_AFTER"),
        "{}",
        text(&o)
    );
    assert_eq!(host_facts(&a), facts);

    // Every phase, after its first host and after all hosts, back and forth between A and B.
    let cases = [
        "pause:1",
        "pause",
        "copy:1",
        "copy",
        "unpause:1",
        "unpause",
        "remove:1",
        "remove",
    ];
    let (mut from, mut to) = (&a, &b);
    for crash in cases {
        let o = run_move(from, to, &[], Some(crash));
        assert!(
            !o.status.success() && o.status.code().is_none(),
            "the move with the crash after {crash} did not die abnormally: {}",
            text(&o)
        );
        assert!(text(&o).contains("aborting"), "{}", text(&o));
        let out = must_move(from, to, &[]);
        // After the whole remove phase there is nothing left to do; after its first host the
        // other removes already in flight (`--concurrency`) may have finished too.
        assert!(
            out.contains("0 failed")
                || (crash.starts_with("remove") && out.contains("no BareMetalHosts")),
            "after crash {crash}: {out}"
        );
        assert_moved(from, to, &facts, &hardware);
        eprintln!("crash after {crash}: completed on the second run");
        std::mem::swap(&mut from, &mut to);
    }
    let after = settled_changes(&sushy, Duration::from_secs(3));
    assert_eq!(
        after[before.len()..].to_vec(),
        Vec::<String>::new(),
        "BMC actions during the moves"
    );
}

#[test]
fn move_leaves_a_host_it_cannot_copy() {
    let sushy = Sushy::start(2, "admin:password");
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(da.path(), free_port(), &serve_flags(false));
    let b = serve(db.path(), free_port(), &serve_flags(false));
    // host-1's credentials Secret does not exist (yet).
    let yaml = fleet_yaml(&sushy, "unused", &[], &[0, 1], false).replace(
        "  online: false\n  bmc: {address: \"redfish-virtualmedia+http://127.0.0.1:PORT/redfish/v1/Systems/00000000-0000-4000-8000-000000000001\", credentialsName: bmc-creds}"
            .replace("PORT", &sushy.port.to_string())
            .as_str(),
        "  online: false\n  bmc: {address: \"redfish-virtualmedia+http://127.0.0.1:PORT/redfish/v1/Systems/00000000-0000-4000-8000-000000000001\", credentialsName: later-creds}"
            .replace("PORT", &sushy.port.to_string())
            .as_str(),
    );
    assert!(yaml.contains("later-creds"), "{yaml}");
    let o = a.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(o.status.success(), "{}", text(&o));
    wait_states(
        &a,
        &BTreeMap::from([
            ("host-0".to_string(), "available".to_string()),
            ("host-1".to_string(), "registering".to_string()),
        ]),
        "host-0 available, host-1 without credentials",
    );

    let o = run_move(&a, &b, &[], None);
    let out = text(&o);
    eprintln!("the move with a host it cannot copy:\n{out}");
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("later-creds") && out.contains("FAILED"),
        "{out}"
    );
    assert!(
        out.contains("moved 1 of 2 hosts") && out.contains("1 failed"),
        "{out}"
    );
    // host-1 stays at A, managed there (unpaused), with no copy at B.
    assert_eq!(names(&b, "bmh"), BTreeSet::from(["host-0".to_string()]));
    assert_eq!(names(&a, "bmh"), BTreeSet::from(["host-1".to_string()]));
    let h1 = &list(&a, "bmh")[0];
    assert!(
        h1["metadata"]["annotations"]["baremetalhost.metal3.io/paused"].is_null(),
        "{h1:#}"
    );

    // Once its Secret exists, the same command moves it too.
    let o = a.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: later-creds, namespace: {NS}}}\nstringData: {{username: admin, password: {PASSWORD}}}\n"
        )),
    );
    assert!(o.status.success(), "{}", text(&o));
    wait_states(
        &a,
        &BTreeMap::from([("host-1".to_string(), "available".to_string())]),
        "host-1 available at A",
    );
    let out = must_move(&a, &b, &[]);
    assert!(out.contains("moved 1 of 1 hosts"), "{out}");
    wait_states(
        &b,
        &BTreeMap::from([
            ("host-0".to_string(), "available".to_string()),
            ("host-1".to_string(), "available".to_string()),
        ]),
        "both hosts available at B",
    );
    assert!(names(&a, "bmh").is_empty());
    assert!(!names(&a, "secret").contains("later-creds"));
}
