//! Remote claims across three `ferrometal serve` processes and sushy-tools: cluster A holds the
//! hosts and BMCs; a tenant in cluster B claims one of them with nothing but a kubeconfig for a
//! tenant identity in A; the link is cut (A stopped) and restored; the claim is pivoted from B
//! to C with `ferrometal move --claims` and keeps its host; deleting it at C releases the host
//! in A. Every outcome is checked on the BMC emulator.

mod serve_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ferrometal_test_support::peers::{FileServer, Sushy};
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

const SERVE_ARGS: [&str; 8] = [
    "--remote-claim-servers",
    "127.0.0.1",
    "--power-poll-interval",
    "2",
    "--error-backoff",
    "1",
    "--bmc-timeout",
    "5",
];
const CREDENTIALS: &str = "rack1-bmc";
const HARDWARE: &str = r#"{"ramMebibytes": 8192, "cpu": {"arch": "x86_64", "model": "m", "clockMegahertz": 2400, "count": 16}}"#;

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn run_as(s: &Serve, kc: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let o = s.kubectl_with(kc, args, stdin);
    assert!(o.status.success(), "kubectl {args:?}: {}", out(&o));
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn json_of(s: &Serve, kc: &Path, args: &[&str]) -> Option<Value> {
    let mut full = args.to_vec();
    full.extend(["-o", "json"]);
    let o = s.kubectl_with(kc, &full, None);
    o.status
        .success()
        .then(|| serde_json::from_slice(&o.stdout).unwrap())
}

fn condition(obj: &Value, t: &str) -> (String, String) {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

fn wait(what: &str, logs: &[&Serve], mut ok: impl FnMut() -> bool) {
    for _ in 0..900 {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Each serve's hosts (state, error, backoff) beside its log: a wait that runs out under
    // load says where the hosts stood.
    let logs: Vec<String> = logs
        .iter()
        .map(|s| {
            let hosts = s.kubectl_with(
                &s.kubeconfig,
                &[
                    "get",
                    "bmh",
                    "-A",
                    "-o",
                    "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,STATE:.status.provisioning.state,POWER:.status.poweredOn,ERRORS:.status.errorCount,ERROR:.status.errorMessage",
                ],
                None,
            );
            format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&hosts.stdout),
                String::from_utf8_lossy(&hosts.stderr),
                std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default()
            )
        })
        .collect();
    panic!("never: {what}\n{}", logs.join("\n-----\n"));
}

/// Binds `user` to `ferrometal-tenant` in `namespace` at `s`; returns the user's kubeconfig.
fn tenant_of(s: &Serve, namespace: &str, user: &str) -> std::path::PathBuf {
    s.ok(&[
        "create",
        "rolebinding",
        user,
        "-n",
        namespace,
        "--clusterrole=ferrometal-tenant",
        &format!("--user={user}"),
    ]);
    s.user_kubeconfig(user, &[], namespace)
}

/// The tenant sets a claim's `poweredOn`.
fn set_power(s: &Serve, kc: &Path, claim: &str, on: bool) {
    let patch = format!(r#"{{"spec":{{"poweredOn":{on}}}}}"#);
    run_as(
        s,
        kc,
        &["patch", "hostclaim", claim, "--type", "merge", "-p", &patch],
        None,
    );
}

fn system(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

fn media_inserts(sushy: &Sushy) -> usize {
    sushy
        .changes()
        .iter()
        .filter(|l| l.contains("InsertMedia"))
        .count()
}

/// The cluster holding the hosts: two hosts on sushy-tools lent to `tenant-a`, where `alice`
/// is a tenant. Returns alice's kubeconfig.
fn infrastructure(a: &Serve, sushy: &Sushy) -> std::path::PathBuf {
    let host = |i: usize| {
        format!(
            "apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata:\n  name: bm-{i}\n  namespace: infra\n  labels: {{pool: web}}\n  annotations: {{inspect.metal3.io/hardwaredetails: '{HARDWARE}'}}\nspec:\n  online: false\n  inspectionMode: disabled\n  bmc: {{address: \"{}\", credentialsName: {CREDENTIALS}}}\n",
            sushy
                .address(&system(i))
                .replace("redfish+http", "redfish-virtualmedia+http")
        )
    };
    let yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: infra}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-a}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: {CREDENTIALS}, namespace: infra}}\nstringData: {{username: admin, password: password}}\n---\n\
         {}---\n{}---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {{name: lend, namespace: infra}}\nspec: {{hostClaimNamespaces: {{names: [tenant-a]}}}}\n",
        host(0),
        host(1)
    );
    run_as(a, &a.kubeconfig, &["apply", "-f", "-"], Some(&yaml));
    let alice = tenant_of(a, "tenant-a", "alice");
    wait("both hosts available in A", &[a], || {
        a.host_states("infra") == ["available", "available"]
    });
    alice
}

/// A tenant namespace `tenant-b` at `s` whose tenant is `bob`; returns bob's kubeconfig.
fn tenant(s: &Serve) -> std::path::PathBuf {
    s.ok(&["create", "namespace", "tenant-b"]);
    tenant_of(s, "tenant-b", "bob")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_served_by_another_cluster_survives_a_cut_link_and_a_pivot() {
    let sushy = Sushy::start(2, "admin:password");
    let files = FileServer::start();
    let iso = files.url("live.iso");
    let (dir_a, dir_b, dir_c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let port_a = free_port();
    let mut a = serve(dir_a.path(), port_a, &SERVE_ARGS);
    let alice = infrastructure(&a, &sushy);
    let b = serve(dir_b.path(), free_port(), &SERVE_ARGS);
    let bob = tenant(&b);

    // Bob, at B, holds a kubeconfig for alice's identity at A and claims a host with it.
    let alice_path = alice.to_str().unwrap().to_string();
    run_as(
        &b,
        &bob,
        &[
            "create",
            "secret",
            "generic",
            "a-link",
            &format!("--from-file=kubeconfig={alice_path}"),
        ],
        None,
    );
    let claim = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web-ud}}\nstringData: {{userData: \"#cloud-config\\nhostname: web\\n\"}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: web\n  annotations: {{ferrometal.io/remote-kubeconfig: a-link}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: web}}}}\n  userData: {{name: web-ud}}\n  image: {{url: \"{iso}\", format: live-iso}}\n"
    );
    run_as(&b, &bob, &["apply", "-f", "-"], Some(&claim));
    wait("the claim at B provisioned and ready", &[&a, &b], || {
        json_of(&b, &bob, &["get", "hostclaim", "web"]).is_some_and(|c| {
            condition(&c, "Provisioned").0 == "True" && condition(&c, "Ready").0 == "True"
        })
    });
    let at_b = json_of(&b, &bob, &["get", "hostclaim", "web"]).unwrap();
    assert_eq!(at_b["status"]["poweredOn"], true);
    let remote_id = at_b["metadata"]["annotations"]["hostclaim.ferrometal.io/remote-id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(remote_id, at_b["metadata"]["uid"].as_str().unwrap());

    // At A: the mirror, bound as any claim, and its user data copied next to it.
    let mirror = json_of(&a, &alice, &["get", "hostclaim", "web"]).expect("mirror at A");
    let mirror_uid = mirror["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(
        mirror["metadata"]["annotations"]["hostclaim.ferrometal.io/remote-id"],
        remote_id.as_str()
    );
    assert!(
        mirror["metadata"]["annotations"]
            .get("ferrometal.io/remote-kubeconfig")
            .is_none()
    );
    let host = mirror["status"]["bareMetalHost"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let i: usize = host.trim_start_matches("bm-").parse().unwrap();
    let ud = json_of(&a, &alice, &["get", "secret", "web-userdata"]).expect("user data at A");
    assert!(ud["data"]["userData"].is_string());
    let cd = sushy.virtual_cd(&system(i));
    assert_eq!(cd["Inserted"], true, "{cd}");
    assert_eq!(cd["Image"], iso.as_str());
    assert_eq!(sushy.system(&system(i))["PowerState"], "On");
    assert_eq!(media_inserts(&sushy), 1);
    // The inspection data, copied into bob's namespace at B.
    wait("HardwareData at B", &[&b], || {
        json_of(&b, &bob, &["get", "hardwaredata", "web"])
            .is_some_and(|hd| hd["spec"]["hardware"]["cpu"]["count"] == 16)
    });
    // Nothing bob can read at B names a BMC, its credentials or A's identity.
    for args in [
        &["get", "hostclaim", "web", "-o", "json"][..],
        &["get", "hardwaredata", "web", "-o", "json"],
        &["get", "events", "-o", "json"],
    ] {
        let text = run_as(&b, &bob, args, None);
        for secret in [
            format!("127.0.0.1:{}", sushy.port),
            CREDENTIALS.to_string(),
            "password\"".to_string(),
            "client-key-data".to_string(),
        ] {
            assert!(!text.contains(&secret), "{args:?} shows {secret}: {text}");
        }
    }

    // A reboot asked at B reaches the BMC, once, and the request is consumed on both sides.
    let resets = || {
        sushy
            .changes()
            .iter()
            .filter(|l| l.contains(&system(i)) && l.contains("Reset"))
            .count()
    };
    let before = resets();
    run_as(
        &b,
        &bob,
        &["annotate", "hostclaim", "web", "reboot.metal3.io="],
        None,
    );
    wait("the reboot passed on and consumed", &[&a, &b], || {
        let gone = |s: &Serve, kc: &Path| {
            json_of(s, kc, &["get", "hostclaim", "web"]).is_some_and(|c| {
                c["metadata"]["annotations"]
                    .get("reboot.metal3.io")
                    .is_none()
            })
        };
        gone(&b, &bob) && gone(&a, &alice) && resets() >= before + 2
    });
    wait("back on after the reboot", &[&a], || {
        sushy.system(&system(i))["PowerState"] == "On"
    });

    // An operation asked at B: a one-time network boot set on the BMC, once.
    let patches = || {
        sushy
            .changes()
            .iter()
            .filter(|l| l.contains("PATCH") && l.contains(&system(i)))
            .count()
    };
    let before = patches();
    run_as(
        &b,
        &bob,
        &[
            "annotate",
            "hostclaim",
            "web",
            "ferrometal.io/operation=PxeOnce",
        ],
        None,
    );
    wait("the operation reached the BMC", &[&a, &b], || {
        patches() > before
            && json_of(&b, &bob, &["get", "hostclaim", "web"]).is_some_and(|c| {
                c["metadata"]["annotations"]
                    .get("ferrometal.io/operation")
                    .is_none()
            })
    });
    let after_operation = patches();

    // The link is cut: B says so and keeps what it knew; bob's change waits for the link.
    a.kill();
    wait("B reports the cut link", &[&b], || {
        json_of(&b, &bob, &["get", "hostclaim", "web"]).is_some_and(|c| {
            condition(&c, "Synchronized") == ("False".into(), "RemoteClusterUnreachable".into())
        })
    });
    let cut = json_of(&b, &bob, &["get", "hostclaim", "web"]).unwrap();
    assert_eq!(condition(&cut, "Associated").0, "True", "last known kept");
    set_power(&b, &bob, "web", false);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        sushy.system(&system(i))["PowerState"],
        "On",
        "nothing in A changes"
    );

    // The link is back: the claim converges, with no action repeated.
    let a = serve(dir_a.path(), port_a, &SERVE_ARGS);
    wait(
        "the BMC powered off after the link returned",
        &[&a, &b],
        || sushy.system(&system(i))["PowerState"] == "Off",
    );
    wait("B in step again", &[&a, &b], || {
        json_of(&b, &bob, &["get", "hostclaim", "web"]).is_some_and(|c| {
            condition(&c, "Synchronized").0 == "True" && c["status"]["poweredOn"] != true
        })
    });
    assert_eq!(media_inserts(&sushy), 1, "never provisioned again");
    assert_eq!(patches(), after_operation, "the operation was not repeated");

    // Pivot: the claim moves from B to C, its host stays in A.
    let c = serve(dir_c.path(), free_port(), &SERVE_ARGS);
    let mv = |crash: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrometal"));
        cmd.args(["move", "--claims", "--namespace", "tenant-b", "--from"])
            .arg(&b.kubeconfig)
            .arg("--to")
            .arg(&c.kubeconfig);
        if let Some(phase) = crash {
            cmd.env("FERROMETAL_MOVE_CRASH_AFTER", phase);
        }
        cmd.output().unwrap()
    };
    // Killed after the copy: the claim is at both ends, paused; running again completes it.
    let crashed = mv(Some("copy"));
    assert!(!crashed.status.success(), "{}", out(&crashed));
    for s in [&b, &c] {
        let x = json_of(
            s,
            &s.kubeconfig,
            &["get", "hostclaim", "web", "-n", "tenant-b"],
        )
        .unwrap();
        assert_eq!(
            x["metadata"]["annotations"]["baremetalhost.metal3.io/paused"],
            "ferrometal.io/move"
        );
    }
    let moved = mv(None);
    assert!(moved.status.success(), "move: {}", out(&moved));
    let report = out(&moved);
    assert!(report.contains("1 claim(s) moved"), "{report}");
    assert!(!report.contains("client-key-data"), "{report}");
    for what in [
        ["hostclaim", "web"],
        ["secret", "a-link"],
        ["secret", "web-ud"],
    ] {
        let o = b.kubectl(&["get", what[0], what[1], "-n", "tenant-b"]);
        assert!(!o.status.success(), "{what:?} still at B");
    }
    let bob_c = tenant_of(&c, "tenant-b", "bob");
    wait("the claim at C in step with its host", &[&a, &c], || {
        json_of(&c, &bob_c, &["get", "hostclaim", "web"]).is_some_and(|x| {
            condition(&x, "Associated").0 == "True"
                && condition(&x, "Provisioned").0 == "True"
                && condition(&x, "Synchronized").0 == "True"
                && x["metadata"]["annotations"]
                    .get("baremetalhost.metal3.io/paused")
                    .is_none()
        })
    });
    let mirror = json_of(&a, &alice, &["get", "hostclaim", "web"]).expect("mirror kept");
    assert_eq!(
        mirror["metadata"]["uid"],
        mirror_uid.as_str(),
        "same mirror"
    );
    assert_eq!(mirror["status"]["bareMetalHost"]["name"], host.as_str());
    assert!(
        mirror["metadata"]["annotations"]
            .get("baremetalhost.metal3.io/paused")
            .is_none(),
        "the mirror is unpaused once C took over"
    );
    set_power(&c, &bob_c, "web", true);
    wait("powered on from C", &[&a, &c], || {
        sushy.system(&system(i))["PowerState"] == "On"
    });
    assert_eq!(media_inserts(&sushy), 1, "the pivot provisioned nothing");

    // Released from C: the mirror goes, the host in A is deprovisioned and free again.
    run_as(
        &c,
        &bob_c,
        &["delete", "hostclaim", "web", "--wait=false"],
        None,
    );
    wait("the claim at C gone", &[&a, &c], || {
        json_of(&c, &bob_c, &["get", "hostclaim", "web"]).is_none()
    });
    assert!(json_of(&a, &alice, &["get", "hostclaim", "web"]).is_none());
    assert!(json_of(&a, &alice, &["get", "secret", "web-userdata"]).is_none());
    // A's credentials (alice's client key) never left B's Secret: not in B's or C's log, and
    // not in anything the move printed.
    let key = std::fs::read_to_string(&alice)
        .unwrap()
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("client-key-data:")
                .map(|v| v.trim().to_string())
        })
        .expect("alice's kubeconfig embeds her key");
    assert!(key.len() > 100);
    for s in [&b, &c] {
        let log = std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default();
        assert!(!log.contains(&key), "{:?} logged the remote key", s.dir);
    }
    assert!(!report.contains(&key));
    wait("the host free and available in A", &[&a], || {
        json_of(&a, &a.kubeconfig, &["get", "bmh", &host, "-n", "infra"]).is_some_and(|h| {
            h["status"]["provisioning"]["state"] == "available"
                && h["spec"]["consumerRef"].is_null()
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_claim_moved_away_keeps_its_host_through_a_remote_kubeconfig() {
    let sushy = Sushy::start(2, "admin:password");
    let files = FileServer::start();
    let iso = files.url("live.iso");
    let (dir_a, dir_c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(dir_a.path(), free_port(), &SERVE_ARGS);
    let alice = infrastructure(&a, &sushy);
    let claim = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: db}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: web}}}}\n  image: {{url: \"{iso}\", format: live-iso}}\n"
    );
    run_as(&a, &alice, &["apply", "-f", "-"], Some(&claim));
    wait("the local claim provisioned", &[&a], || {
        json_of(&a, &alice, &["get", "hostclaim", "db"])
            .is_some_and(|c| condition(&c, "Provisioned").0 == "True")
    });
    let before = json_of(&a, &alice, &["get", "hostclaim", "db"]).unwrap();
    let host = before["status"]["bareMetalHost"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let i: usize = host.trim_start_matches("bm-").parse().unwrap();
    let c = serve(dir_c.path(), free_port(), &SERVE_ARGS);
    let mv = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ferrometal"))
            .args(["move", "--claims", "-n", "tenant-a", "--from"])
            .arg(&a.kubeconfig)
            .arg("--to")
            .arg(&c.kubeconfig)
            .args(extra)
            .output()
            .unwrap()
    };
    // Served by the source's own hosts: the target needs a way back to them.
    let refused = mv(&[]);
    assert!(!refused.status.success());
    assert!(
        out(&refused).contains("--remote-kubeconfig"),
        "{}",
        out(&refused)
    );
    let alice_path = alice.to_str().unwrap();
    let dry = mv(&["--dry-run", "--remote-kubeconfig", alice_path]);
    assert!(dry.status.success(), "{}", out(&dry));
    assert!(out(&dry).contains("stays as the mirror"), "{}", out(&dry));
    assert!(
        !c.kubectl(&["get", "hostclaim", "db", "-n", "tenant-a"])
            .status
            .success()
    );

    let moved = mv(&["--remote-kubeconfig", alice_path]);
    assert!(moved.status.success(), "{}", out(&moved));
    let alice_c = tenant_of(&c, "tenant-a", "alice");
    wait("the moved claim in step at C", &[&a, &c], || {
        json_of(&c, &alice_c, &["get", "hostclaim", "db"]).is_some_and(|x| {
            x["metadata"]["annotations"]["ferrometal.io/remote-kubeconfig"]
                == "ferrometal-remote-kubeconfig"
                && condition(&x, "Provisioned").0 == "True"
                && condition(&x, "Synchronized").0 == "True"
        })
    });
    // The claim at A is the same object, now the mirror; its host never moved.
    let after = json_of(&a, &alice, &["get", "hostclaim", "db"]).unwrap();
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["status"]["bareMetalHost"]["name"], host.as_str());
    assert_eq!(
        after["metadata"]["labels"]["hostclaim.ferrometal.io/mirror-of"],
        "db"
    );
    set_power(&c, &alice_c, "db", false);
    wait("powered off from C", &[&a, &c], || {
        sushy.system(&system(i))["PowerState"] == "Off"
    });
    assert_eq!(media_inserts(&sushy), 1, "provisioned once, never again");

    // The mirror deleted at A (its host released there): C says so and never makes a new one
    // (that would bind another host behind the tenant's back); deleting the claim then ends it.
    run_as(
        &a,
        &alice,
        &["delete", "hostclaim", "db", "--wait=false"],
        None,
    );
    wait("C reports the mirror gone", &[&a, &c], || {
        json_of(&c, &alice_c, &["get", "hostclaim", "db"]).is_some_and(|x| {
            condition(&x, "Associated") == ("False".into(), "MissingBareMetalHost".into())
        })
    });
    wait("the host released at A", &[&a], || {
        json_of(&a, &a.kubeconfig, &["get", "bmh", &host, "-n", "infra"])
            .is_some_and(|h| h["spec"]["consumerRef"].is_null())
    });
    assert!(
        json_of(&a, &alice, &["get", "hostclaim", "db"]).is_none(),
        "not re-created"
    );
    run_as(
        &c,
        &alice_c,
        &["delete", "hostclaim", "db", "--wait=false"],
        None,
    );
    wait("the claim at C gone", &[&c], || {
        json_of(&c, &alice_c, &["get", "hostclaim", "db"]).is_none()
    });
    assert!(json_of(&a, &alice, &["get", "hostclaim", "db"]).is_none());
}

/// Issue 28 (5): a remote claim whose kubeconfig Secret cannot work (here it runs a program,
/// which is refused) is deleted at once, without the remote cluster: released here, with a
/// Warning saying the mirror there, if any, was not deleted. (`kubectl delete` used to time
/// out with the finalizer in place until the Secret itself was deleted.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_claim_with_an_invalid_kubeconfig_can_be_deleted() {
    let dir_b = tempfile::tempdir().unwrap();
    let b = serve(dir_b.path(), free_port(), &SERVE_ARGS);
    let bob = tenant(&b);
    let bad = "apiVersion: v1\nkind: Config\nclusters: [{name: a, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
               users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}}]\n\
               contexts: [{name: c, context: {cluster: a, user: u, namespace: tenant-b}}]\ncurrent-context: c\n";
    let claim = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: a-link}}\nstringData:\n  kubeconfig: |\n{}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: web\n  annotations: {{ferrometal.io/remote-kubeconfig: a-link}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: web}}}}\n",
        bad.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    run_as(&b, &bob, &["apply", "-f", "-"], Some(&claim));
    wait("the claim says its kubeconfig is invalid", &[&b], || {
        json_of(&b, &bob, &["get", "hostclaim", "web"]).is_some_and(|c| {
            condition(&c, "Synchronized") == ("False".into(), "RemoteKubeconfigInvalid".into())
        })
    });
    run_as(
        &b,
        &bob,
        &["delete", "hostclaim", "web", "--timeout=60s"],
        None,
    );
    assert!(json_of(&b, &bob, &["get", "hostclaim", "web"]).is_none());
    let events = json_of(&b, &bob, &["get", "events.events.k8s.io"]).unwrap();
    let abandoned = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "RemoteClaimAbandoned")
        .unwrap_or_else(|| panic!("no RemoteClaimAbandoned Event: {events:#}"));
    assert_eq!(abandoned["type"], "Warning");
    let note = abandoned["note"].as_str().unwrap();
    assert!(note.contains("was not deleted"), "{note}");
}
