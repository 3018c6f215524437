//! What `ferrometal move` refuses and how it says so, through the CLI between two `serve`s in
//! front of the emulator: hosts a HostClaim holds are not moved (the dry run says so, the move
//! changes nothing and names each claim), the HostDeployPolicy moves with the hosts, the target
//! reports no `CredentialsChanged` for Secrets that did not change, and a stopped target is
//! named as unreachable, not as a cluster without the CRDs.

mod move_common;
mod serve_common;

use std::time::Duration;

use ferrometal_emulator::{Emulator, EmulatorConfig};
use move_common::run_move;
use serde_json::Value;
use serve_common::{Serve, free_port, output_text as text, serve, until};

const FLAGS: [&str; 6] = [
    "--power-poll-interval",
    "1",
    "--error-backoff",
    "1",
    "--bmc-timeout",
    "3",
];

async fn emulator(systems: usize) -> Emulator {
    Emulator::start(
        EmulatorConfig {
            systems,
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// Namespaces infra and tenant-a, the policy lending infra's hosts to tenant-a, and hosts
/// `web-<i>` labelled `pool: web`, offline.
fn fleet_yaml(emu: &Emulator, hosts: usize) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: infra}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-a}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: infra}\nstringData: {username: admin, password: password}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {name: lend-to-tenants, namespace: infra}\nspec: {hostClaimNamespaces: {names: [tenant-a]}}\n",
    );
    for i in 0..hosts {
        let address = emu
            .system_url(i)
            .replace("http://", "redfish-virtualmedia+http://");
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: web-{i}, namespace: infra, labels: {{pool: web}}}}\nspec:\n  online: false\n  bmc: {{address: \"{address}\", credentialsName: bmc}}\n"
        ));
    }
    yaml
}

const CLAIM: &str = "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {name: web, namespace: tenant-a}\nspec:\n  poweredOn: false\n  hostSelector: {matchLabels: {pool: web}}\n";

fn hosts(s: &Serve) -> Vec<Value> {
    s.json(&["get", "bmh", "-n", "infra", "-o", "json"])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn consumer(h: &Value) -> Option<String> {
    let c = &h["spec"]["consumerRef"];
    c["name"].as_str().map(|n| {
        format!(
            "{} {}/{n}",
            c["kind"].as_str().unwrap_or(""),
            c["namespace"].as_str().unwrap_or("")
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_refuses_claimed_hosts_then_moves_hosts_with_their_policy() {
    let emu = emulator(3).await;
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(da.path(), free_port(), &FLAGS);
    let b = serve(db.path(), free_port(), &FLAGS);
    let o = a.kubectl_stdin(&["apply", "-f", "-"], Some(&fleet_yaml(&emu, 3)));
    assert!(o.status.success(), "{}", text(&o));
    until("3 hosts available at A", Duration::from_secs(120), || {
        hosts(&a)
            .iter()
            .filter(|h| h["status"]["provisioning"]["state"] == "available")
            .count()
            == 3
    });
    let o = a.kubectl_stdin(&["apply", "-f", "-"], Some(CLAIM));
    assert!(o.status.success(), "{}", text(&o));
    let mut claimed = String::new();
    until("the claim holds a host", Duration::from_secs(60), || {
        claimed = hosts(&a)
            .iter()
            .find(|h| consumer(h).is_some())
            .map(|h| h["metadata"]["name"].as_str().unwrap().to_string())
            .unwrap_or_default();
        !claimed.is_empty()
    });

    // The dry run names the claim on its host and says the move would refuse it.
    let o = run_move(&a, &b, &["--namespace", "infra", "--dry-run"], None);
    let out = text(&o);
    eprintln!("dry run:\n{out}");
    let line = out
        .lines()
        .find(|l| l.contains(&claimed))
        .unwrap_or_else(|| panic!("{claimed} not listed:\n{out}"));
    assert!(line.contains("HostClaim tenant-a/web"), "{out}");
    assert!(out.contains("would refuse"), "{out}");
    assert!(
        out.contains("HostDeployPolicy infra/lend-to-tenants"),
        "{out}"
    );
    assert!(!o.status.success(), "a move that would be refused: {out}");

    // The move refuses before changing anything: no host paused at A, nothing at B, the
    // claim still holds its host.
    let o = run_move(&a, &b, &["--namespace", "infra"], None);
    let out = text(&o);
    eprintln!("move:\n{out}");
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains(&format!("{claimed} is held by HostClaim tenant-a/web")),
        "{out}"
    );
    for h in hosts(&a) {
        assert!(
            h["metadata"]["annotations"]["baremetalhost.metal3.io/paused"].is_null(),
            "{h:#}"
        );
    }
    assert!(
        b.json(&["get", "bmh", "-A", "-o", "json"])["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let claim = a.json(&["get", "hostclaim", "web", "-n", "tenant-a", "-o", "json"]);
    let associated = claim["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Associated")
        .cloned()
        .unwrap_or_default();
    assert_eq!(associated["status"], "True", "{claim:#}");

    // Released, every host moves, and the policy with them.
    a.ok(&[
        "delete",
        "hostclaim",
        "web",
        "-n",
        "tenant-a",
        "--wait=true",
    ]);
    until("the host released", Duration::from_secs(60), || {
        hosts(&a).iter().all(|h| consumer(h).is_none())
    });
    // The target holds other objects already, as any cluster does: its copy of the
    // credentials Secret gets another resourceVersion than the source's (two fresh servers
    // would otherwise count the same and hide the difference).
    b.ok(&["create", "namespace", "elsewhere"]);
    b.ok(&["create", "configmap", "settings", "-n", "elsewhere"]);
    let gets_before: Vec<u64> = (0..3).map(|i| emu.counters().system(i).get).collect();
    let o = run_move(&a, &b, &["--namespace", "infra"], None);
    let out = text(&o);
    eprintln!("move:\n{out}");
    assert!(o.status.success(), "{out}");
    assert!(out.contains("moved 3 of 3 hosts"), "{out}");
    let policy = b.json(&[
        "get",
        "hostdeploypolicy",
        "lend-to-tenants",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(
        policy["spec"]["hostClaimNamespaces"]["names"][0],
        "tenant-a"
    );

    // B registered each host with the same credentials (and polled its power since): nothing
    // changed, so no CredentialsChanged.
    until("B polled every host", Duration::from_secs(60), || {
        (0..3).all(|i| emu.counters().system(i).get >= gets_before[i] + 4)
    });
    until("hosts available at B", Duration::from_secs(60), || {
        hosts(&b)
            .iter()
            .filter(|h| {
                h["status"]["provisioning"]["state"] == "available"
                    && h["status"]["errorType"].is_null()
            })
            .count()
            == 3
    });
    let events = b.json(&["get", "events", "-n", "infra", "-o", "json"]);
    let reasons: Vec<String> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e["reason"], e["message"]))
        .collect();
    assert!(
        !reasons.iter().any(|r| r.contains("CredentialsChanged")),
        "{reasons:#?}"
    );
    drop(emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_to_a_stopped_target_says_connection_refused() {
    let emu = emulator(1).await;
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(da.path(), free_port(), &FLAGS);
    let mut b = serve(db.path(), free_port(), &FLAGS);
    let o = a.kubectl_stdin(&["apply", "-f", "-"], Some(&fleet_yaml(&emu, 1)));
    assert!(o.status.success(), "{}", text(&o));
    b.kill();
    for extra in [&["--dry-run"][..], &[]] {
        let o = run_move(&a, &b, extra, None);
        let out = text(&o);
        assert!(!o.status.success(), "{out}");
        assert!(out.contains("connection refused"), "{out}");
        assert!(out.contains(&b.url), "names the target: {out}");
        assert!(!out.contains("install the CRDs"), "{out}");
    }
    // Nothing at A changed.
    for h in hosts(&a) {
        assert!(
            h["metadata"]["annotations"]["baremetalhost.metal3.io/paused"].is_null(),
            "{h:#}"
        );
    }
}
