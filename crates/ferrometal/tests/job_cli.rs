//! `ferrometal job run --wait` against a `serve` and the emulator, where the job cannot run: a
//! host that does not exist is refused before any job is made, and a host stuck in a
//! registration error is reported while the CLI waits, which `--timeout` ends.

mod serve_common;

use std::process::{Command, Output};

use ferrometal_emulator::{Emulator, EmulatorConfig};
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

fn job_cli(s: &Serve, args: &[&str]) -> Output {
    Command::new(&s.bin)
        .args(["job", "run", "--kubeconfig"])
        .arg(&s.kubeconfig)
        .args(args)
        .env("FERROMETAL_LOG", "warn")
        .output()
        .unwrap()
}

fn jobs(s: &Serve) -> Vec<Value> {
    let v: Value = serde_json::from_str(&s.ok(&["get", "bmcjob", "-o", "json"])).unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_run_on_a_missing_or_broken_host_ends() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
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
        &["--error-backoff", "1", "--bmc-timeout", "2"],
    );

    // No such host: refused at once, naming it, and no job left behind.
    let o = job_cli(&s, &["--host", "node-7", "--wait", "power=off"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("no BareMetalHost node-7 in namespace default"),
        "{err}"
    );
    assert!(jobs(&s).is_empty(), "{:?}", jobs(&s));

    // A host whose BMC refuses the credentials stays in a registration error: the CLI says so
    // while it waits, and gives up after --timeout with the job's name.
    let address = emu
        .system_url(0)
        .replace("http://", "redfish-virtualmedia+http://");
    emu.set_fault(0, Some(ferrometal_emulator::Fault::Unauthorized));
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc, namespace: default}}\nstringData: {{username: admin, password: wrong}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: broken, namespace: default}}\nspec:\n  online: false\n  bmc: {{address: \"{address}\", credentialsName: bmc}}\n"
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = job_cli(
        &s,
        &["--host", "broken", "--wait", "--timeout", "8s", "power=off"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{out}{err}");
    assert!(!o.status.success());
    assert!(out.contains("Waiting"), "{out}");
    assert!(out.contains("waiting: host broken is registering"), "{out}");
    assert!(
        out.contains("waiting: host broken has a registration error"),
        "{out}"
    );
    assert!(err.contains("--timeout 8s passed"), "{err}");
    let names: Vec<String> = jobs(&s)
        .iter()
        .map(|j| j["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(err.contains(&names[0]), "{err}");
}
