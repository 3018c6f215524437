//! kube-rs's runtime against the server: watchers (across a restart, streaming lists, label
//! selectors), a controller with a finalizer, garbage collection (background and foreground),
//! events and leases. Plain reads and writes are in `kube_client.rs`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", true).await;
    let addr = srv.addr.to_string();
    let client = srv.socket_client().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watch_task = tokio::spawn({
        let seen = seen.clone();
        let cms = cms.clone();
        async move {
            let cfg = watcher::Config::default().timeout(5);
            let mut stream = watcher(cms, cfg)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(ev) = stream.next().await {
                if let Ok(cm) = ev {
                    seen.lock().unwrap().push(cm.name_any());
                }
            }
        }
    });
    let wait_for = |name: &'static str| {
        let seen = seen.clone();
        async move {
            for _ in 0..600 {
                if seen.lock().unwrap().iter().any(|n| n == name) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("watcher never saw {name}");
        }
    };
    let mk = |name: &str| {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm
    };
    cms.create(&PostParams::default(), &mk("before"))
        .await
        .unwrap();
    wait_for("before").await;
    srv.stop().await;

    let srv = start(dir.path(), &addr, true).await;
    let cms2: Api<ConfigMap> = Api::default_namespaced(srv.socket_client().await);
    assert!(
        cms2.get("before").await.is_ok(),
        "data survives the restart"
    );
    cms2.create(&PostParams::default(), &mk("after"))
        .await
        .unwrap();
    wait_for("after").await;
    watch_task.abort();
    srv.stop().await;
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ReconcileError(String);

struct Ctx {
    client: Client,
    cleaned: AtomicUsize,
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &w.namespace().unwrap());
    finalizer(&api, "example.com/cleanup", w, |event| async {
        match event {
            FinalizerEvent::Apply(w) => {
                let status = json!({"status": {"phase": "Ready", "observed_generation": w.metadata.generation}});
                api.patch_status(&w.name_any(), &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .map_err(|e| ReconcileError(e.to_string()))?;
                Ok(Action::await_change())
            }
            FinalizerEvent::Cleanup(_) => {
                ctx.cleaned.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e: kube::runtime::finalizer::Error<ReconcileError>| ReconcileError(e.to_string()))
}

fn error_policy(_w: Arc<Widget>, _e: &ReconcileError, _ctx: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_reconciles_to_status_with_finalizer() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let client = api.client();
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        cleaned: AtomicUsize::new(0),
    });
    let controller = tokio::spawn(
        Controller::new(widgets.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );
    widgets
        .create(&PostParams::default(), &widget("managed", 2))
        .await
        .unwrap();
    let mut ready = None;
    for _ in 0..400 {
        let w = widgets.get("managed").await.unwrap();
        if w.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready") {
            ready = Some(w);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let w = ready.expect("controller set the status");
    assert_eq!(w.finalizers(), ["example.com/cleanup"]);
    assert_eq!(w.status.unwrap().observed_generation, Some(1));

    widgets
        .delete("managed", &DeleteParams::default())
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..400 {
        if let Err(kube::Error::Api(e)) = widgets.get("managed").await {
            assert_eq!(e.code, 404);
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "finalizer removed and object deleted");
    assert_eq!(ctx.cleaned.load(Ordering::SeqCst), 1);
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_deletion_collects_dependents() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let client = api.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("owner".into());
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let mut dep = ConfigMap::default();
    dep.metadata.name = Some("dependent".into());
    dep.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.uid().unwrap(),
            ..Default::default()
        },
    ]);
    cms.create(&PostParams::default(), &dep).await.unwrap();
    // A dependent of a kind this server does not serve is left alone.
    let mut foreign = ConfigMap::default();
    foreign.metadata.name = Some("foreign-owned".into());
    foreign.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            kind: "Machine".into(),
            name: "m".into(),
            uid: "0000".into(),
            ..Default::default()
        },
    ]);
    cms.create(&PostParams::default(), &foreign).await.unwrap();
    let mut keep = ConfigMap::default();
    keep.metadata.name = Some("unrelated".into());
    cms.create(&PostParams::default(), &keep).await.unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    let mut names = Vec::new();
    for _ in 0..200 {
        names = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|c| c.name_any())
            .collect();
        if names == ["foreign-owned", "unrelated"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names, ["foreign-owned", "unrelated"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_stream_events_and_list_watch_consistency() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&kube::api::WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("w".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "1"}})),
    )
    .await
    .unwrap();
    cms.delete("w", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap() {
            Some(kube::api::WatchEvent::Added(_)) => kinds.push("ADDED"),
            Some(kube::api::WatchEvent::Modified(_)) => kinds.push("MODIFIED"),
            Some(kube::api::WatchEvent::Deleted(_)) => kinds.push("DELETED"),
            Some(other) => panic!("unexpected {other:?}"),
            None => break,
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_watcher_gets_initial_state_then_changes() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let mut first = ConfigMap::default();
    first.metadata.name = Some("first".into());
    cms.create(&PostParams::default(), &first).await.unwrap();
    let mut stream = watcher(cms.clone(), watcher::Config::default().streaming_lists())
        .applied_objects()
        .boxed();
    let got = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got.name_any(), "first");
    let mut second = ConfigMap::default();
    second.metadata.name = Some("second".into());
    cms.create(&PostParams::default(), &second).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got.name_any(), "second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorder_events_show_in_core_events_and_leases_work() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let client = api.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("host-0".into());
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let reporter = Reporter {
        controller: "ferrometal-test".into(),
        instance: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let ev = Event {
        type_: EventType::Normal,
        reason: "PowerCycled".into(),
        note: Some("power cycle done".into()),
        action: "PowerCycle".into(),
        secondary: None,
    };
    let reference = kube::Resource::object_ref(&cm, &());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let core: Api<CoreEvent> = Api::default_namespaced(client.clone());
    let events = core
        .list(&ListParams::default().fields("involvedObject.name=host-0"))
        .await
        .unwrap();
    assert_eq!(events.items.len(), 1, "{:?}", events.items);
    let e = &events.items[0];
    assert_eq!(e.reason.as_deref(), Some("PowerCycled"));
    assert_eq!(e.message.as_deref(), Some("power cycle done"));
    assert_eq!(e.involved_object.name.as_deref(), Some("host-0"));
    let new: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(client.clone());
    let e2 = new.get(&e.name_any()).await.unwrap();
    assert_eq!(e2.note.as_deref(), Some("power cycle done"));
    assert_eq!(e2.series.map(|s| s.count), Some(2));

    // Leases, as leader election uses them.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let mut l = Lease::default();
    l.metadata.name = Some("ferrometal".into());
    l.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some("a".into()),
        lease_duration_seconds: Some(15),
        ..Default::default()
    });
    let created = leases.create(&PostParams::default(), &l).await.unwrap();
    let mut taken = created.clone();
    taken.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases
        .replace("ferrometal", &PostParams::default(), &taken)
        .await
        .unwrap();
    match leases
        .replace("ferrometal", &PostParams::default(), &created)
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409),
        other => panic!("stale lease update must conflict: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selector_watch_sees_objects_enter_and_leave() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(
            &kube::api::WatchParams::default()
                .labels("tier=a")
                .timeout(10),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("moving".into());
    cm.metadata.labels = Some(BTreeMap::from([("tier".into(), "a".into())]));
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let mut other = ConfigMap::default();
    other.metadata.name = Some("never".into());
    cms.create(&PostParams::default(), &other).await.unwrap();
    for tier in ["b", "a"] {
        cms.patch(
            "moving",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": tier}}})),
        )
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
            .await
            .unwrap()
            .unwrap();
        match ev {
            Some(kube::api::WatchEvent::Added(c)) => seen.push(format!("ADDED {}", c.name_any())),
            Some(kube::api::WatchEvent::Modified(c)) => {
                seen.push(format!("MODIFIED {}", c.name_any()))
            }
            Some(kube::api::WatchEvent::Deleted(c)) => {
                seen.push(format!("DELETED {}", c.name_any()))
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => break,
        }
    }
    assert_eq!(seen, ["ADDED moving", "DELETED moving", "ADDED moving"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_waits_for_dependents() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("fg-owner".into());
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let mut dep = ConfigMap::default();
    dep.metadata.name = Some("fg-dep".into());
    // The dependent holds its own finalizer, so the owner must wait for it.
    dep.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    dep.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "fg-owner".into(),
            uid: owner.uid().unwrap(),
            block_owner_deletion: Some(true),
            ..Default::default()
        },
    ]);
    cms.create(&PostParams::default(), &dep).await.unwrap();
    cms.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let o = cms.get("fg-owner").await.unwrap();
    assert!(o.metadata.deletion_timestamp.is_some());
    assert_eq!(o.finalizers(), ["foregroundDeletion"]);
    // The collector marks the dependent for deletion; the owner stays meanwhile.
    let mut marked = false;
    for _ in 0..200 {
        if cms
            .get("fg-dep")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
        {
            marked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(marked, "dependent deleted by the collector");
    assert!(
        cms.get("fg-owner").await.is_ok(),
        "owner waits for its dependent"
    );
    cms.patch(
        "fg-dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let mut gone = false;
    for _ in 0..200 {
        if matches!(cms.get("fg-owner").await, Err(kube::Error::Api(e)) if e.code == 404) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "owner removed once its dependents are gone");
}

/// Events live a TTL after their last write, as kube-apiserver's `--event-ttl` (an etcd lease
/// renewed by every write): what the Event says about its own times does not matter, and a
/// series update gives it another TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_expire_a_ttl_after_their_last_write() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ferrometal_apiserver::ServerConfig::new(dir.path());
    cfg.events.ttl = Duration::from_secs(2);
    let api = ferrometal_apiserver::ApiServer::open(cfg).await.unwrap();
    let events: Api<CoreEvent> = Api::default_namespaced(api.client());
    let old_time = (k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_hours(2))
    .strftime("%Y-%m-%dT%H:%M:%SZ")
    .to_string();
    for name in ["written-once", "renewed"] {
        let ev: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"},
            "reason": "Test", "message": "m", "type": "Normal",
            "lastTimestamp": old_time, "firstTimestamp": old_time, "count": 1,
        }))
        .unwrap();
        events.create(&PostParams::default(), &ev).await.unwrap();
    }
    let names = || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| e.name_any())
            .collect::<Vec<_>>()
    };
    // Two hours old by its own account, yet kept: the TTL counts from the write.
    assert_eq!(names().await, ["renewed", "written-once"]);
    let started = std::time::Instant::now();
    let mut listed = Vec::new();
    while started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Keep renewing one of them, as a series update does.
        events
            .patch(
                "renewed",
                &PatchParams::default(),
                &Patch::Merge(json!({"count": started.elapsed().as_millis() as u64})),
            )
            .await
            .unwrap();
        listed = names().await;
        if listed == ["renewed"] {
            break;
        }
    }
    assert_eq!(listed, ["renewed"]);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "expired too early"
    );
}
