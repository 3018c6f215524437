//! Volatile resources (Events): never in the file, bounded by count and age, their own watch
//! history, and revisions that never come back after a restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

fn event(ns: &str, name: &str) -> Op {
    Op::Put {
        resource: "events".into(),
        namespace: ns.into(),
        name: name.into(),
        value: json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns}, "reason": "Test"}),
    }
}

fn configmap(name: &str) -> Op {
    Op::Put {
        resource: "configmaps".into(),
        namespace: "default".into(),
        name: name.into(),
        value: json!({"metadata": {"name": name, "namespace": "default"}}),
    }
}

fn config(per_namespace: usize, total: usize, ttl: Duration, history: usize) -> StoreConfig {
    StoreConfig {
        history: HistoryLimits::events(1000),
        volatile: Volatile {
            resources: vec!["events".into()],
            per_namespace,
            total,
            ttl,
            history: HistoryLimits::events(history),
        },
    }
}

const HOUR: Duration = Duration::from_secs(3600);

async fn write(store: &Store, ops: Vec<Op>) -> Vec<Arc<Stored>> {
    store
        .write(|_| Ok::<_, StoreError>((ops, ())))
        .await
        .unwrap()
        .0
}

fn names(store: &Store, ns: Option<&str>) -> Vec<String> {
    store.read(|s| {
        s.list("events", ns, None)
            .map(|o| o.value()["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    })
}

#[tokio::test]
async fn a_namespace_keeps_its_newest_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), config(3, 100, HOUR, 1000)).unwrap();
    let start = store.revision();
    for i in 1..=5 {
        write(&store, vec![event("a", &format!("e{i}"))]).await;
    }
    write(&store, vec![event("b", "other")]).await;
    assert_eq!(names(&store, Some("a")), ["e3", "e4", "e5"]);
    assert_eq!(names(&store, Some("b")), ["other"]);
    assert_eq!(store.volatile_count("a"), (4, 3));
    // Watchers see the evicted ones go, each with its own revision.
    let (changes, _) = store.events_since("events", start).unwrap();
    let deleted: Vec<(&str, u64)> = changes
        .iter()
        .filter(|e| e.kind == EventType::Deleted)
        .map(|e| (e.name.as_str(), e.obj.rev))
        .collect();
    assert_eq!(deleted.len(), 2);
    assert_eq!(deleted[0].0, "e1");
    assert_eq!(deleted[1].0, "e2");
    assert!(deleted[0].1 > start && deleted[1].1 > deleted[0].1);
}

#[tokio::test]
async fn the_total_bound_evicts_the_oldest_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), config(10, 4, HOUR, 1000)).unwrap();
    write(&store, vec![event("a", "a1"), event("a", "a2")]).await;
    write(&store, vec![event("b", "b1")]).await;
    write(
        &store,
        vec![event("a", "a3"), event("b", "b2"), event("b", "b3")],
    )
    .await;
    assert_eq!(names(&store, None), ["a3", "b1", "b2", "b3"]);
    assert_eq!(store.volatile_count("b").0, 4);
}

#[tokio::test]
async fn a_rewritten_event_is_the_newest() {
    // A series update (count + 1) is a write: the Event moves to the end of the order.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), config(3, 100, HOUR, 1000)).unwrap();
    for name in ["e1", "e2", "e3"] {
        write(&store, vec![event("a", name)]).await;
    }
    write(&store, vec![event("a", "e1")]).await;
    write(&store, vec![event("a", "e4")]).await;
    assert_eq!(names(&store, Some("a")), ["e1", "e3", "e4"]);
    // Deleting one makes room without evicting another.
    write(
        &store,
        vec![Op::Delete {
            resource: "events".into(),
            namespace: "a".into(),
            name: "e3".into(),
        }],
    )
    .await;
    write(&store, vec![event("a", "e5")]).await;
    assert_eq!(names(&store, Some("a")), ["e1", "e4", "e5"]);
}

#[tokio::test]
async fn events_expire_a_ttl_after_their_last_write() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_secs(60);
    let store = Store::open(&dir.path().join("db"), config(100, 100, ttl, 1000)).unwrap();
    write(&store, vec![event("a", "old"), configmap("kept")]).await;
    let between = Instant::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(&store, vec![event("a", "new")]).await;
    assert_eq!(store.expire(Instant::now()).await.unwrap(), 0);
    assert_eq!(store.expire(between + ttl).await.unwrap(), 1);
    assert_eq!(names(&store, Some("a")), ["new"]);
    assert_eq!(store.expire(Instant::now() + ttl).await.unwrap(), 1);
    assert!(names(&store, None).is_empty());
    assert!(
        store.get("configmaps", "default", "kept").is_some(),
        "only volatile objects expire"
    );
}

#[tokio::test]
async fn the_server_expires_events_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_millis(300);
    let store = Store::open(&dir.path().join("db"), config(100, 100, ttl, 1000)).unwrap();
    write(&store, vec![event("a", "short-lived")]).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !names(&store, None).is_empty() {
        assert!(Instant::now() < deadline, "never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_watch_from_an_evicted_version_is_gone_and_objects_are_not_disturbed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), config(5, 100, HOUR, 16)).unwrap();
    let before = write(&store, vec![configmap("cm")]).await[0].rev;
    let first = write(&store, vec![event("a", "e0")]).await[0].rev;
    for i in 1..40 {
        write(&store, vec![event("a", &format!("e{i}"))]).await;
    }
    // The first Event and the history of its time are gone: 410, and the client relists.
    assert!(store.get("events", "a", "e0").is_none());
    let gone = store.events_since("events", first).unwrap_err();
    assert!(gone.oldest > first);
    let (recent, upto) = store.events_since("events", gone.oldest).unwrap();
    assert!(!recent.is_empty());
    assert_eq!(upto, store.revision());
    // Forty Events and their evictions did not push the ConfigMap's change out.
    let (changes, _) = store.events_since("configmaps", before - 1).unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].name, "cm");
}

#[tokio::test]
async fn a_restart_loses_events_and_no_revision_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut last_event = 0;
    {
        let store = Store::open(&path, config(100_000, 100_000, HOUR, 1000)).unwrap();
        write(&store, vec![configmap("kept")]).await;
        // More than one reservation's worth, and no durable write after them.
        for i in 0..1500 {
            last_event = write(&store, vec![event("a", &format!("e{i}"))]).await[0].rev;
        }
        // Dropped without close, as after kill -9: only what is in the file counts.
    }
    let report = check(&path).unwrap();
    assert_eq!(report.objects, 1, "no Event in the file");
    let store = Store::open(&path, config(100_000, 100_000, HOUR, 1000)).unwrap();
    assert!(store.get("configmaps", "default", "kept").is_some());
    assert!(names(&store, None).is_empty());
    assert!(
        store.revision() >= last_event,
        "revision {} < {last_event}",
        store.revision()
    );
    // A watch from an Event version of before the restart relists.
    assert!(store.events_since("events", last_event - 1).is_err());
    let next = write(&store, vec![event("a", "after")]).await[0].rev;
    assert!(next > last_event);
}

#[tokio::test]
async fn events_stored_by_an_earlier_version_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        // Earlier versions kept Events durable like everything else.
        let store = Store::open(&path, HistoryLimits::events(100)).unwrap();
        write(&store, vec![event("a", "e1"), configmap("kept")]).await;
        store.close().await;
    }
    assert_eq!(check(&path).unwrap().objects, 2);
    {
        let store = Store::open(&path, config(10, 10, HOUR, 100)).unwrap();
        assert!(names(&store, None).is_empty());
        assert!(store.get("configmaps", "default", "kept").is_some());
        store.close().await;
    }
    let report = check(&path).unwrap();
    assert_eq!(report.objects, 1);
}
