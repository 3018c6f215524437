//! Events are kept in memory only. Through `ferrometal serve` (with the project's Redfish
//! emulator behind two hosts): kubectl lists, describes and watches the controllers' Events as
//! before, a namespace keeps only its newest Events (`--max-events-per-namespace`, the evicted
//! ones reach watchers as DELETED), no Event ever reaches the store file (`ferrometal store
//! check`), and a restart after kill -9 keeps every object and loses every Event: a watch
//! from an Event version of before answers 410 Gone, and no version is handed out twice.

mod serve_common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ferrometal_emulator::{Emulator, EmulatorConfig};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

/// The per-namespace bound the server runs with.
const PER_NAMESPACE: usize = 20;

fn event(name: &str) -> Event {
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("ConfigMap".into()),
            name: Some("noise-source".into()),
            namespace: Some("noisy".into()),
            ..Default::default()
        },
        reason: Some("Noise".into()),
        message: Some(format!("event {name}")),
        type_: Some("Normal".into()),
        ..Default::default()
    }
}

/// A watch as every client makes one: HTTPS with the admin's token, one JSON event a line.
struct Watch {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Watch {
    async fn open(s: &Serve, path_and_query: &str) -> Watch {
        let ca = std::fs::read(s.dir.join("ca.crt")).unwrap();
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        let token = std::fs::read_to_string(s.dir.join("token")).unwrap();
        let response = client
            .get(format!("{}{path_and_query}", s.url))
            .bearer_auth(token.trim())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        Watch {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next event (`{"type": ..., "object": ...}`), or `None` once the stream ends.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk())
                .await
                .expect("watch stalled")
                .unwrap()?;
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Every object of every listable resource but Events: (resource, namespace, name, uid).
fn inventory(s: &Serve) -> BTreeSet<(String, String, String, String)> {
    let resources: Vec<String> = s
        .ok(&["api-resources", "--verbs=list", "-o", "name"])
        .lines()
        .filter(|r| !r.is_empty() && *r != "events" && *r != "events.events.k8s.io")
        .map(str::to_string)
        .collect();
    let mut out = BTreeSet::new();
    for r in resources {
        for item in s.json(&["get", &r, "-A", "-o", "json"])["items"]
            .as_array()
            .unwrap()
        {
            let text = |p: &str| item.pointer(p).and_then(Value::as_str).unwrap_or("");
            out.insert((
                r.clone(),
                text("/metadata/namespace").to_string(),
                text("/metadata/name").to_string(),
                text("/metadata/uid").to_string(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_live_in_memory_and_a_restart_keeps_every_object() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 2,
            power_delay: Duration::from_millis(100),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let per_ns = PER_NAMESPACE.to_string();
    let mut s = serve(
        dir.path(),
        port,
        &[
            "--power-poll-interval",
            "2",
            "--max-events-per-namespace",
            &per_ns,
        ],
    );
    let address = |i| {
        emu.system_url(i)
            .replace("http://", "redfish-virtualmedia+http://")
    };
    let hosts = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: infra}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: noisy}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc, namespace: infra}}\nstringData: {{username: admin, password: password}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bm-0, namespace: infra}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: bmc}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bm-1, namespace: infra}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: bmc}}\n",
        address(0),
        address(1),
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&hosts));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    s.wait("both hosts available", || {
        s.host_states("infra") == ["available", "available"]
    });

    // The controllers' Events (events.k8s.io/v1), as kubectl shows them in both APIs.
    s.wait("the InspectionComplete Events", || {
        s.ok(&["get", "events", "-n", "infra"])
            .matches("InspectionComplete")
            .count()
            == 2
    });
    let table = s.ok(&["get", "events", "-n", "infra"]);
    assert!(table.contains("Registered"), "{table}");
    let new_api = s.json(&["get", "events.events.k8s.io", "-n", "infra", "-o", "json"]);
    assert!(
        new_api["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Registered" && e["regarding"]["name"] == "bm-0"),
        "{new_api}"
    );
    let described = s.ok(&["describe", "bmh", "bm-0", "-n", "infra"]);
    let events_part = described.split("Events:").nth(1).unwrap_or_default();
    assert!(
        events_part.contains("Registered") && events_part.contains("InspectionComplete"),
        "{described}"
    );
    assert!(!events_part.contains("bm-1"), "{described}");
    let one: Value = s.json(&["get", "events", "-n", "infra", "-o", "json"])["items"][0].clone();
    let got = s.json(&[
        "get",
        "event",
        one["metadata"]["name"].as_str().unwrap(),
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(got["metadata"]["uid"], one["metadata"]["uid"]);

    // kubectl's watch sees a new Event.
    let mut watcher = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["get", "events", "-n", "noisy", "--watch-only", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = BufReader::new(watcher.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let client = Client::try_from(s.kube_config().await).unwrap();
    let noisy: Api<Event> = Api::namespaced(client.clone(), "noisy");
    let mut seen = None;
    for attempt in 0..40 {
        // The watch may not be established yet when the first one is written: write another.
        noisy
            .create(&PostParams::default(), &event(&format!("hello-{attempt}")))
            .await
            .unwrap();
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            seen = Some(line);
            break;
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    let seen = seen.expect("kubectl get events --watch-only printed nothing");
    assert!(seen.starts_with("event/hello-"), "{seen}");

    // A namespace keeps its newest Events; watchers see the oldest go.
    for e in noisy.list(&ListParams::default()).await.unwrap() {
        noisy
            .delete(&e.name_any(), &Default::default())
            .await
            .unwrap();
    }
    let from = noisy
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = Watch::open(
        &s,
        &format!(
            "/api/v1/namespaces/noisy/events?watch=1&resourceVersion={from}&timeoutSeconds=60"
        ),
    )
    .await;
    let extra = 5;
    for i in 0..PER_NAMESPACE + extra {
        noisy
            .create(&PostParams::default(), &event(&format!("n-{i:02}")))
            .await
            .unwrap();
    }
    let (mut added, mut deleted) = (Vec::new(), Vec::new());
    while added.len() < PER_NAMESPACE + extra || deleted.len() < extra {
        let next = watch.next().await.expect("watch ended early");
        let name = next["object"]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        match next["type"].as_str().unwrap() {
            "ADDED" => added.push(name),
            "DELETED" => deleted.push(name),
            other => panic!("unexpected {other}: {next}"),
        }
    }
    let first: Vec<String> = (0..extra).map(|i| format!("n-{i:02}")).collect();
    assert_eq!(deleted, first, "the oldest go first");
    let left = s.ok(&["get", "events", "-n", "noisy", "-o", "name"]);
    assert_eq!(left.lines().count(), PER_NAMESPACE, "{left}");
    assert!(!left.contains("n-00") && left.contains("n-24"), "{left}");

    // What there is before the restart.
    let events = s.json(&["get", "events", "-A", "-o", "json"]);
    let before_restart: u64 = Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    let newest_event = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(rv)
        .max()
        .unwrap();
    let objects = inventory(&s);
    assert!(
        objects.contains(&(
            "baremetalhosts.metal3.io".into(),
            "infra".into(),
            "bm-1".into(),
            s.json(&["get", "bmh", "bm-1", "-n", "infra", "-o", "json"])["metadata"]["uid"]
                .as_str()
                .unwrap()
                .into()
        )),
        "{objects:?}"
    );

    // kill -9: the file holds every object and no Event.
    s.kill();
    let check = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["store", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{report}");
    assert!(report.contains("baremetalhosts.metal3.io: 2"), "{report}");
    assert!(!report.contains("events"), "{report}");

    // After the restart (controllers off, so nothing publishes new Events): every object,
    // no Event.
    let s = serve(dir.path(), port, &["--no-controllers"]);
    let after = s.json(&["get", "events", "-A", "-o", "json"]);
    assert_eq!(after["items"], serde_json::json!([]), "{after}");
    let described = s.ok(&["describe", "bmh", "bm-0", "-n", "infra"]);
    assert!(!described.contains("InspectionComplete"), "{described}");
    let kept = inventory(&s);
    let lost: Vec<_> = objects.difference(&kept).collect();
    assert!(lost.is_empty(), "objects lost in the restart: {lost:?}");

    // A watch from an Event version of before the restart: 410 Gone, so clients relist.
    let mut watch = Watch::open(
        &s,
        &format!(
            "/api/v1/namespaces/noisy/events?watch=1&resourceVersion={before_restart}&timeoutSeconds=10"
        ),
    )
    .await;
    let gone = watch.next().await.expect("an answer to the watch");
    assert_eq!(gone["type"], "ERROR", "{gone}");
    assert_eq!(gone["object"]["code"], 410, "{gone}");

    // New Events get versions above every Event of before (none is handed out twice).
    let client = Client::try_from(s.kube_config().await).unwrap();
    let noisy: Api<Event> = Api::namespaced(client, "noisy");
    let made = noisy
        .create(&PostParams::default(), &event("after-restart"))
        .await
        .unwrap();
    let made: u64 = made.resource_version().unwrap().parse().unwrap();
    assert!(made > newest_event, "{made} <= {newest_event}");
    let listed = s.ok(&["get", "events", "-n", "noisy", "-o", "name"]);
    assert_eq!(listed.trim(), "event/after-restart");
}

#[test]
fn serve_help_says_a_restart_loses_events() {
    let help = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in ["--event-ttl", "--max-events-per-namespace", "--max-events "] {
        assert!(text.contains(flag), "{flag} missing: {text}");
    }
    assert!(text.contains("a restart loses every Event"), "{text}");
}
