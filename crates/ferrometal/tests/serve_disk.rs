//! Disk trouble: a full disk refuses writes with a clear error and reports not-ready, loses
//! nothing acknowledged and recovers by itself; a second serve on the same data directory stops
//! before touching it.

mod serve_common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serve_common::*;

/// A client that shows each refusal instead of retrying it as kube's default does.
async fn client_for(srv: &Serve) -> Client {
    let mut cfg = srv.kube_config().await;
    cfg.default_retry = false;
    Client::try_from(cfg).unwrap()
}

fn cm(name: &str, bytes: usize) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([(
        "v".into(),
        name.repeat(bytes / name.len() + 1),
    )]));
    c
}

fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    [
        "token",
        "kubeconfig",
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
        "sa.key",
    ]
    .iter()
    .filter_map(|name| {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).ok()?;
        let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
        Some((name.to_string(), (bytes, modified)))
    })
    .collect()
}

#[test]
fn a_second_serve_on_the_same_data_directory_stops_before_touching_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = serve(dir.path(), free_port(), &["--no-controllers"]);
    let before = snapshot(dir.path());
    assert!(before.len() >= 4, "{:?}", before.keys());
    let output = Command::new(&first.bin)
        .args(["serve", "--no-controllers", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let pid = first.child.id();
    assert!(
        stderr.contains("is in use by another ferrometal serve (pid ")
            && stderr.contains(&format!("pid {pid})")),
        "{stderr}"
    );
    assert_eq!(
        snapshot(dir.path()),
        before,
        "the second serve touched the directory"
    );
    first.ok(&["get", "namespaces"]);
}

/// A small filesystem for the data directory, or (where mounting is not allowed) the store's
/// documented fault-injection hook standing in for it.
enum Disk {
    Mounted(PathBuf),
    Injected(PathBuf),
}

impl Disk {
    fn new(root: &Path) -> Disk {
        let mnt = root.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=32m", "tmpfs"])
            .arg(&mnt)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            Disk::Mounted(mnt)
        } else {
            eprintln!("cannot mount a tmpfs here: using FERROMETAL_FAULT_DISK_FULL");
            Disk::Injected(mnt)
        }
    }

    fn dir(&self) -> &Path {
        match self {
            Disk::Mounted(p) | Disk::Injected(p) => p,
        }
    }

    fn flag(&self) -> PathBuf {
        self.dir().with_file_name("disk-full")
    }

    fn fill(&self) {
        match self {
            Disk::Mounted(mnt) => {
                let mut filler = std::fs::File::create(mnt.join("filler")).unwrap();
                let chunk = vec![0u8; 64 << 10];
                while filler
                    .write_all(&chunk)
                    .and_then(|()| filler.flush())
                    .is_ok()
                {}
            }
            Disk::Injected(_) => {
                std::fs::write(self.flag(), b"").unwrap();
            }
        }
    }

    fn free(&self) {
        match self {
            Disk::Mounted(mnt) => std::fs::remove_file(mnt.join("filler")).unwrap(),
            Disk::Injected(_) => std::fs::remove_file(self.flag()).unwrap(),
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Disk::Mounted(mnt) = self {
            let _ = Command::new("umount").arg("-l").arg(mnt).status();
        }
    }
}

/// `/readyz` with the server's token (kubectl hides a 503's body).
async fn readyz(srv: &Serve) -> Result<String, String> {
    let token = std::fs::read_to_string(srv.dir.join("token")).unwrap();
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let resp = http
        .get(format!("{}/readyz", srv.url))
        .bearer_auth(token.trim())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let ok = resp.status().is_success();
    let text = format!(
        "{} {}",
        resp.status(),
        resp.text().await.unwrap_or_default()
    );
    if ok { Ok(text) } else { Err(text) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_reports_not_ready_and_recovers() {
    let root = tempfile::tempdir().unwrap();
    let disk = Disk::new(root.path());
    // SAFETY: set before any thread of this test process reads the environment; the children
    // inherit it. It only matters when the tmpfs could not be mounted.
    #[allow(
        unsafe_code,
        reason = "the serve children inherit it; no other thread reads it"
    )]
    unsafe {
        std::env::set_var("FERROMETAL_FAULT_DISK_FULL", disk.flag())
    };
    let data = disk.dir().join("data");
    // The server's log goes where it can still be written when the disk is full.
    std::fs::create_dir_all(&data).unwrap();
    let log = root.path().join("serve.log");
    std::os::unix::fs::symlink(&log, data.join("serve.log")).unwrap();
    let port = free_port();
    let mut srv = serve(&data, port, &["--no-controllers"]);
    let api: Api<ConfigMap> = Api::default_namespaced(client_for(&srv).await);
    let mut acked = Vec::new();
    for i in 0..20 {
        let name = format!("before-{i}");
        api.create(&PostParams::default(), &cm(&name, 4096))
            .await
            .unwrap();
        acked.push(name);
    }

    disk.fill();
    let mut refusal = None;
    for i in 0..2000 {
        let name = format!("full-{i}");
        match api
            .create(&PostParams::default(), &cm(&name, 32 << 10))
            .await
        {
            Ok(_) => acked.push(name),
            Err(e) => {
                refusal = Some(e.to_string());
                break;
            }
        }
    }
    let refusal = refusal.expect("writes go on with the disk full");
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        refusal.contains("the store cannot write") && refusal.contains("No space left on device"),
        "{refusal}"
    );
    assert!(
        refusal.contains("ServiceUnavailable") || refusal.contains("503"),
        "{refusal}"
    );
    // Not ready, and it stays so while the disk is full (the recovery probes every second).
    for _ in 0..3 {
        let not_ready = readyz(&srv).await.expect_err("ready with the disk full");
        assert!(
            not_ready.contains("store failed: cannot write"),
            "{not_ready}"
        );
        let refused = api
            .create(&PostParams::default(), &cm("refused", 1024))
            .await;
        assert!(
            refused.is_err(),
            "accepted with the disk full: {}",
            log_text()
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    // Reads go on meanwhile.
    assert!(api.list(&ListParams::default()).await.unwrap().items.len() >= acked.len());

    disk.free();
    let mut waited = 0;
    while readyz(&srv).await.is_err() {
        waited += 1;
        assert!(
            waited < 300,
            "not ready again after space returned: {}",
            log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    api.create(&PostParams::default(), &cm("after", 4096))
        .await
        .unwrap();
    acked.push("after".into());

    // Everything acknowledged is on disk: kill -9 and read it back.
    srv.kill();
    let srv = serve(&data, port, &["--no-controllers"]);
    let api: Api<ConfigMap> = Api::default_namespaced(client_for(&srv).await);
    let stored: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    for name in &acked {
        assert!(stored.contains(name), "{name} was acknowledged and is gone");
    }
    let again = api.get("before-3").await.unwrap();
    assert_eq!(again.data, cm("before-3", 4096).data);
}
