//! Multi-tenancy from the tenant's chair: `ferrometal serve` with the project's Redfish
//! emulator behind two hosts in `infra`, and a tenant who holds only a minted kubeconfig bound
//! to `ferrometal-tenant` in `tenant-a`. The tenant runs the whole flow with kubectl (claim,
//! provision, power off and on, reboot, release), every outcome is checked on the BMC, the
//! tenant is refused everything of the infrastructure, and nothing the tenant can read names a
//! BMC address, a credentials Secret or a password. A claim whose image its host cannot take is
//! told why in its own terms (and still nothing of the BMC), and goes on once corrected.

mod serve_common;

use std::path::Path;
use std::time::Duration;

use ferrometal_emulator::{Emulator, EmulatorConfig};
use ferrometal_test_support::images::ImageServer;
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

const PASSWORD: &str = "s3cret-bmc-pw-7431";
const CREDENTIALS: &str = "rack7-bmc-credentials";
/// The emulator, like a real BMC, fetches the image it inserts: the tenants' images are served.
static IMAGES: std::sync::LazyLock<ImageServer> = std::sync::LazyLock::new(ImageServer::start);
/// Never fetched: refused before anything reaches a BMC.
const DISK: &str = "http://127.0.0.1:1/tenant-disk.qcow2";

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn as_tenant(s: &Serve, kc: &Path, args: &[&str]) -> String {
    let o = s.kubectl_with(kc, args, None);
    assert!(o.status.success(), "tenant kubectl {args:?}: {}", out(&o));
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn tenant_refused(s: &Serve, kc: &Path, args: &[&str]) {
    let o = s.kubectl_with(kc, args, None);
    assert!(
        !o.status.success(),
        "tenant was allowed {args:?}: {}",
        out(&o)
    );
    assert!(
        out(&o).contains("Forbidden") || out(&o).contains("forbidden"),
        "{args:?}: {}",
        out(&o)
    );
}

fn claim_json(s: &Serve, kc: &Path, ns: &str, name: &str) -> Value {
    serde_json::from_str(&as_tenant(
        s,
        kc,
        &["get", "hostclaim", name, "-n", ns, "-o", "json"],
    ))
    .unwrap()
}

fn condition(claim: &Value, t: &str) -> (String, String, String) {
    claim["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

/// Everything the tenant can read in its namespace: claims, Secrets, HardwareData, Events, as
/// JSON and as kubectl describes them.
fn tenant_readable(s: &Serve, kc: &Path) -> String {
    let mut readable = String::new();
    for args in [
        &[
            "get",
            "hostclaims,secrets,hardwaredata,events",
            "-o",
            "json",
        ][..],
        &["get", "events.events.k8s.io", "-o", "json"],
        &["describe", "hostclaims"],
        &["get", "hostclaims", "-o", "wide"],
    ] {
        readable.push_str(&as_tenant(s, kc, args));
    }
    readable
}

/// Neither the BMC's address, nor its password, nor anything of its protocol.
fn nothing_of_the_infrastructure(readable: &str, bmc_authority: &str) {
    for secret in [bmc_authority, PASSWORD, "redfish"] {
        assert!(!readable.contains(secret), "the tenant can read {secret:?}");
    }
}

fn count(actions: &[String], needles: &[&str]) -> usize {
    actions
        .iter()
        .filter(|a| needles.iter().any(|n| a.contains(n)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_claims_uses_and_releases_a_host_without_seeing_infrastructure() {
    let iso = IMAGES.url("tenant-live.iso");
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 3,
            power_delay: Duration::from_millis(200),
            username: "admin".into(),
            password: PASSWORD.into(),
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
            "2",
            "--error-backoff",
            "1",
            "--bmc-timeout",
            "3",
        ],
    );
    let address = |i| {
        emu.system_url(i)
            .replace("http://", "redfish-virtualmedia+http://")
    };
    let bmc_authority = emu
        .system_url(0)
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let infra = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: infra}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-a}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-b}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: {CREDENTIALS}, namespace: infra}}\nstringData: {{username: admin, password: {PASSWORD}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bm-0, namespace: infra, labels: {{pool: web}}}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: {CREDENTIALS}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bm-1, namespace: infra, labels: {{pool: web}}}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: {CREDENTIALS}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bm-2, namespace: infra, labels: {{pool: disk}}}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: {CREDENTIALS}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {{name: lend-to-tenants, namespace: infra}}\nspec: {{hostClaimNamespaces: {{names: [tenant-a]}}}}\n",
        address(0),
        address(1),
        address(2)
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&infra));
    assert!(o.status.success(), "{}", out(&o));
    let alice = s.tenant("alice", "tenant-a");
    s.wait("all hosts available", || {
        s.host_states("infra") == ["available", "available", "available"]
    });

    // The tenant's flow, with nothing but its kubeconfig.
    let claim = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web-ud}}\nstringData: {{userData: \"#cloud-config\\nhostname: web\\n\"}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: web}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: web}}}}\n  userData: {{name: web-ud}}\n  image: {{url: \"{iso}\", format: live-iso}}\n"
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&claim));
    assert!(o.status.success(), "{}", out(&o));
    s.wait("the claim provisioned and ready", || {
        let c = claim_json(&s, &alice, "tenant-a", "web");
        condition(&c, "Provisioned").0 == "True" && condition(&c, "Ready").0 == "True"
    });
    let c = claim_json(&s, &alice, "tenant-a", "web");
    let host = c["status"]["bareMetalHost"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let i: usize = host.trim_start_matches("bm-").parse().unwrap();
    let other = 1 - i;
    let bmc = emu.state(i);
    assert!(bmc.virtual_media.inserted, "{:?}", bmc.actions);
    assert_eq!(bmc.virtual_media.image.as_deref(), Some(iso.as_str()));
    assert_eq!(bmc.power_state.as_str(), "On");
    assert_eq!(c["status"]["poweredOn"], true);
    let table = as_tenant(&s, &alice, &["get", "hostclaims"]);
    assert!(
        table.contains("ASSOCIATED") && table.contains("True"),
        "{table}"
    );
    // The inspection data, readable in the tenant's own namespace.
    let hd = as_tenant(&s, &alice, &["get", "hardwaredata", "web", "-o", "json"]);
    assert!(hd.contains("\"hardware\""), "{hd}");

    // Power off and on through the claim, observed on the BMC.
    as_tenant(
        &s,
        &alice,
        &[
            "patch",
            "hostclaim",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"poweredOn":false}}"#,
        ],
    );
    s.wait("the BMC powered off", || {
        emu.state(i).power_state.as_str() == "Off"
    });
    s.wait("the claim reports power off", || {
        claim_json(&s, &alice, "tenant-a", "web")["status"]["poweredOn"] != true
    });
    as_tenant(
        &s,
        &alice,
        &[
            "patch",
            "hostclaim",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"poweredOn":true}}"#,
        ],
    );
    s.wait("the BMC powered on", || {
        emu.state(i).power_state.as_str() == "On"
    });
    // (A reboot of a host still seen as off is a no-op, as in metal3: wait until it is seen on.)
    s.wait("the claim reports power on", || {
        claim_json(&s, &alice, "tenant-a", "web")["status"]["poweredOn"] == true
    });

    // A reboot: one more power-off on the BMC, then on again.
    let offs = |a: &[String]| count(a, &["ForceOff", "GracefulShutdown"]);
    let before = offs(&emu.state(i).actions);
    as_tenant(
        &s,
        &alice,
        &["annotate", "hostclaim", "web", "reboot.metal3.io="],
    );
    s.wait("the reboot powered off once", || {
        offs(&emu.state(i).actions) == before + 1
    });
    s.wait("back on after the reboot", || {
        emu.state(i).power_state.as_str() == "On"
    });
    s.wait("the reboot request consumed", || {
        claim_json(&s, &alice, "tenant-a", "web")["metadata"]["annotations"]
            .get("reboot.metal3.io")
            .is_none()
    });
    assert_eq!(
        offs(&emu.state(i).actions),
        before + 1,
        "rebooted exactly once"
    );

    // A claim naming the BMC credentials Secret of another namespace gets nothing copied.
    let sneaky = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: sneaky}}\nspec:\n  hostSelector: {{matchLabels: {{pool: web}}}}\n  userData: {{name: {CREDENTIALS}, namespace: infra}}\n  image: {{url: \"{iso}\", format: live-iso}}\n"
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&sneaky));
    assert!(o.status.success(), "{}", out(&o));
    s.wait("the cross-namespace Secret refused", || {
        let (st, reason, _) = condition(
            &claim_json(&s, &alice, "tenant-a", "sneaky"),
            "Synchronized",
        );
        st == "False" && reason == "UserDataSecretSyncFailure"
    });
    let copies = s.ok(&["get", "secrets", "-n", "infra", "-o", "name"]);
    assert!(
        !copies.contains(&format!("bm-{other}-userdata")),
        "{copies}"
    );
    let other_host: Value = serde_json::from_str(&s.ok(&[
        "get",
        "bmh",
        &format!("bm-{other}"),
        "-n",
        "infra",
        "-o",
        "json",
    ]))
    .unwrap();
    assert!(
        other_host["spec"]["image"].is_null(),
        "no image without its user data"
    );
    assert!(!emu.state(other).virtual_media.inserted);

    // A claim whose image its host cannot take (the redfish provisioner boots live ISOs only):
    // the tenant reads the cause, in its claim's terms; the host's own message (naming the
    // provisioner) stays with the infrastructure team, as the search below shows.
    let disk = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: disk}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: disk}}}}\n  image: {{url: \"{DISK}\", format: qcow2, checksum: 0123456789abcdef0123456789abcdef, checksumType: md5}}\n"
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&disk));
    assert!(o.status.success(), "{}", out(&o));
    s.wait(
        "the disk claim says why its image cannot be deployed",
        || {
            let c = claim_json(&s, &alice, "tenant-a", "disk");
            let (st, reason, msg) = condition(&c, "Provisioned");
            st == "False"
                && reason == "ImageFormatNotSupported"
                && msg.contains("spec.image.format qcow2")
                && msg.contains("live-iso")
                && condition(&c, "Ready").1 == "ImageFormatNotSupported"
        },
    );
    // The tenant points its claim at another live ISO.
    let set_disk_image = |url: &str| {
        let patch = serde_json::json!({"spec": {"image": {
            "url": url, "format": "live-iso", "checksum": null, "checksumType": null,
        }}});
        as_tenant(
            &s,
            &alice,
            &[
                "patch",
                "hostclaim",
                "disk",
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ],
        );
    };
    let host_error = || {
        s.json(&["get", "bmh", "bm-2", "-n", "infra", "-o", "json"])["status"]["errorMessage"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let infra_reads = host_error();
    assert!(
        infra_reads.contains("redfish provisioner"),
        "the infrastructure team has the full message: {infra_reads}"
    );
    assert!(!emu.state(2).virtual_media.inserted, "nothing booted");
    let readable = tenant_readable(&s, &alice);
    assert!(readable.contains("spec.image.format qcow2"), "{readable}");
    nothing_of_the_infrastructure(&readable, &bmc_authority);

    // An image the host's BMC cannot fetch (the image server answers 404, the BMC refuses the
    // insert): the tenant is told its URL was refused, and none of the BMC's answer.
    let missing = IMAGES.url("missing/tenant-live.iso");
    set_disk_image(&missing);
    let mut said = String::new();
    s.wait("the disk claim says its image URL was refused", || {
        let (st, reason, msg) =
            condition(&claim_json(&s, &alice, "tenant-a", "disk"), "Provisioned");
        said = msg;
        st == "False" && reason == "ImageURLRefused"
    });
    assert!(
        said.contains(&format!("spec.image.url {missing:?}")),
        "{said}"
    );
    let infra_reads = host_error();
    assert!(
        infra_reads.contains("HTTP 400") && infra_reads.contains(&bmc_authority),
        "the infrastructure team has the BMC's answer: {infra_reads}"
    );
    let readable = tenant_readable(&s, &alice);
    assert!(readable.contains("ImageURLRefused"), "{readable}");
    assert!(!readable.contains("HTTP 400") && !readable.contains("Failed fetching"));
    nothing_of_the_infrastructure(&readable, &bmc_authority);

    // A claim from a namespace no policy admits never binds, and says why.
    let o = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {name: stray, namespace: tenant-b}\nspec: {hostSelector: {matchLabels: {pool: web}}}\n"),
    );
    assert!(o.status.success(), "{}", out(&o));
    s.wait("the stray claim explains itself", || {
        let c = s.json(&["get", "hostclaim", "stray", "-n", "tenant-b", "-o", "json"]);
        let (st, reason, msg) = condition(&c, "Associated");
        st == "False"
            && reason == "NoBareMetalHost"
            && msg.contains("no HostDeployPolicy admits claims from namespace tenant-b")
    });

    // Refused: the infrastructure and other tenants; `auth can-i` agrees.
    for args in [
        &["get", "bmh", "-n", "infra"][..],
        &["get", "secrets", "-n", "infra"],
        &["get", "secret", CREDENTIALS, "-n", "infra"],
        &["get", "hardwaredata", "-n", "infra"],
        &["get", "hostdeploypolicies", "-n", "infra"],
        // metal3's firmware and other host kinds live with the hosts.
        &["get", "hostfirmwaresettings", "-n", "infra"],
        &["get", "hostfirmwarecomponents", "-n", "infra"],
        &["get", "firmwareschemas", "-n", "infra"],
        &["get", "dataimages", "-n", "infra"],
        &["get", "bmceventsubscriptions", "-n", "infra"],
        &["get", "hostfirmwaresettings", "-n", "tenant-a"],
        &["get", "hostclaims", "-n", "tenant-b"],
        &["get", "bmh", "-A"],
        &[
            "patch",
            "hostclaim",
            "web",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"poweredOn":false}}"#,
        ],
    ] {
        tenant_refused(&s, &alice, args);
    }
    let can_i = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        s.kubectl_with(&alice, &all, None).stdout == b"yes\n"
    };
    assert!(can_i(&["create", "hostclaims", "-n", "tenant-a"]));
    assert!(can_i(&["get", "hardwaredata", "-n", "tenant-a"]));
    assert!(!can_i(&["get", "baremetalhosts", "-n", "infra"]));
    assert!(!can_i(&["get", "secrets", "-n", "infra"]));
    assert!(!can_i(&["create", "hostclaims", "-n", "tenant-b"]));

    // Everything the tenant can read, searched for the BMC's address, the credentials Secret's
    // name and its password.
    let readable = tenant_readable(&s, &alice);
    assert!(
        readable.contains("BareMetalHostAssociated"),
        "the search saw the claims"
    );
    nothing_of_the_infrastructure(&readable, &bmc_authority);
    // The credentials Secret's name appears only where the tenant wrote it itself (the sneaky
    // claim's spec), never in anything the system wrote.
    let claims: Value =
        serde_json::from_str(&as_tenant(&s, &alice, &["get", "hostclaims", "-o", "json"])).unwrap();
    for c in claims["items"].as_array().unwrap() {
        assert!(
            !c["status"].to_string().contains(CREDENTIALS),
            "{}",
            c["status"]
        );
    }
    let events = as_tenant(&s, &alice, &["get", "events.events.k8s.io", "-o", "json"]);
    assert!(
        !events.contains(CREDENTIALS) && !events.contains("infra/"),
        "{events}"
    );

    // The tenant corrects its image: the host takes it and the claim goes on to Ready.
    set_disk_image(&iso);
    s.wait("the corrected claim provisioned and ready", || {
        let c = claim_json(&s, &alice, "tenant-a", "disk");
        condition(&c, "Provisioned").0 == "True" && condition(&c, "Ready").0 == "True"
    });
    let bmc = emu.state(2);
    assert!(bmc.virtual_media.inserted, "{:?}", bmc.actions);
    assert_eq!(bmc.virtual_media.image.as_deref(), Some(iso.as_str()));

    // Release: the tenant deletes its claims; the host is deprovisioned and free again.
    as_tenant(
        &s,
        &alice,
        &[
            "delete",
            "hostclaim",
            "sneaky",
            "web",
            "disk",
            "--wait=true",
            "--timeout=120s",
        ],
    );
    let h: Value =
        serde_json::from_str(&s.ok(&["get", "bmh", &host, "-n", "infra", "-o", "json"])).unwrap();
    assert_eq!(h["status"]["provisioning"]["state"], "available", "{h}");
    assert!(
        h["spec"]["consumerRef"].is_null() && h["spec"]["image"].is_null(),
        "{h}"
    );
    assert!(
        !emu.state(i).virtual_media.inserted,
        "deprovisioned on the BMC"
    );
    let copies = s.ok(&["get", "secrets", "-n", "infra", "-o", "name"]);
    assert!(!copies.contains("userdata"), "copies deleted: {copies}");
    s.wait("the HardwareData copy collected with its claim", || {
        as_tenant(&s, &alice, &["get", "hardwaredata", "-o", "name"])
            .trim()
            .is_empty()
    });
}

fn claims_state(s: &Serve) -> Vec<(String, String, String)> {
    let list: Value =
        serde_json::from_str(&s.ok(&["get", "hostclaims", "-n", "tenant-a", "-o", "json"]))
            .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_string(),
                c["status"]["bareMetalHost"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                condition(c, "Provisioned").0,
            )
        })
        .collect()
}

fn consumers(s: &Serve) -> Vec<(String, String)> {
    let list: Value =
        serde_json::from_str(&s.ok(&["get", "bmh", "-n", "infra", "-o", "json"])).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| {
            Some((
                h["metadata"]["name"].as_str()?.to_string(),
                h["spec"]["consumerRef"]["name"].as_str()?.to_string(),
            ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_binding_and_mid_release_neither_doubles_nor_orphans() {
    let iso = IMAGES.url("tenant-live.iso");
    const N: usize = 8;
    let emu = Emulator::start(
        EmulatorConfig {
            systems: N,
            power_delay: Duration::from_millis(300),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flags = [
        "--power-poll-interval",
        "2",
        "--error-backoff",
        "1",
        "--bmc-timeout",
        "3",
    ];
    let mut s = serve(dir.path(), port, &flags);
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: infra}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-a}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: infra}\nstringData: {username: admin, password: password}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {name: lend, namespace: infra}\nspec: {hostClaimNamespaces: {names: [tenant-a]}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: ud, namespace: tenant-a}\nstringData: {userData: \"#cloud-config\"}\n",
    );
    for i in 0..N {
        let address = emu
            .system_url(i)
            .replace("http://", "redfish-virtualmedia+http://");
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bm-{i}, namespace: infra}}\nspec:\n  online: false\n  bmc: {{address: \"{address}\", credentialsName: bmc}}\n"
        ));
    }
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(o.status.success(), "{}", out(&o));
    s.wait("all hosts available", || {
        s.host_states("infra")
            .iter()
            .filter(|st| *st == "available")
            .count()
            == N
    });

    let mut claims = String::new();
    for i in 0..N {
        claims.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: c-{i}, namespace: tenant-a}}\nspec:\n  poweredOn: true\n  userData: {{name: ud}}\n  image: {{url: \"{iso}\", format: live-iso}}\n"
        ));
    }
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&claims));
    assert!(o.status.success(), "{}", out(&o));
    // Kill as soon as binding has started, before everything is provisioned.
    s.wait("a first binding", || !consumers(&s).is_empty());
    s.kill();
    let bound_at_kill = (0..N)
        .filter(|i| emu.state(*i).virtual_media.inserted)
        .count();

    let mut s = serve(dir.path(), port, &flags);
    s.wait("every claim provisioned", || {
        let c = claims_state(&s);
        c.len() == N && c.iter().all(|(_, _, p)| p == "True")
    });
    let hosts: std::collections::BTreeSet<String> =
        claims_state(&s).into_iter().map(|(_, h, _)| h).collect();
    assert_eq!(hosts.len(), N, "each claim on its own host");
    let consumed = consumers(&s);
    assert_eq!(consumed.len(), N);
    let by_claim: std::collections::BTreeSet<_> = consumed.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(by_claim.len(), N, "no claim holds two hosts: {consumed:?}");
    for i in 0..N {
        let a = emu.state(i).actions;
        assert_eq!(
            count(&a, &["InsertMedia"]),
            1,
            "media inserted once on {i} ({bound_at_kill} at the kill): {a:?}"
        );
    }

    // Release all, killed mid-way; after the restart the release completes.
    s.ok(&[
        "delete",
        "hostclaims",
        "--all",
        "-n",
        "tenant-a",
        "--wait=false",
    ]);
    s.wait("a first deprovisioning", || {
        s.ok(&[
            "get",
            "bmh",
            "-n",
            "infra",
            "-o",
            "jsonpath={.items[*].spec.image.url}",
        ])
        .split_whitespace()
        .count()
            < N
    });
    s.kill();
    let s = serve(dir.path(), port, &flags);
    s.wait("every claim gone, every host free and available", || {
        claims_state(&s).is_empty()
            && consumers(&s).is_empty()
            && s.host_states("infra")
                .iter()
                .filter(|st| *st == "available")
                .count()
                == N
    });
    let secrets = s.ok(&["get", "secrets", "-n", "infra", "-o", "name"]);
    assert!(!secrets.contains("userdata"), "orphaned copies: {secrets}");
    for i in 0..N {
        let bmc = emu.state(i);
        assert!(!bmc.virtual_media.inserted, "deprovisioned on the BMC: {i}");
        assert_eq!(
            count(&bmc.actions, &["InsertMedia"]),
            1,
            "{i}: {:?}",
            bmc.actions
        );
    }
}
