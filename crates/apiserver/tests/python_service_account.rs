//! The official Python `kubernetes` client as a namespaced ServiceAccount (a token from
//! TokenRequest, `edit` in its namespace): its namespace works, anything cluster-wide or in
//! another namespace is 403.

mod common;

use std::process::Command;

use base64::Engine;
use common::*;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, PostParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_as_a_namespaced_service_account() {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
    assert!(
        std::path::Path::new(python).exists(),
        "missing {python}: run scripts/setup-python.sh"
    );
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", true).await;
    let admin = srv.api.client();
    let pp = PostParams::default();
    for ns in ["team", "infra"] {
        let n: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&pp, &n)
            .await
            .unwrap();
    }
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bmc-creds"}, "stringData": {"password": "hunter2"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "infra")
        .create(&pp, &secret)
        .await
        .unwrap();
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), "team");
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "app"}})).unwrap();
    sas.create(&pp, &sa).await.unwrap();
    let rb: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "team"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "team")
        .create(&pp, &rb)
        .await
        .unwrap();
    let tr: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": {"expirationSeconds": 3600}})).unwrap();
    let token = sas
        .create_token_request("app", &pp, &tr)
        .await
        .unwrap()
        .status
        .and_then(|s| s.token)
        .expect("a token");

    // The kubeconfig a platform team would hand the workload: CA and token only.
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).unwrap();
    let kc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": format!("https://{}", srv.addr),
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca)}}],
        "users": [{"name": "app", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "app", "namespace": "team"}}],
        "current-context": "c",
    });
    let kc_path = dir.path().join("app.kubeconfig");
    std::fs::write(&kc_path, kc.to_string()).unwrap();

    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/python_service_account.py"
            ))
            .arg(&kc_path)
            .args(["team", "infra"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "create-own-configmap ok",
            "list-own-configmaps ok",
            "list-own-secrets ok",
            "list-all-secrets 403 Forbidden",
            "list-all-configmaps 403 Forbidden",
            "watch-other-secrets 403 Forbidden",
            "read-other-secret 403 Forbidden",
        ],
        "{text}"
    );
    assert!(!text.contains("hunter2"));
    srv.stop().await;
}
