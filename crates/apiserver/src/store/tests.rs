//! The store end to end: durability across reopen, bounded history, listing, group commit.

use std::sync::Arc;

use serde_json::json;

use super::*;

fn put(name: &str, v: i64) -> Op {
    Op::Put {
        resource: "configmaps".into(),
        namespace: "default".into(),
        name: name.into(),
        value: json!({"metadata": {"name": name}, "data": {"v": v.to_string()}}),
    }
}

async fn write(store: &Store, ops: Vec<Op>) -> Vec<Arc<Stored>> {
    store
        .write(|_| Ok::<_, StoreError>((ops, ())))
        .await
        .unwrap()
        .0
}

#[tokio::test]
async fn revisions_persist_and_never_go_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let store = Store::open(&path, HistoryLimits::events(100)).unwrap();
        let out = write(&store, vec![put("a", 1), put("b", 2)]).await;
        assert_eq!(out[0].rev, 1);
        assert_eq!(out[1].rev, 2);
        write(
            &store,
            vec![Op::Delete {
                resource: "configmaps".into(),
                namespace: "default".into(),
                name: "a".into(),
            }],
        )
        .await;
        assert_eq!(store.revision(), 3);
    }
    let store = Store::open(&path, HistoryLimits::events(100)).unwrap();
    assert_eq!(store.revision(), 3);
    assert!(store.get("configmaps", "default", "a").is_none());
    let b = store.get("configmaps", "default", "b").unwrap();
    assert_eq!(b.rev, 2);
    assert_eq!(b.value()["metadata"]["resourceVersion"], "2");
    // History starts empty after a reopen: older revisions are gone, the current one is not.
    assert!(store.events_since("configmaps", 2).is_err());
    assert!(store.events_since("configmaps", 3).unwrap().0.is_empty());
    let out = write(&store, vec![put("c", 3)]).await;
    assert_eq!(out[0].rev, 4);
}

#[tokio::test]
async fn history_is_bounded_and_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), HistoryLimits::events(16)).unwrap();
    for i in 0..40 {
        write(&store, vec![put(&format!("o{i}"), i)]).await;
    }
    assert!(store.events_since("configmaps", 10).is_err());
    let (ev, rev) = store.events_since("configmaps", 30).unwrap();
    assert_eq!(rev, 40);
    assert_eq!(ev.len(), 10);
    assert_eq!(ev[0].obj.rev, 31);
    assert!(store.events_since("secrets", 30).unwrap().0.is_empty());
    store.compact(35);
    assert!(store.events_since("configmaps", 30).is_err());
    assert_eq!(store.events_since("configmaps", 35).unwrap().0.len(), 5);
}

#[tokio::test]
async fn list_by_namespace_and_continue() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), HistoryLimits::events(16)).unwrap();
    let mk = |ns: &str, n: &str| Op::Put {
        resource: "configmaps".into(),
        namespace: ns.into(),
        name: n.into(),
        value: json!({"metadata": {"name": n, "namespace": ns}}),
    };
    write(
        &store,
        vec![mk("a", "1"), mk("b", "1"), mk("b", "2"), mk("c", "1")],
    )
    .await;
    let names = |ns: Option<&str>, after: Option<(&str, &str)>| {
        store.read(|s| {
            s.list("configmaps", ns, after)
                .map(|o| o.meta()["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(names(Some("b"), None), ["1", "2"]);
    assert_eq!(names(Some("b"), Some(("b", "1"))), ["2"]);
    assert_eq!(names(None, Some(("b", "1"))), ["2", "1"]);
    assert_eq!(names(None, None).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_see_queued_writes() {
    // Each writer increments a counter it reads from the view: with group commit the
    // later writers must see the earlier, not yet durable, increments.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), HistoryLimits::events(1000)).unwrap();
    write(&store, vec![put("counter", 0)]).await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .write(|v| {
                    let cur: i64 = v
                        .get("configmaps", "default", "counter")
                        .and_then(|o| o.value()["data"]["v"].as_str()?.parse().ok())
                        .unwrap();
                    Ok::<_, StoreError>((vec![put("counter", cur + 1)], ()))
                })
                .await
                .unwrap()
        }));
    }
    let mut revs = Vec::new();
    for t in tasks {
        revs.push(t.await.unwrap().0[0].rev);
    }
    revs.sort();
    revs.dedup();
    assert_eq!(revs.len(), 50, "every write got its own revision");
    let c = store.get("configmaps", "default", "counter").unwrap();
    assert_eq!(c.value()["data"]["v"], "50");
    assert_eq!(store.revision(), 51);
    let (events, _) = store.events_since("configmaps", 1).unwrap();
    assert_eq!(events.len(), 50);
    assert!(events.windows(2).all(|w| w[0].obj.rev < w[1].obj.rev));
}

/// A writer that takes long to decide (CEL over a large object) holds the writer lock only:
/// the batch committed before it is still published, and readers and watchers see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_writer_does_not_stall_readers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), HistoryLimits::events(1000)).unwrap();
    write(&store, vec![put("before", 0)]).await;
    let mut revs = store.subscribe();
    // Queue a write, then a slow decision right behind it.
    let (queued_tx, queued_rx) = std::sync::mpsc::channel::<()>();
    let first = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .write(move |_| {
                    queued_tx.send(()).unwrap();
                    Ok::<_, StoreError>((vec![put("first", 1)], ()))
                })
                .await
                .unwrap()
        }
    });
    // Its decision is queued before the writer lock is free for the slow one.
    tokio::task::spawn_blocking(move || queued_rx.recv().unwrap())
        .await
        .unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let slow = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .write(move |v| {
                    let _ = v.get("configmaps", "default", "before");
                    entered_tx.send(()).unwrap();
                    // Blocks this worker thread, as a long computation would.
                    release_rx.recv().unwrap();
                    Ok::<_, StoreError>((vec![put("slow", 2)], ()))
                })
                .await
                .unwrap()
        }
    });
    tokio::task::spawn_blocking(move || entered_rx.recv().unwrap())
        .await
        .unwrap();
    // While the slow writer decides: the first write completes and is visible.
    let done = tokio::time::timeout(std::time::Duration::from_secs(30), first).await;
    assert!(done.is_ok(), "the write before the slow one was held up");
    assert!(store.get("configmaps", "default", "first").is_some());
    assert!(store.get("configmaps", "default", "before").is_some());
    let moved = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while store.get("configmaps", "default", "first").is_none() {
            revs.changed().await.unwrap();
        }
    })
    .await;
    assert!(moved.is_ok());
    release_tx.send(()).unwrap();
    slow.await.unwrap();
    assert!(store.get("configmaps", "default", "slow").is_some());
}
