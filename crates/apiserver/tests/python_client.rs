//! The official Python `kubernetes` client lists and watches a custom resource.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::*;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Option<String> {
    tokio::time::timeout(std::time::Duration::from_secs(60), rx.recv())
        .await
        .expect("python client answers in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_lists_and_watches_a_crd() {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
    assert!(
        std::path::Path::new(python).exists(),
        "missing {python}: run scripts/setup-python.sh"
    );
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", true).await;
    let client = srv.api.client();
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    widgets
        .create(&PostParams::default(), &widget("alpha", 1))
        .await
        .unwrap();
    widgets
        .create(&PostParams::default(), &widget("beta", 2))
        .await
        .unwrap();

    let mut child = Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python_client.py"
        ))
        .arg(dir.path().join("kubeconfig"))
        .arg("3")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    // Wait until it is watching before changing anything.
    while let Some(line) = next(&mut rx).await {
        lines.push(line.clone());
        if line == "WATCHING" {
            break;
        }
    }
    widgets
        .create(&PostParams::default(), &widget("gamma", 3))
        .await
        .unwrap();
    widgets
        .patch(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 10}})),
        )
        .await
        .unwrap();
    widgets
        .delete("beta", &DeleteParams::default())
        .await
        .unwrap();
    while let Some(line) = next(&mut rx).await {
        lines.push(line.clone());
        if line == "DONE" {
            break;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{lines:?}");
    assert_eq!(
        lines,
        [
            "LIST alpha,beta",
            "WATCHING",
            "EVENT ADDED gamma 3",
            "EVENT MODIFIED alpha 10",
            "EVENT DELETED beta 2",
            "DONE",
        ]
    );
    srv.stop().await;
}
