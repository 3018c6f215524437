//! The README's walkthroughs, read from README.md itself and run as written, top to bottom, in
//! one bash session against a fresh emulator and `serve`: the setup (emulator, image server,
//! serve), handing a tenant a kubeconfig, multi-tenancy (policy, labelled hosts, a claim from
//! the tenant's chair, deleted again), a BMCJob from YAML and from `ferrometal job run`, a
//! Rufio Machine and Job netbooting an emulated system, and `ferrometal move` of the hosts to a
//! second serve. The harness changes only what a test must: free ports for 8000, 8080, 6443,
//! 6444 and 9090, the binary already built on PATH, no `cargo build` and no `-w` (a watch never
//! ends), a wait for each server started in the background, and commands the README marks
//! `# no` or `# Forbidden` must fail.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use ferrometal_test_support::peers::repo_root;
use ferrometal_test_support::serve::free_port;
use serde_json::Value;

/// The fenced blocks (```sh or bare ```) under the `###` heading `heading`, in order.
fn blocks(readme: &str, heading: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut under = false;
    let mut current: Option<String> = None;
    for line in readme.lines() {
        if let Some(block) = current.as_mut() {
            if line.starts_with("```") {
                out.push(current.take().unwrap());
            } else {
                block.push_str(line);
                block.push('\n');
            }
            continue;
        }
        if line.starts_with('#') && !line.starts_with("#!") {
            under = line.trim_start_matches('#').trim() == heading;
            continue;
        }
        if under && (line == "```sh" || line == "```") {
            current = Some(String::new());
        }
    }
    assert!(
        !out.is_empty(),
        "no code block under {heading:?} in README.md"
    );
    out
}

struct Ports {
    emulator: u16,
    images: u16,
    api: u16,
    target: u16,
    metrics: u16,
}

/// The README's ports, and the examples' (which name the same ones), made free ones.
fn ports(text: &str, p: &Ports) -> String {
    text.replace("127.0.0.1:8000", &format!("127.0.0.1:{}", p.emulator))
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{}", p.images))
        .replace("http.server 8080", &format!("http.server {}", p.images))
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{}", p.api))
        .replace("127.0.0.1:6444", &format!("127.0.0.1:{}", p.target))
        .replace("127.0.0.1:9090", &format!("127.0.0.1:{}", p.metrics))
}

/// One README line as the harness runs it.
fn adapt(line: &str, p: &Ports) -> Option<String> {
    let t = line.trim();
    if t.starts_with("cargo build") || t.ends_with(" -w") || t.starts_with("export PATH=") {
        return None;
    }
    let mut l = ports(line, p);
    if let Some((cmd, comment)) = l.split_once("   #")
        && (comment.trim() == "no" || comment.trim().starts_with("Forbidden"))
    {
        l = format!("if {cmd}; then echo 'README: expected to fail'; exit 97; fi");
    }
    if t.starts_with("ferrometal serve --data-dir ") && t.contains(" &") {
        let dir = t.split_whitespace().nth(3).unwrap();
        l.push_str(&format!(
            "\nuntil kubectl --kubeconfig {dir}/kubeconfig get ns >/dev/null 2>&1; do sleep 0.2; done"
        ));
    }
    if t.starts_with("python3 -m http.server") {
        l.push_str(&format!(
            "\nuntil curl -sf -o /dev/null http://127.0.0.1:{}/live.iso; do sleep 0.2; done",
            p.images
        ));
    }
    Some(l)
}

fn script(readme: &str, p: &Ports) -> String {
    let section = |heading: &str, nth: Option<usize>, env: &str| {
        let all = blocks(readme, heading);
        let chosen: Vec<String> = match nth {
            Some(i) => vec![all[i].clone()],
            None => all,
        };
        chosen
            .iter()
            .map(|b| {
                let body: Vec<String> = b.lines().filter_map(|l| adapt(l, p)).collect();
                // Each block in a subshell, so one block's `export KUBECONFIG=` stays there.
                format!(
                    "echo '==== {}'\n(\nset -e\n{env}{}\n)\n",
                    heading.replace('\'', r"'\''"),
                    body.join("\n")
                )
            })
            .collect::<String>()
    };
    let admin = "export KUBECONFIG=./data/kubeconfig\n";
    let mut s = String::from("set -e\n");
    s += &section("The API server and kubectl", Some(0), "");
    s += &section("Handing a tenant a kubeconfig", None, "");
    s += &section(
        "Multi-tenancy: a tenant claims a host (HostClaim)",
        None,
        "",
    );
    s += &section("One-off BMC jobs (BMCJob)", Some(0), admin);
    s += &section(
        "Tinkerbell Rufio's API (`bmc.tinkerbell.org/v1alpha1`)",
        None,
        "",
    );
    s += &section(
        "Moving hosts to another cluster (`ferrometal move`)",
        Some(0),
        "",
    );
    s
}

fn kubectl_json(dir: &Path, kubeconfig: &str, args: &[&str]) -> Value {
    let out = Command::new("kubectl")
        .current_dir(dir)
        .args(["--kubeconfig", kubeconfig])
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The emulator's view of one system, from its control API.
fn emulator_system(port: u16, id: &str) -> Value {
    let out = Command::new("curl")
        .args([
            "-sf",
            &format!("http://127.0.0.1:{port}/emulator/systems/{id}"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "GET /emulator/systems/{id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn is_true(conditions: &Value, kind: &str) -> bool {
    conditions.as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    })
}

#[test]
fn readme_walkthroughs_run_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let ports_used = Ports {
        emulator: free_port(),
        images: free_port(),
        api: free_port(),
        target: free_port(),
        metrics: free_port(),
    };
    let text = script(&readme, &ports_used);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    for entry in std::fs::read_dir(repo_root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        let yaml = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            dir.path().join("examples").join(path.file_name().unwrap()),
            ports(&yaml, &ports_used),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("walkthrough.sh"), &text).unwrap();
    let log_path = dir.path().join("walkthrough.log");
    let log_file = std::fs::File::create(&log_path).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_ferrometal"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Its own process group, so the servers the README starts with `&` end with it; output to
    // a file, which those servers keep open after the script ends.
    let mut child = Command::new("bash")
        .args(["-x", "walkthrough.sh"])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("FERROMETAL_LOG", "warn")
        .env_remove("KUBECONFIG")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let pgid = child.id();
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let outcome = std::panic::catch_unwind(|| {
        assert!(status.success(), "the walkthrough failed:\n{log}");
        let d = dir.path();
        // The tenant saw who they are, the claim became Ready and was deleted again.
        assert!(log.contains("alice"), "{log}");
        assert!(log.contains("condition met"), "{log}");
        let claims = kubectl_json(d, "data/kubeconfig", &["get", "hostclaims", "-A"]);
        assert!(claims["items"].as_array().unwrap().is_empty(), "{claims:#}");
        // The BMCJobs completed.
        let jobs = kubectl_json(d, "data/kubeconfig", &["get", "bmcjob", "-n", "default"]);
        let phases: Vec<&str> = jobs["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["status"]["phase"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(phases, ["Completed", "Completed"], "{log}");
        // The Rufio Job completed, its three Tasks too, and its Machine reads the power on.
        let job = kubectl_json(
            d,
            "data/kubeconfig",
            &[
                "get",
                "jobs.bmc.tinkerbell.org",
                "netboot",
                "-n",
                "tink-system",
            ],
        );
        assert!(
            is_true(&job["status"]["conditions"], "Completed"),
            "{job:#}"
        );
        let tasks = kubectl_json(
            d,
            "data/kubeconfig",
            &["get", "tasks.bmc.tinkerbell.org", "-n", "tink-system"],
        );
        let tasks = tasks["items"].as_array().unwrap();
        assert_eq!(tasks.len(), 3, "{tasks:#?}");
        assert!(
            tasks
                .iter()
                .all(|t| is_true(&t["status"]["conditions"], "Completed")),
            "{tasks:#?}"
        );
        let machine = kubectl_json(
            d,
            "data/kubeconfig",
            &[
                "get",
                "machines.bmc.tinkerbell.org",
                "m3",
                "-n",
                "tink-system",
            ],
        );
        assert_eq!(machine["status"]["powerState"], "on", "{machine:#}");
        assert!(is_true(&machine["status"]["conditions"], "Contactable"));
        // On the emulator, the system the Machine names: off, PXE once, on, each sent once;
        // it booted from PXE, the override spent, and nothing was restored (Rufio's semantics).
        let sys = emulator_system(ports_used.emulator, "sys-3");
        assert_eq!(sys["power_state"], "On", "{sys:#}");
        assert_eq!(sys["last_boot_source"], "Pxe", "{sys:#}");
        assert_eq!(
            sys["actions"],
            serde_json::json!(["Reset:ForceOff", "PatchBoot", "Reset:On"]),
            "{sys:#}"
        );
        // The hosts of infra, and their policy, are at the target now; none left at the source.
        let moved = kubectl_json(d, "target/kubeconfig", &["get", "bmh", "-n", "infra"]);
        let names: Vec<&str> = moved["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["web-1", "web-2"], "{log}");
        let left = kubectl_json(d, "data/kubeconfig", &["get", "bmh", "-n", "infra"]);
        assert!(left["items"].as_array().unwrap().is_empty());
        kubectl_json(
            d,
            "target/kubeconfig",
            &["get", "hostdeploypolicy", "lend-to-tenants", "-n", "infra"],
        );
    });
    // Ends the emulator, image server and both serves the README started.
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{pgid}")])
        .status();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
}
