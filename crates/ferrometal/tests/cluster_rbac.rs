//! Least privilege for cluster mode, proven: deploy/rbac.yaml applied to `serve
//! --no-controllers`, then `ferrometal controller` with a token of its ServiceAccount drives the
//! host lifecycle and a tenant's HostClaim to the end with nothing refused. Every verb of its
//! roles is shown to be needed by that run's audit log: the controller made a request that only
//! that grant lets in (an apply that created an object needs `create` too). Dropping a grant
//! then refuses exactly such a request, which runs with a grant taken away show for the two
//! kinds of grant (a plain verb, and the create an apply needs).

mod serve_common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferrometal_emulator::{Emulator, EmulatorConfig, Fault};
use ferrometal_test_support::images::ImageServer;
use ferrometal_test_support::vmlab::agent_ramdisk;
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

const RBAC: &str = include_str!("../../../deploy/rbac.yaml");
const SA_USER: &str = "system:serviceaccount:ferrometal-system:ferrometal";

fn is_role(doc: &Value) -> bool {
    doc["kind"] == "ClusterRole" || doc["kind"] == "Role"
}

/// (apiGroup, resource[/subresource], verb) of every grant in the controller's ClusterRole and
/// its leader-election Role.
fn grants() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for doc in serde_yaml_docs(RBAC) {
        if !is_role(&doc) {
            continue;
        }
        for rule in doc["rules"].as_array().unwrap() {
            for g in rule["apiGroups"].as_array().unwrap() {
                for r in rule["resources"].as_array().unwrap() {
                    for v in rule["verbs"].as_array().unwrap() {
                        out.push((
                            g.as_str().unwrap().to_string(),
                            r.as_str().unwrap().to_string(),
                            v.as_str().unwrap().to_string(),
                        ));
                    }
                }
            }
        }
    }
    out
}

fn serde_yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// deploy/rbac.yaml without one verb of one grant.
fn rbac_without(drop: Option<&(String, String, String)>) -> String {
    let docs = serde_yaml_docs(RBAC);
    let mut out = Vec::new();
    for mut doc in docs {
        if is_role(&doc)
            && let Some((g, r, v)) = drop
        {
            let mut rules = Vec::new();
            for rule in doc["rules"].as_array().unwrap() {
                let hit = rule["apiGroups"].as_array().unwrap().iter().any(|x| x == g)
                    && rule["resources"].as_array().unwrap().iter().any(|x| x == r);
                if !hit {
                    rules.push(rule.clone());
                    continue;
                }
                // Split the matching rule so only the one (group, resource, verb) goes.
                for rg in rule["apiGroups"].as_array().unwrap() {
                    for rr in rule["resources"].as_array().unwrap() {
                        let verbs: Vec<Value> = rule["verbs"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .filter(|x| !(rg == g && rr == r && *x == v))
                            .cloned()
                            .collect();
                        if !verbs.is_empty() {
                            rules.push(serde_json::json!({
                                "apiGroups": [rg], "resources": [rr], "verbs": verbs}));
                        }
                    }
                }
            }
            doc["rules"] = Value::Array(rules);
        }
        out.push(serde_yaml::to_string(&doc).unwrap());
    }
    out.join("\n---\n")
}

struct Run {
    _dir: tempfile::TempDir,
    serve: Serve,
    controller: Child,
    emu: Emulator,
    /// The controller runs the deploy agent's service (host `booting` gets boot media).
    agent: bool,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.controller.kill();
        let _ = self.controller.wait();
    }
}

async fn start(rbac: &str, agent: bool) -> Run {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 5,
            power_delay: Duration::from_millis(200),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let serve = serve(dir.path(), free_port(), &["--no-controllers"]);
    let o = serve.kubectl_stdin(&["apply", "-f", "-"], Some(rbac));
    assert!(
        o.status.success(),
        "applying RBAC: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let token = serve.ok(&[
        "create",
        "token",
        "ferrometal",
        "-n",
        "ferrometal-system",
        "--duration=2h",
    ]);
    let kc = serve.token_kubeconfig("controller", token.trim());
    // The deploy agent's service, so a host inspected by the agent gets boot media to report
    // (the emulator boots nothing: no agent ever calls). Only where the grants it uses are
    // tested: each run writes an ISO, CPU the lab VMs of other tests need.
    let mut agent_flags: Vec<std::ffi::OsString> = Vec::new();
    if agent {
        let agent_listen = format!("127.0.0.1:{}", free_port());
        agent_flags.extend([
            "--agent-ramdisk".into(),
            agent_ramdisk().clone().into_os_string(),
            "--agent-dir".into(),
            dir.path().join("agent").into_os_string(),
            "--agent-listen".into(),
            agent_listen.clone().into(),
            "--agent-url".into(),
            format!("https://{agent_listen}").into(),
            "--agent-media-listen".into(),
            format!("127.0.0.1:{}", free_port()).into(),
        ]);
    }
    let controller = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["controller", "--kubeconfig"])
        .arg(&kc)
        .args(&agent_flags)
        .args([
            "--leader-elect",
            "--leader-elect-namespace",
            "ferrometal-system",
        ])
        .args([
            "--power-poll-interval",
            "2",
            "--error-backoff",
            "1",
            "--bmc-timeout",
            "3",
            "--firmware-schema-sweep",
            "1",
        ])
        .env("FERROMETAL_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("controller.log")).unwrap())
        .spawn()
        .unwrap();
    Run {
        _dir: dir,
        serve,
        controller,
        emu,
        agent,
    }
}

fn hosts(emu: &Emulator) -> String {
    let addr = |i| {
        emu.system_url(i)
            .replace("http://", "redfish-virtualmedia+http://")
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc, namespace: default}}\nstringData: {{username: admin, password: password}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: h0, namespace: default}}\nspec:\n  online: false\n  automatedCleaningMode: disabled\n  bmc: {{address: \"{}\", credentialsName: bmc}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: broken, namespace: default}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: bmc}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: lent, namespace: default, labels: {{pool: tenants}}}}\nspec:\n  online: false\n  automatedCleaningMode: disabled\n  bmc: {{address: \"{}\", credentialsName: bmc}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: booting, namespace: default}}\nspec:\n  online: false\n  inspectionMode: agent\n  automatedCleaningMode: disabled\n  bmc: {{address: \"{}\", credentialsName: bmc}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {{name: lend, namespace: default}}\nspec: {{hostClaimNamespaces: {{names: [tenant]}}}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant}}\n",
        addr(0),
        addr(1),
        addr(2),
        addr(4)
    )
}

/// A BMCJob that power-cycles h0 and is deleted as soon as it ends.
const JOB: &str = "apiVersion: ferrometal.io/v1alpha1\nkind: BMCJob\nmetadata: {name: cycle}\n\
spec: {hostRef: {name: h0}, ttlSecondsAfterFinished: 0, tasks: [{powerAction: cycle}]}\n";

/// A Rufio Machine on the emulator's fourth system and a Job powering it on.
fn rufio(emu: &Emulator) -> String {
    let port = emu.base_url().rsplit(':').next().unwrap().to_string();
    format!(
        "apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Machine\nmetadata: {{name: m3, namespace: default}}\n\
         spec: {{connection: {{host: \"http://127.0.0.1\", port: {port}, insecureTLS: true,\n\
           authSecretRef: {{name: bmc, namespace: default}}, providerOptions: {{redfish: {{systemName: sys-3}}}}}}}}\n---\n\
         apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Job\nmetadata: {{name: on3, namespace: default}}\n\
         spec: {{machineRef: {{name: m3, namespace: default}}, tasks: [{{powerAction: \"on\"}}]}}\n"
    )
}

/// Served for the whole test binary: the emulator, like a real BMC, fetches what it inserts.
static IMAGES: std::sync::LazyLock<ImageServer> = std::sync::LazyLock::new(ImageServer::start);

/// A tenant's claim for the lent host, with user data.
fn claim_yaml() -> String {
    let url = IMAGES.url("claimed.iso");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web-ud, namespace: tenant}}\nstringData: {{userData: \"#cloud-config\"}}\n---\n\
apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: web, namespace: tenant}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: tenants}}}}\n  userData: {{name: web-ud}}\n  image: {{url: \"{url}\", format: live-iso}}\n"
    )
}

fn claim_condition(s: &Serve, t: &str) -> String {
    let o = s.kubectl(&[
        "get",
        "hostclaim",
        "web",
        "-n",
        "tenant",
        "-o",
        &format!("jsonpath={{.status.conditions[?(@.type==\"{t}\")].status}}"),
    ]);
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The controller's requests in the audit log: (group, resource[/sub], verb, code).
fn controller_requests(dir: &Path) -> Vec<(String, String, String, u64)> {
    let text = std::fs::read_to_string(dir.join("audit/audit.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["user"] == SA_USER)
        .map(|l| {
            let mut res = l["resource"].as_str().unwrap_or_default().to_string();
            let sub = l["subresource"].as_str().unwrap_or_default();
            if !sub.is_empty() {
                res = format!("{res}/{sub}");
            }
            (
                l["group"].as_str().unwrap_or_default().to_string(),
                res,
                l["verb"].as_str().unwrap_or_default().to_string(),
                l["code"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// One object of each metal3 kind stored but not acted on.
const METAL3_KINDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/metal3-kinds.yaml"
);

/// Whether every object of the fixture that has a status carries the controller's condition.
fn all_kept_marked(s: &Serve) -> bool {
    let kinds = "preprovisioningimages,baremetalswitches,hostnetworkattachments";
    let o = s.kubectl(&["get", kinds, "-n", "default", "-o", "json"]);
    let Ok(list) = serde_json::from_slice::<Value>(&o.stdout) else {
        return false;
    };
    // The PreprovisioningImage a host owns is the host controller's (its agent boot media).
    let items: Vec<Value> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i["metadata"]["ownerReferences"][0]["kind"] != "BareMetalHost")
        .collect();
    items.len() == 3
        && items.iter().all(|i| {
            i["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "ferrometal.io/NotActedOn"))
        })
}

fn state(s: &Serve, name: &str) -> String {
    let o = s.kubectl(&[
        "get",
        "bmh",
        name,
        "-o",
        "jsonpath={.status.provisioning.state}",
    ]);
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// What ended a run of the scenario.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Every step finished.
    Completed,
    /// The controller was refused this grant (the scenario needs it).
    Refused,
}

/// The host lifecycle: register, inspect, available; provision a live ISO; a broken BMC whose
/// repeated error folds into an Event series; delete through the finalizer. With `watch_for`,
/// returns as soon as the controller is refused that grant.
async fn scenario(run: &Run, watch_for: Option<&(String, String, String)>) -> Outcome {
    let s = &run.serve;
    run.emu.set_fault(1, Some(Fault::Http500));
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&hosts(&run.emu)));
    let refused = || {
        watch_for.is_some_and(|(g, r, v)| {
            controller_requests(&s.dir)
                .iter()
                .any(|(rg, rr, rv, code)| {
                    // A server-side apply that creates is audited as the patch it was sent as;
                    // with every other verb granted, its refusal is for the create it needs.
                    let verb = rv == v || (v == "create" && rv == "patch");
                    rg == g && rr == r && verb && *code == 403
                })
        })
    };
    let events_folded = || {
        controller_requests(&s.dir).iter().any(|(g, r, v, code)| {
            g == "events.k8s.io" && r == "events" && v == "patch" && *code == 200
        })
    };
    type Check<'a> = Box<dyn Fn() -> bool + 'a>;
    let steps: Vec<(&str, Check, Option<Check>)> = vec![
        // First, so a dropped grant of these kinds is found in seconds.
        (
            "the metal3 kinds kept say they are not acted on",
            Box::new(|| all_kept_marked(s)),
            Some(Box::new(|| {
                s.ok(&["apply", "-n", "default", "-f", METAL3_KINDS]);
                true
            })),
        ),
        (
            "h0 available",
            Box::new(|| state(s, "h0") == "available"),
            None,
        ),
        (
            "h0's BIOS and firmware versions read (HostFirmwareSettings, a FirmwareSchema, \
             HostFirmwareComponents)",
            Box::new(|| {
                let o = s.kubectl(&["get", "hfs", "h0", "-n", "default", "-o", "json"]);
                let settings = serde_json::from_slice::<Value>(&o.stdout).is_ok_and(|h| {
                    h["status"]["schema"]["name"].is_string()
                        && h["status"]["settings"]["ProcTurboMode"].is_string()
                });
                let o = s.kubectl(&[
                    "get",
                    "hostfirmwarecomponents",
                    "h0",
                    "-n",
                    "default",
                    "-o",
                    "json",
                ]);
                let components = serde_json::from_slice::<Value>(&o.stdout)
                    .is_ok_and(|h| h["status"]["components"].is_array());
                // h0's DataImage is tied to it (a finalizer), the fixture's host-less one says
                // it has no host.
                let o = s.kubectl(&["get", "dataimages", "-n", "default", "-o", "json"]);
                let images = serde_json::from_slice::<Value>(&o.stdout).is_ok_and(|l| {
                    let items = l["items"].as_array().cloned().unwrap_or_default();
                    let held = items.iter().any(|i| {
                        i["metadata"]["name"] == "h0"
                            && i["metadata"]["finalizers"][0] == "dataimage.metal3.io"
                    });
                    let told = items.iter().any(|i| {
                        i["status"]["conditions"].as_array().is_some_and(|c| {
                            c.iter().any(|c| {
                                c["type"] == "ferrometal.io/HostFound" && c["status"] == "False"
                            })
                        })
                    });
                    held && told
                });
                // h0's BMCEventSubscription is made on its BMC.
                let o = s.kubectl(&["get", "bes", "h0-events", "-n", "default", "-o", "json"]);
                let subscribed = serde_json::from_slice::<Value>(&o.stdout).is_ok_and(|b| {
                    b["status"]["subscriptionID"]
                        .as_str()
                        .is_some_and(|id| !id.is_empty())
                        && b["metadata"]["finalizers"][0] == "bmceventsubscription.metal3.io"
                });
                settings && components && images && subscribed
            }),
            Some(Box::new(|| {
                s.kubectl_stdin(
                    &["apply", "-f", "-"],
                    Some(
                        "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareSettings\n\
                         metadata: {name: h0, namespace: default}\nspec: {settings: {}}\n---\n\
                         apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\n\
                         metadata: {name: h0, namespace: default}\nspec: {updates: []}\n---\n\
                         apiVersion: metal3.io/v1alpha1\nkind: DataImage\n\
                         metadata: {name: h0, namespace: default}\n\
                         spec: {url: 'http://images.example/data.iso'}\n---\n\
                         apiVersion: metal3.io/v1alpha1\nkind: BMCEventSubscription\n\
                         metadata: {name: h0-events, namespace: default}\n\
                         spec: {hostName: h0, destination: 'http://events.example/hook'}\n",
                    ),
                );
                true
            })),
        ),
        (
            "a FirmwareSchema ferrometal wrote that nothing names any more deleted",
            Box::new(|| {
                let o = s.kubectl(&["get", "firmwareschema", "schema-orphan", "-n", "default"]);
                String::from_utf8_lossy(&o.stderr).contains("NotFound")
            }),
            Some(Box::new(|| {
                s.kubectl_stdin(
                    &["apply", "-f", "-"],
                    Some(
                        "apiVersion: metal3.io/v1alpha1\nkind: FirmwareSchema\n\
                         metadata: {name: schema-orphan, namespace: default, \
                         labels: {app.kubernetes.io/managed-by: ferrometal}}\n\
                         spec: {schema: {}}\n",
                    ),
                );
                true
            })),
        ),
        (
            "a repeated error folded into an Event series",
            Box::new(events_folded),
            None,
        ),
        (
            "h0 provisioned",
            Box::new(|| state(s, "h0") == "provisioned"),
            Some(Box::new(|| {
                s.ok(&[
                    "patch",
                    "bmh",
                    "h0",
                    "--type",
                    "merge",
                    "-p",
                    &serde_json::json!({"spec": {"online": true,
                        "image": {"url": IMAGES.url("live.iso"), "format": "live-iso"}}})
                    .to_string(),
                ]);
                true
            })),
        ),
        (
            "a BMCJob power-cycled h0, finished and was removed after its TTL",
            Box::new(|| {
                !s.ok(&["get", "bmcjobs", "-o", "name"]).contains("cycle")
                    && run
                        .emu
                        .state(0)
                        .actions
                        .iter()
                        .any(|a| a.contains("PowerCycle"))
            }),
            Some(Box::new(|| {
                let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(JOB));
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                true
            })),
        ),
        (
            "a Rufio Job powered its Machine on through a Task",
            Box::new(|| {
                s.ok(&[
                    "get",
                    "jobs.bmc.tinkerbell.org",
                    "on3",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Completed\")].status}",
                ]) == "True"
                    && run.emu.state(3).power_state.as_str() == "On"
            }),
            Some(Box::new(|| {
                let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&rufio(&run.emu)));
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                true
            })),
        ),
        (
            "a tenant's claim provisioned on the lent host",
            Box::new(|| claim_condition(s, "Provisioned") == "True"),
            Some(Box::new(|| {
                let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&claim_yaml()));
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                true
            })),
        ),
        (
            "the claim released: its host available again",
            Box::new(|| {
                !s.ok(&["get", "hostclaims", "-n", "tenant", "-o", "name"])
                    .contains("web")
                    && state(s, "lent") == "available"
            }),
            Some(Box::new(|| {
                s.ok(&["delete", "hostclaim", "web", "-n", "tenant", "--wait=false"]);
                true
            })),
        ),
        (
            "the agent's boot media for the host it inspects reported in its \
             PreprovisioningImage",
            Box::new(|| {
                if !run.agent {
                    return true;
                }
                let o = s.kubectl(&["get", "ppimg", "booting", "-n", "default", "-o", "json"]);
                serde_json::from_slice::<Value>(&o.stdout).is_ok_and(|p| {
                    p["status"]["imageUrl"]
                        .as_str()
                        .is_some_and(|u| u.ends_with(".iso"))
                })
            }),
            None,
        ),
        (
            "h0 deleted",
            Box::new(|| {
                !s.ok(&["get", "bmh", "-o", "name"])
                    .contains("baremetalhost.metal3.io/h0")
            }),
            Some(Box::new(|| {
                s.ok(&["delete", "bmh", "h0", "--wait=false"]);
                true
            })),
        ),
    ];
    for (what, done, start) in &steps {
        if let Some(start) = start {
            start();
        }
        let mut ok = false;
        for _ in 0..600 {
            if refused() {
                return Outcome::Refused;
            }
            if done() {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if !ok {
            panic!(
                "scenario stuck before {what:?} (dropped: {watch_for:?})\ncontroller log:\n{}\nrequests: {:?}",
                std::fs::read_to_string(s.dir.join("controller.log")).unwrap_or_default(),
                controller_requests(&s.dir)
            );
        }
    }
    Outcome::Completed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_needs_exactly_its_cluster_role() {
    // The whole role: the scenario completes, observed on the BMC, with nothing refused.
    let run = start(RBAC, true).await;
    assert_eq!(scenario(&run, None).await, Outcome::Completed);
    let bmc = run.emu.state(0);
    assert!(!bmc.virtual_media.inserted, "deprovisioned before delete");
    assert!(
        bmc.actions.iter().any(|a| a.contains("InsertMedia")),
        "provisioned through the BMC: {:?}",
        bmc.actions
    );
    let lent = run.emu.state(2);
    assert!(
        lent.actions.iter().any(|a| a.contains("InsertMedia")),
        "the claim provisioned its host through the BMC: {:?}",
        lent.actions
    );
    assert!(!lent.virtual_media.inserted, "released: deprovisioned");
    let requests = controller_requests(&run.serve.dir);
    let refused: Vec<_> = requests.iter().filter(|r| r.3 == 403).collect();
    assert!(
        refused.is_empty(),
        "refused with the full role: {refused:?}"
    );
    drop(run);

    // Each grant was used: a request let in by it alone. Without it, that request is refused.
    let grants = grants();
    assert!(grants.len() >= 10, "{grants:?}");
    let used = |(g, r, v): &(String, String, String)| {
        requests.iter().any(|(rg, rr, rv, code)| {
            // An apply that created its object (201) was let in by `create` as well as `patch`.
            let verb = rv == v || (v == "create" && rv == "patch" && *code == 201);
            rg == g && rr == r && verb && *code != 401 && *code != 403
        })
    };
    let unused: Vec<_> = grants.iter().filter(|g| !used(g)).collect();
    assert!(
        unused.is_empty(),
        "deploy/rbac.yaml grants these, which the controllers never used: remove them: {unused:?}"
    );

    // A grant taken away: the controller asks for it and is refused, for a plain verb and for
    // the create a server-side apply needs.
    for g in [
        ("metal3.io", "baremetalhosts/status", "patch"),
        ("metal3.io", "preprovisioningimages", "create"),
    ] {
        let g = (g.0.to_string(), g.1.to_string(), g.2.to_string());
        assert!(grants.contains(&g), "{g:?} is not granted: {grants:?}");
        let run = start(&rbac_without(Some(&g)), g.1 == "preprovisioningimages").await;
        assert_eq!(scenario(&run, Some(&g)).await, Outcome::Refused, "{g:?}");
    }
}
