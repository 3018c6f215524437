//! The Ironic supervisor with the real `ironic` program: generated config and credentials,
//! API behind HTTP basic auth, restart after a crash, stop on shutdown.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use ferrometal_provisioner::Provisioner;
use ferrometal_provisioner::ironic::{
    IronicOptions, IronicProvisioner, IronicSupervisor, SupervisorConfig,
};

fn program() -> PathBuf {
    let venv = std::env::var_os("FERROMETAL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv"));
    let p = venv.join("bin/ironic");
    assert!(
        p.is_file(),
        "{} missing: run scripts/setup-ironic.sh",
        p.display()
    );
    p
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervised_ironic_is_private_restarted_and_stopped() {
    let data = tempfile::tempdir().unwrap();
    let mut config = SupervisorConfig::new(data.path());
    config.program = Some(program());
    config.min_backoff = Duration::from_millis(100);
    let sup = IronicSupervisor::start(config).await.unwrap();
    let endpoint = sup.endpoint();
    assert!(endpoint.url.starts_with("http://127.0.0.1:"));

    // Credentials are generated and private; the API refuses requests without them.
    let creds = sup.dir().join("credentials");
    let mode = std::fs::metadata(&creds).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "credentials file mode {mode:o}");
    let conf = std::fs::read_to_string(sup.dir().join("ironic.conf")).unwrap();
    assert!(conf.contains("rpc_transport = none") && conf.contains("host_ip = 127.0.0.1"));
    let (user, password) = endpoint.basic_auth.clone().unwrap();
    assert!(!conf.contains(&password), "password in the config");
    let anonymous = reqwest::get(format!("{}/v1/nodes", endpoint.url))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let authed = reqwest::Client::new()
        .get(format!("{}/v1/nodes", endpoint.url))
        .basic_auth(&user, Some(&password))
        .header("X-OpenStack-Ironic-API-Version", "1.81")
        .send()
        .await
        .unwrap();
    assert_eq!(authed.status(), 200);

    let p = IronicProvisioner::new(IronicOptions::new(endpoint.clone()));
    assert!(p.is_ready().await);
    assert!(p.has_capacity(0).await);

    // A crash: the supervisor starts Ironic again on the same address.
    let first = sup.pid().unwrap();
    std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    let mut rounds = 0;
    loop {
        if sup.starts() >= 2
            && sup.pid().is_some_and(|p| p != first)
            && reqwest::get(format!("{}/v1", endpoint.url))
                .await
                .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        rounds += 1;
        assert!(rounds < 600, "ironic was not restarted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let second = sup.pid().unwrap();
    sup.shutdown().await;
    let mut rounds = 0;
    while alive(second) {
        rounds += 1;
        assert!(rounds < 300, "ironic still runs after shutdown");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
