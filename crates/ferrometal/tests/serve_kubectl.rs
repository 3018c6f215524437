//! kubectl against `ferrometal serve`, using the kubeconfig the server writes.

mod serve_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serve_common::*;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget, shortNames: [gd], listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A gadget for testing.
        properties:
          spec:
            type: object
            description: What the gadget should be.
            required: [size]
            properties:
              size: {type: integer, minimum: 1, description: How big the gadget is.}
              color: {type: string, enum: [blue, red], default: blue}
            x-kubernetes-validations:
            - {rule: "self.size < 100", message: "size must be below 100"}
          status:
            type: object
            properties:
              phase: {type: string}
"#;

const OBJECTS: &str = r#"
apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g1
  labels: {tier: front}
spec:
  size: 3
---
apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g2
  labels: {tier: back}
spec:
  size: 5
  color: red
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
"#;

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().to_string()
}

#[test]
fn kubectl_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(dir.path(), free_port(), &[]);
    assert!(srv.url.starts_with("https://127.0.0.1:"), "{}", srv.url);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&srv.kubeconfig)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "kubeconfig is private");
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "data directory is private");
    }

    let ns = srv.ok(&["get", "namespaces"]);
    assert!(ns.contains("default") && ns.contains("kube-system"), "{ns}");

    let crd = write(dir.path(), "crd.yaml", CRD);
    let objs = write(dir.path(), "objects.yaml", OBJECTS);
    let out = srv.ok(&["apply", "-f", &crd]);
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/gadgets.example.com created"
    );
    srv.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.example.com",
        "--timeout=20s",
    ]);
    let out = srv.ok(&["apply", "-f", &objs]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "gadget.example.com/g1 created",
            "gadget.example.com/g2 created",
            "configmap/settings created"
        ]
    );
    let out = srv.ok(&["apply", "-f", &objs]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "gadget.example.com/g1 unchanged",
            "gadget.example.com/g2 unchanged",
            "configmap/settings unchanged"
        ]
    );

    // Table output with the CRD's printer columns.
    let table = srv.ok(&["get", "gadgets"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "SIZE", "PHASE", "AGE"], "{table}");
    assert_eq!(&lines[1][..2], ["g1", "3"], "{table}");
    assert_eq!(&lines[2][..2], ["g2", "5"], "{table}");

    // Selectors, short name, output formats.
    let out = srv.ok(&["get", "gd", "-l", "tier=back", "-o", "name"]);
    assert_eq!(out.trim(), "gadget.example.com/g2");
    let out = srv.ok(&["get", "gd", "-l", "tier in (front,middle)", "-o", "name"]);
    assert_eq!(out.trim(), "gadget.example.com/g1");
    let yaml = srv.ok(&["get", "gadget", "g1", "-o", "yaml"]);
    assert!(
        yaml.contains("color: blue"),
        "schema default applied: {yaml}"
    );
    assert!(yaml.contains("generation: 1"), "{yaml}");
    let json: serde_json::Value =
        serde_json::from_str(&srv.ok(&["get", "configmap", "settings", "-o", "json"])).unwrap();
    assert_eq!(json["data"]["mode"], "fast");

    // Patches, annotate, label.
    assert_eq!(
        srv.ok(&[
            "patch",
            "gadget",
            "g1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":7}}"#
        ])
        .trim(),
        "gadget.example.com/g1 patched"
    );
    srv.ok(&[
        "patch",
        "gadget",
        "g1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/color","value":"red"}]"#,
    ]);
    srv.ok(&[
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"extra":"1"}}"#,
    ]);
    srv.ok(&["annotate", "gadget", "g1", "owner=team-a"]);
    srv.ok(&["label", "gadget", "g1", "env=prod"]);
    let out = srv.ok(&[
        "get",
        "gadget",
        "g1",
        "-o",
        "jsonpath={.spec.size} {.spec.color} {.metadata.annotations.owner} {.metadata.labels.env} {.metadata.generation}",
    ]);
    assert_eq!(out, "7 red team-a prod 3");
    let out = srv.ok(&["get", "cm", "settings", "-o", "jsonpath={.data.extra}"]);
    assert_eq!(out, "1");

    // Server-side validation errors are shown with the field path.
    let err = srv.fails(&[
        "patch",
        "gadget",
        "g1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":500}}"#,
    ]);
    assert!(err.contains("size must be below 100"), "{err}");
    let err = srv.fails(&[
        "patch",
        "gadget",
        "g1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":0}}"#,
    ]);
    assert!(err.contains("spec.size"), "{err}");

    // Unknown fields are rejected (kubectl asks for strict field validation).
    let typo = write(
        dir.path(),
        "typo.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: typo\nspec:\n  size: 1\n  colour: red\n",
    );
    let err = srv.fails(&["apply", "-f", &typo]);
    assert!(err.contains(r#"unknown field "spec.colour""#), "{err}");
    srv.fails(&["get", "gadget", "typo"]);
    let typo_cm = write(
        dir.path(),
        "typo-cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndta:\n  k: v\n",
    );
    let err = srv.fails(&["apply", "-f", &typo_cm]);
    assert!(err.contains(r#"unknown field "dta""#), "{err}");

    // create / replace.
    let g3 = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g3\nspec:\n  size: 1\n";
    let g3_path = write(dir.path(), "g3.yaml", g3);
    assert_eq!(
        srv.ok(&["create", "-f", &g3_path]).trim(),
        "gadget.example.com/g3 created"
    );
    let err = srv.fails(&["create", "-f", &g3_path]);
    assert!(err.contains("AlreadyExists"), "{err}");
    let g3b = write(dir.path(), "g3b.yaml", &g3.replace("size: 1", "size: 2"));
    assert_eq!(
        srv.ok(&["replace", "-f", &g3b]).trim(),
        "gadget.example.com/g3 replaced"
    );
    assert_eq!(
        srv.ok(&["get", "gadget", "g3", "-o", "jsonpath={.spec.size}"]),
        "2"
    );

    // Status through the subresource, then wait on it.
    srv.ok(&[
        "patch",
        "gadget",
        "g3",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ]);
    let out = srv.ok(&[
        "wait",
        "--for=jsonpath={.status.phase}=Ready",
        "gadget/g3",
        "--timeout=20s",
    ]);
    assert!(out.contains("condition met"), "{out}");

    // Delete with a finalizer: the object stays, marked for deletion, until it is removed.
    srv.ok(&[
        "patch",
        "gadget",
        "g2",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    let out = srv.ok(&["delete", "gadget", "g2", "--wait=false"]);
    assert_eq!(out.trim(), "gadget.example.com \"g2\" deleted");
    let ts = srv.ok(&[
        "get",
        "gadget",
        "g2",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(ts.ends_with('Z'), "deletionTimestamp set: {ts:?}");
    srv.ok(&[
        "patch",
        "gadget",
        "g2",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let err = srv.fails(&["get", "gadget", "g2"]);
    assert!(
        err.contains(r#"gadgets.example.com "g2" not found"#),
        "{err}"
    );

    // explain and describe.
    let out = srv.ok(&["explain", "gadget.spec.size"]);
    assert!(out.contains("How big the gadget is."), "{out}");
    let out = srv.ok(&["describe", "gadget", "g1"]);
    assert!(out.contains("Name:") && out.contains("g1"), "{out}");
    assert!(out.contains("Size:") && out.contains("7"), "{out}");

    // Generator commands (they post protobuf).
    assert_eq!(
        srv.ok(&["create", "namespace", "team-a"]).trim(),
        "namespace/team-a created"
    );
    srv.ok(&[
        "create",
        "configmap",
        "gen",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);
    srv.ok(&[
        "create",
        "secret",
        "generic",
        "pw",
        "-n",
        "team-a",
        "--from-literal=password=s3cret",
    ]);
    assert_eq!(
        srv.ok(&[
            "get",
            "cm",
            "gen",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.k}"
        ]),
        "v"
    );
    assert_eq!(
        srv.ok(&[
            "get",
            "secret",
            "pw",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.password}"
        ]),
        "czNjcmV0"
    );
    // Deleting a namespace takes its contents with it.
    srv.ok(&["delete", "namespace", "team-a"]);
    let err = srv.fails(&["get", "namespace", "team-a"]);
    assert!(err.contains("NotFound"), "{err}");
    let out = srv.kubectl(&["get", "cm", "-n", "team-a", "-o", "name"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");

    // A single all-powerful user.
    assert_eq!(
        srv.ok(&["auth", "can-i", "delete", "gadgets"]).trim(),
        "yes"
    );

    // Server-side apply through kubectl.
    let ssa = write(
        dir.path(),
        "ssa.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n",
    );
    assert_eq!(
        srv.ok(&["apply", "--server-side", "-f", &ssa]).trim(),
        "configmap/ssa serverside-applied"
    );
    assert_eq!(
        srv.ok(&["get", "cm", "ssa", "-o", "jsonpath={.data.a}"]),
        "1"
    );
}

#[test]
fn kubectl_get_watch_sees_changes() {
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(dir.path(), free_port(), &[]);
    srv.ok(&[
        "create",
        "configmap",
        "--dry-run=client",
        "-o",
        "yaml",
        "w0",
    ]);
    let cm = |name: &str, v: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: \"{v}\"\n")
    };
    let out = srv.kubectl_stdin(&["apply", "-f", "-"], Some(&cm("w1", "1")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&srv.kubeconfig)
        .arg("--cache-dir")
        .arg(dir.path().join("kubectl-cache"))
        .args([
            "get",
            "configmaps",
            "-w",
            "-o",
            "custom-columns=NAME:.metadata.name,V:.data.v",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |want: &str| {
        while !seen
            .iter()
            .any(|l: &String| l.split_whitespace().collect::<Vec<_>>().join(" ") == want)
        {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => seen.push(line),
                Err(_) => panic!("kubectl -w never printed {want:?}; saw {seen:?}"),
            }
        }
    };
    wait_for("w1 1");
    srv.kubectl_stdin(&["apply", "-f", "-"], Some(&cm("w2", "2")));
    wait_for("w2 2");
    srv.ok(&["patch", "configmap", "w1", "-p", r#"{"data":{"v":"9"}}"#]);
    wait_for("w1 9");
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn refuses_anonymous_and_insecure_non_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(dir.path(), free_port(), &[]);
    let out = Command::new("kubectl")
        .args([
            "--server",
            &srv.url,
            "--insecure-skip-tls-verify",
            "--token",
            "not-the-token",
        ])
        .arg("--cache-dir")
        .arg(dir.path().join("anon-cache"))
        .args(["get", "configmaps"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Unauthorized") || err.contains("provide credentials"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args([
            "serve",
            "--insecure-no-auth",
            "--listen",
            "0.0.0.0:0",
            "--data-dir",
        ])
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("loopback"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn insecure_no_auth_on_loopback_serves_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(dir.path(), free_port(), &["--insecure-no-auth"]);
    assert!(srv.url.starts_with("http://127.0.0.1:"), "{}", srv.url);
    let kubeconfig = std::fs::read_to_string(&srv.kubeconfig).unwrap();
    assert!(!kubeconfig.contains("token"), "{kubeconfig}");
    let out = srv.ok(&["get", "namespace", "default", "-o", "name"]);
    assert_eq!(out.trim(), "namespace/default");

    // SIGTERM: a clean exit.
    let mut srv = srv;
    let pid = srv.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = srv.child.wait().unwrap();
    assert!(status.success(), "exit after SIGTERM: {status:?}");
}
