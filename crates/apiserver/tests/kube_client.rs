//! kube-rs against the server, both through a real socket (TLS + token from the kubeconfig)
//! and through the in-process transport: typed and dynamic objects, custom resources,
//! server-side apply and write conflicts. Watchers, controllers, garbage collection and
//! events are in `kube_runtime.rs`.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
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
