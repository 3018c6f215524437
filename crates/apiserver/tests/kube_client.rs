//! kube-rs against the server, both through a real socket (TLS + token from the kubeconfig)
//! and through the in-process transport.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

async fn typed_and_dynamic(client: Client) {
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let mut s = Secret::default();
    s.metadata.name = Some("bmc-creds".into());
    s.metadata.labels = Some(BTreeMap::from([("app".into(), "bmc".into())]));
    s.string_data = Some(BTreeMap::from([("password".into(), "hunter2".into())]));
    let created = secrets.create(&PostParams::default(), &s).await.unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let got = secrets.get("bmc-creds").await.unwrap();
    assert_eq!(
        got.data.unwrap()["password"].0,
        b"hunter2".to_vec(),
        "stringData is folded into data"
    );
    assert!(got.string_data.is_none());

    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..5 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        cm.metadata.labels = Some(BTreeMap::from([(
            "parity".into(),
            if i % 2 == 0 { "even" } else { "odd" }.into(),
        )]));
        cm.data = Some(BTreeMap::from([("i".into(), i.to_string())]));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let even = cms
        .list(&ListParams::default().labels("parity=even"))
        .await
        .unwrap();
    assert_eq!(
        even.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["cm-0", "cm-2", "cm-4"]
    );
    let set_based = cms
        .list(&ListParams::default().labels("parity in (odd),parity!=even"))
        .await
        .unwrap();
    assert_eq!(set_based.items.len(), 2);
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=cm-3"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);

    // Pagination.
    let page1 = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page1.items.len(), 2);
    let token = page1.metadata.continue_.clone().expect("continue token");
    let page2 = cms
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(page2.items.len(), 3);
    assert!(page2.metadata.continue_.is_none());

    // Replace with the current resourceVersion works; with a stale one it is a 409.
    let mut cm0 = cms.get("cm-0").await.unwrap();
    let stale = cm0.clone();
    cm0.data = Some(BTreeMap::from([("i".into(), "changed".into())]));
    let replaced = cms
        .replace("cm-0", &PostParams::default(), &cm0)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version(), stale.resource_version());
    match cms.replace("cm-0", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 409);
            assert_eq!(e.reason, "Conflict");
            assert!(
                e.message
                    .contains("the object has been modified; please apply your changes to the latest version and try again"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }

    // Dynamic API over the same objects.
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let d = dynamic.get("cm-0").await.unwrap();
    assert_eq!(d.data["data"]["i"], "changed");
    dynamic
        .patch(
            "cm-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(cms.get("cm-0").await.unwrap().annotations()["a"], "b");

    // Delete, then it is gone.
    cms.delete("cm-1", &DeleteParams::default()).await.unwrap();
    match cms.get("cm-1").await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 404);
            assert_eq!(e.message, "configmaps \"cm-1\" not found");
        }
        other => panic!("expected 404, got {other:?}"),
    }
    // Missing namespace.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("x".into());
    match other.create(&PostParams::default(), &cm).await {
        Err(kube::Error::Api(e)) => assert_eq!(
            (e.code, e.message.as_str()),
            (404, "namespaces \"nope\" not found")
        ),
        other => panic!("expected 404, got {other:?}"),
    }
    // Duplicate.
    match cms
        .create(&PostParams::default(), &cms.get("cm-0").await.unwrap())
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("expected 409, got {other:?}"),
    }
    // deletecollection by label.
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("parity=even"),
    )
    .await
    .unwrap();
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, ["cm-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_and_dynamic_over_socket() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", true).await;
    typed_and_dynamic(srv.socket_client().await).await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_and_dynamic_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    typed_and_dynamic(api.client()).await;
}

async fn custom_resources(client: Client) {
    install_widgets(&client).await;
    // Re-applying an unchanged CRD writes nothing.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let before = crds.get("widgets.example.com").await.unwrap();
    let ssa = PatchParams::apply("crd-installer").force();
    crds.patch("widgets.example.com", &ssa, &Patch::Apply(&widget_crd()))
        .await
        .unwrap();
    let again = crds
        .patch("widgets.example.com", &ssa, &Patch::Apply(&widget_crd()))
        .await
        .unwrap();
    let third = crds
        .patch("widgets.example.com", &ssa, &Patch::Apply(&widget_crd()))
        .await
        .unwrap();
    assert_eq!(again.resource_version(), third.resource_version());
    assert_eq!(before.metadata.generation, third.metadata.generation);

    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let w = widgets
        .create(&PostParams::default(), &widget("w1", 3))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(
        w.spec.color.as_deref(),
        Some("blue"),
        "schema default applied"
    );
    assert!(w.status.is_none());

    // Status writes go through the subresource and do not bump generation.
    let st = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 50}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().phase.as_deref(), Some("Ready"));
    assert_eq!(st.spec.size, 3, "status writes ignore spec");
    assert_eq!(st.metadata.generation, Some(1));

    // Spec writes bump generation and keep status.
    let up = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}, "status": {"phase": "Other"}})),
        )
        .await
        .unwrap();
    assert_eq!(up.metadata.generation, Some(2));
    assert_eq!(up.status.unwrap().phase.as_deref(), Some("Ready"));
    // Label-only changes do not.
    let up = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(up.metadata.generation, Some(2));

    // Schema and CEL validation: 422 with field paths, nothing stored.
    let before = widgets.get("w1").await.unwrap();
    for (patch, field, needle) in [
        (
            json!({"spec": {"size": 0}}),
            "spec.size",
            "greater than or equal to 1",
        ),
        (
            json!({"spec": {"size": 200}}),
            "spec",
            "size must be below 100",
        ),
        (json!({"spec": {"size": 2}}), "spec", "size may not shrink"),
        (
            json!({"spec": {"color": "green"}}),
            "spec.color",
            "Unsupported value",
        ),
    ] {
        match widgets
            .patch("w1", &PatchParams::default(), &Patch::Merge(patch.clone()))
            .await
        {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{patch}: {}", e.message);
                assert_eq!(e.reason, "Invalid");
                assert!(
                    e.message
                        .starts_with("Widget.example.com \"w1\" is invalid: "),
                    "{}",
                    e.message
                );
                assert!(e.message.contains(field), "{}", e.message);
                assert!(e.message.contains(needle), "{patch}: {}", e.message);
            }
            other => panic!("{patch}: expected 422, got {other:?}"),
        }
    }
    let after = widgets.get("w1").await.unwrap();
    assert_eq!(before.resource_version(), after.resource_version());

    // Strategic merge patch is not for custom resources.
    match widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 5}})),
        )
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 415),
        other => panic!("expected 415, got {other:?}"),
    }
    // JSON patch.
    let jp: json_patch_v4::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/size", "value": 7}]))
            .unwrap();
    let up = widgets
        .patch("w1", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap();
    assert_eq!(up.spec.size, 7);

    // generateName.
    let mut g = widget("", 1);
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let g = widgets.create(&PostParams::default(), &g).await.unwrap();
    assert!(g.name_any().starts_with("gen-") && g.name_any().len() == 9);

    // Invalid name.
    match widgets
        .create(&PostParams::default(), &widget("Bad_Name", 1))
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422);
            assert!(e.message.contains("metadata.name"), "{}", e.message);
        }
        other => panic!("expected 422, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_over_socket() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", true).await;
    custom_resources(srv.socket_client().await).await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    custom_resources(api.client()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_twice_conflict_and_force() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let client = api.client();
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let body = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "applied"},
        "spec": {"size": 5},
    });
    let pp = PatchParams::apply("alice");
    let a = widgets
        .patch("applied", &pp, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(a.spec.size, 5);
    let managers: Vec<String> = a
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"alice".to_string()), "{managers:?}");
    let b = widgets
        .patch("applied", &pp, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(
        a.resource_version(),
        b.resource_version(),
        "re-applying the same configuration changes nothing"
    );
    let other = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "applied"},
        "spec": {"size": 6},
    });
    match widgets
        .patch("applied", &PatchParams::apply("bob"), &Patch::Apply(&other))
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 409, "{}", e.message);
            assert!(e.message.contains("alice"), "{}", e.message);
            assert!(e.message.contains("spec.size"), "{}", e.message);
        }
        other => panic!("expected an apply conflict, got {other:?}"),
    }
    // Server-side apply of status through the subresource.
    let st = widgets
        .patch_status(
            "applied",
            &PatchParams::apply("status-writer").force(),
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "status": {"phase": "Applied"},
            })),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().phase.as_deref(), Some("Applied"));
    assert_eq!(st.spec.size, 5, "status apply leaves spec alone");
    let forced = widgets
        .patch(
            "applied",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&other),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.size, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_same_resource_version_exactly_one_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("race".into());
    let base = cms.create(&PostParams::default(), &cm).await.unwrap();
    for round in 0..10 {
        let base = cms.get("race").await.unwrap();
        let mut a = base.clone();
        a.data = Some(BTreeMap::from([("w".into(), format!("a{round}"))]));
        let mut b = base.clone();
        b.data = Some(BTreeMap::from([("w".into(), format!("b{round}"))]));
        let pp = PostParams::default();
        let (ra, rb) = tokio::join!(cms.replace("race", &pp, &a), cms.replace("race", &pp, &b));
        let conflicts = [&ra.as_ref().err(), &rb.as_ref().err()]
            .iter()
            .filter(|e| matches!(e, Some(kube::Error::Api(s)) if s.code == 409))
            .count();
        assert_eq!(conflicts, 1, "round {round}: {ra:?} {rb:?}");
        let winner = ra.or(rb).unwrap();
        assert_eq!(cms.get("race").await.unwrap().data, winner.data);
    }
    drop(base);
}

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
async fn deleting_a_crd_removes_its_objects_and_endpoint() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let client = api.client();
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    widgets
        .create(&PostParams::default(), &widget("doomed", 1))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..200 {
        if let Err(kube::Error::Api(e)) = crds.get("widgets.example.com").await {
            assert_eq!(e.code, 404);
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "CRD removed once its objects are gone");
    match widgets.list(&ListParams::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 404),
        other => panic!("resource should no longer be served: {other:?}"),
    }
    // Recreating the CRD starts empty.
    install_widgets(&client).await;
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_events_expire() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    let dir = tempfile::tempdir().unwrap();
    let api =
        ferrometal_apiserver::ApiServer::open(ferrometal_apiserver::ServerConfig::new(dir.path()))
            .await
            .unwrap();
    let events: Api<CoreEvent> = Api::default_namespaced(api.client());
    let old_time = (k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_hours(2))
    .strftime("%Y-%m-%dT%H:%M:%SZ")
    .to_string();
    let now_time = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    for (name, t) in [("stale", &old_time), ("fresh", &now_time)] {
        let ev: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"},
            "reason": "Test", "message": "m", "type": "Normal",
            "lastTimestamp": t, "firstTimestamp": t, "count": 1,
        }))
        .unwrap();
        events.create(&PostParams::default(), &ev).await.unwrap();
    }
    // Any deletion pokes the collector.
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("poke".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.delete("poke", &DeleteParams::default()).await.unwrap();
    let mut names = Vec::new();
    for _ in 0..200 {
        names = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| e.name_any())
            .collect();
        if names == ["fresh"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names, ["fresh"]);
}

/// Writes are decided outside the store's lock and committed only against the version they
/// were decided on: concurrent patches of one object all land, none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_of_one_object_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(srv.api.client());
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "shared"}, "data": {}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let writers: Vec<_> = (0..40)
        .map(|i| {
            let cms = cms.clone();
            tokio::spawn(async move {
                let p = json!({"data": {format!("k{i}"): "v"}});
                cms.patch("shared", &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .unwrap();
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let got = cms.get("shared").await.unwrap();
    let data = got.data.unwrap_or_default();
    assert_eq!(data.len(), 40, "{data:?}");
    srv.stop().await;
}
