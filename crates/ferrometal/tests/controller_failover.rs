//! Failover: two `ferrometal controller --leader-elect` replicas against `serve
//! --no-controllers`; the leader is killed with SIGKILL while 100 hosts provision. The standby
//! takes the Lease over, every host ends provisioned, and the BMCs saw no destructive action
//! twice.

mod serve_common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrometal_emulator::{Emulator, EmulatorConfig};
use ferrometal_test_support::images::ImageServer;
use serve_common::{Serve, free_port, serve};

const HOSTS: usize = 100;

struct Replica(Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn replica(s: &Serve, log: &Path, metrics_port: u16) -> Replica {
    Replica(
        Command::new(env!("CARGO_BIN_EXE_ferrometal"))
            .args(["controller", "--leader-elect", "--kubeconfig"])
            .arg(&s.kubeconfig)
            .args(["--power-poll-interval", "5", "--error-backoff", "1"])
            .args(["--bmc-timeout", "3"])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .env("FERROMETAL_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

fn holder(s: &Serve) -> String {
    let o = s.kubectl(&[
        "get",
        "lease",
        "ferrometal-controller",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn holds(s: &Serve, r: &Replica) -> bool {
    holder(s).contains(&format!("_{}_", r.0.id()))
}

fn states(s: &Serve) -> Vec<String> {
    let out = s.ok(&[
        "get",
        "bmh",
        "-o",
        "jsonpath={range .items[*]}{.status.provisioning.state}{\"\\n\"}{end}",
    ]);
    out.lines().map(String::from).collect()
}

fn wait(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

async fn probe(port: u16, path: &str) -> u16 {
    match reqwest::get(format!("http://127.0.0.1:{port}{path}")).await {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_when_the_leader_is_killed() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: HOSTS,
            power_delay: Duration::from_millis(100),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    let (port_a, port_b) = (free_port(), free_port());
    let a = replica(&s, &dir.path().join("a.log"), port_a);
    wait("replica a to lead", Duration::from_secs(60), || {
        holds(&s, &a)
    });
    let b = replica(&s, &dir.path().join("b.log"), port_b);
    wait("replica b's probes", Duration::from_secs(30), || {
        std::fs::read_to_string(dir.path().join("b.log"))
            .unwrap_or_default()
            .contains("standing by")
    });
    // A standby is alive and ready (it can reach the API server), and does not lead.
    assert_eq!(probe(port_b, "/healthz").await, 200);
    assert_eq!(probe(port_b, "/readyz").await, 200);
    assert!(holds(&s, &a), "{}", holder(&s));

    // The emulator, like a real BMC, fetches what it inserts.
    let images = ImageServer::start();
    let image = |i: usize| images.url(&format!("live-{i}.iso"));
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: default}\n\
         stringData: {username: admin, password: password}\n",
    );
    for i in 0..HOSTS {
        let address = emu
            .system_url(i)
            .replace("http://", "redfish-virtualmedia+http://");
        let url = image(i);
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\n\
             metadata: {{name: h{i}, namespace: default}}\n\
             spec: {{online: true, bmc: {{address: \"{address}\", credentialsName: bmc}},\n  \
             image: {{url: \"{url}\", format: live-iso}}}}\n"
        ));
    }
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Kill the leader in the middle of the work.
    wait("some hosts provisioned", Duration::from_secs(120), || {
        states(&s).iter().filter(|st| *st == "provisioned").count() >= HOSTS / 5
    });
    let mut a = a;
    unsafe_kill(&mut a);
    let killed = Instant::now();
    let in_progress = states(&s).iter().filter(|st| *st != "provisioned").count();
    assert!(
        in_progress > 0,
        "everything was provisioned before the kill"
    );
    wait("replica b to lead", Duration::from_secs(60), || {
        holds(&s, &b)
    });
    eprintln!(
        "takeover {:.1}s after SIGKILL of the leader ({in_progress} hosts not yet provisioned)",
        killed.elapsed().as_secs_f64()
    );
    wait("every host provisioned", Duration::from_secs(240), || {
        let st = states(&s);
        st.len() == HOSTS && st.iter().all(|st| st == "provisioned")
    });

    for i in 0..HOSTS {
        let actions = emu.state(i).actions;
        let count = |what: &str| actions.iter().filter(|a| a.contains(what)).count();
        assert_eq!(count("InsertMedia"), 1, "h{i}: {actions:?}");
        for destructive in ["ForceOff", "ForceRestart", "PowerCycle", "GracefulShutdown"] {
            assert!(
                count(destructive) <= 1,
                "h{i} {destructive} twice: {actions:?}"
            );
        }
        let media = emu.state(i).virtual_media;
        assert_eq!(media.image.as_deref(), Some(&*image(i)));
    }
}

fn unsafe_kill(r: &mut Replica) {
    r.0.kill().unwrap();
    r.0.wait().unwrap();
}
