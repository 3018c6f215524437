//! Every acknowledged write survives SIGKILL of `ferrometal serve`, and the revision never goes
//! backwards across restarts.

mod serve_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use rand::Rng;
use serve_common::*;

async fn client_for(srv: &Serve) -> Client {
    Client::try_from(srv.kube_config().await).unwrap()
}

fn cm(name: &str, value: u64) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([("v".into(), value.to_string())]));
    c
}

#[derive(Default, Clone)]
struct Acked {
    created: Vec<String>,
    counter: u64,
    max_rv: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut srv = serve(dir.path(), port, &[]);
    {
        let api: Api<ConfigMap> = Api::default_namespaced(client_for(&srv).await);
        api.create(&PostParams::default(), &cm("counter", 0))
            .await
            .unwrap();
    }
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut seq = 0u64;
    for round in 0..3 {
        let api: Api<ConfigMap> = Api::default_namespaced(client_for(&srv).await);
        let writer = tokio::spawn({
            let acked = acked.clone();
            let api = api.clone();
            let mut i = seq;
            async move {
                loop {
                    i += 1;
                    let name = format!("d-{i}");
                    let Ok(made) = api.create(&PostParams::default(), &cm(&name, i)).await else {
                        return i;
                    };
                    let rv: u64 = made.resource_version().unwrap().parse().unwrap();
                    {
                        let mut a = acked.lock().unwrap();
                        a.created.push(name);
                        a.max_rv = a.max_rv.max(rv);
                    }
                    let Ok(mut counter) = api.get("counter").await else {
                        return i;
                    };
                    counter.data = Some(BTreeMap::from([("v".into(), i.to_string())]));
                    let Ok(updated) = api
                        .replace("counter", &PostParams::default(), &counter)
                        .await
                    else {
                        return i;
                    };
                    let rv: u64 = updated.resource_version().unwrap().parse().unwrap();
                    let mut a = acked.lock().unwrap();
                    a.counter = i;
                    a.max_rv = a.max_rv.max(rv);
                }
            }
        });
        let delay = rand::rng().random_range(300..1500);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        srv.kill(); // SIGKILL
        seq = writer.await.unwrap() + 1;

        srv = serve(dir.path(), port, &[]);
        let api: Api<ConfigMap> = Api::default_namespaced(client_for(&srv).await);
        let list = api.list(&ListParams::default()).await.unwrap();
        let present: std::collections::HashSet<String> =
            list.items.iter().map(|c| c.name_any()).collect();
        // A snapshot: the lock must not be held across the awaits below.
        let a = acked.lock().unwrap().clone();
        assert!(
            !a.created.is_empty(),
            "round {round}: some writes were acknowledged"
        );
        for name in &a.created {
            assert!(
                present.contains(name),
                "round {round}: acknowledged {name} lost"
            );
        }
        let counter: u64 = api.get("counter").await.unwrap().data.unwrap()["v"]
            .parse()
            .unwrap();
        assert!(
            counter >= a.counter,
            "round {round}: counter went back from {} to {counter}",
            a.counter
        );
        let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
        assert!(
            list_rv >= a.max_rv,
            "round {round}: revision went backwards"
        );
        let fresh = api
            .create(&PostParams::default(), &cm(&format!("after-{round}"), 0))
            .await
            .unwrap();
        let rv: u64 = fresh.resource_version().unwrap().parse().unwrap();
        assert!(
            rv > a.max_rv,
            "round {round}: new revision {rv} <= {}",
            a.max_rv
        );
    }
}
