//! BMC passwords stay in their Secrets: after hosts went through registration, inspection,
//! provisioning, an IPMI power change, a BMCJob, wrong credentials and deletion, no stored
//! object but a Secret, no Event, log line (at debug level), metric or audit line holds any
//! of the passwords, plain, base64 or as HTTP basic credentials.

mod serve_common;

use std::time::Duration;

use base64::Engine as _;
use ferrometal_emulator::{Emulator, EmulatorConfig};
use ferrometal_test_support::images::ImageServer;
use ferrometal_test_support::peers::IpmiSim;
use serve_common::{Serve, free_port, serve};

fn field(s: &Serve, kind: &str, name: &str, path: &str) -> String {
    let o = s.kubectl(&["get", kind, name, "-o", &format!("jsonpath={path}")]);
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn wait(s: &Serve, what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..900 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "timed out waiting for {what}\n{}",
        std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default()
    );
}

/// Every form a password could leak in.
fn forms(user: &str, password: &str) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![
        password.to_string(),
        b64(password),
        b64(&format!("{user}:{password}")),
    ]
}

fn leaks(what: &str, text: &str, secrets: &[String]) -> Vec<String> {
    secrets
        .iter()
        .filter(|s| text.contains(s.as_str()))
        .map(|s| format!("{what} holds {s:?}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bmc_password_outside_its_secret() {
    let redfish_password = format!("rf-{:016x}", rand::random::<u64>());
    let ipmi_password = format!("ip{:08x}", rand::random::<u32>());
    let wrong_password = format!("wrong-{:016x}", rand::random::<u64>());
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 2,
            password: redfish_password.clone(),
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let ipmi = IpmiSim::start_with_password(&ipmi_password);

    // SAFETY: set before anything in this test process reads the environment.
    #[allow(
        unsafe_code,
        reason = "the serve children inherit it; no other thread reads it"
    )]
    unsafe {
        std::env::set_var("FERROMETAL_TEST_SERVE_LOG", "debug")
    };
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let s = serve(
        dir.path(),
        free_port(),
        &[
            "--metrics-listen",
            &metrics,
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
    // The emulator, like a real BMC, fetches the image it inserts.
    let images = ImageServer::start();
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: rf}}\nstringData: {{username: admin, password: \"{redfish_password}\"}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: ipmi}}\nstringData: {{username: admin, password: \"{ipmi_password}\"}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: wrong}}\nstringData: {{username: admin, password: \"{wrong_password}\"}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: rf0}}\n\
         spec: {{online: true, bmc: {{address: \"{}\", credentialsName: rf}},\n  image: {{url: \"{}\", format: live-iso}}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: ipmi0}}\n\
         spec: {{online: true, bmc: {{address: \"{}\", credentialsName: ipmi}}, hardwareProfile: unknown, inspectionMode: disabled}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: locked-out}}\n\
         spec: {{online: false, bmc: {{address: \"{}\", credentialsName: wrong}}}}\n",
        address(0),
        images.url("live.iso"),
        ipmi.address(),
        address(1),
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    wait(&s, "rf0 provisioned", || {
        field(&s, "bmh", "rf0", "{.status.provisioning.state}") == "provisioned"
    });
    wait(&s, "ipmi0 powered on through ipmi_sim", || {
        field(&s, "bmh", "ipmi0", "{.status.poweredOn}") == "true" && ipmi.chassis("power") == "1"
    });
    wait(&s, "locked-out reports the refused credentials", || {
        !field(&s, "bmh", "locked-out", "{.status.errorMessage}").is_empty()
    });
    let job = "apiVersion: ferrometal.io/v1alpha1\nkind: BMCJob\nmetadata: {name: cycle}\n\
               spec: {hostRef: {name: rf0}, tasks: [{powerAction: cycle}]}\n";
    let o = s.kubectl_stdin(&["create", "-f", "-"], Some(job));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait(&s, "the BMCJob completed", || {
        field(&s, "bmcjob", "cycle", "{.status.phase}") == "Completed"
    });
    s.ok(&["delete", "bmh", "rf0", "--wait=true"]);

    let mut secrets = forms("admin", &redfish_password);
    secrets.extend(forms("admin", &ipmi_password));
    secrets.extend(forms("admin", &wrong_password));
    let mut found = Vec::new();

    // Every stored object of every listable kind, except Secrets.
    let kinds = s.ok(&["api-resources", "--verbs=list", "-o", "name"]);
    let mut scanned = 0;
    for kind in kinds.lines().filter(|k| *k != "secrets") {
        let o = s.kubectl(&["get", kind, "-A", "-o", "json"]);
        assert!(
            o.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        scanned += text.matches("\"kind\"").count();
        found.extend(leaks(kind, &text, &secrets));
    }
    assert!(scanned > 50, "too little was scanned: {scanned} objects");
    let events = s.ok(&["get", "events", "-A", "-o", "json"]);
    assert!(
        events.contains("rf0"),
        "no Events about the hosts were recorded"
    );

    let log = std::fs::read_to_string(s.dir.join("serve.log")).unwrap();
    assert!(log.contains("DEBUG"), "the log is not at debug level");
    found.extend(leaks("serve's log", &log, &secrets));
    let audit = std::fs::read_to_string(s.dir.join("audit/audit.log")).unwrap();
    assert!(
        audit.contains("\"secrets\""),
        "the audit log has no Secret requests"
    );
    found.extend(leaks("the audit log", &audit, &secrets));
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("ferrometal_bmc_requests_total"), "{text}");
    found.extend(leaks("/metrics", &text, &secrets));

    // The passwords are where they belong: the scan would have seen them there.
    let stored = s.ok(&["get", "secrets", "-o", "json"]);
    assert!(!leaks("secrets", &stored, &secrets).is_empty());
    assert!(found.is_empty(), "{found:#?}");
}
