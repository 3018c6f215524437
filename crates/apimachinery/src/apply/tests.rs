//! Server-side apply and `Update` bookkeeping, end to end.

use serde_json::{Value, json};

use super::fieldset::{FieldSet, path_string};
use super::*;
use crate::patch::ListStrategy;

fn opts<'a>(manager: &'a str, force: bool, now: &'a str) -> ApplyOptions<'a> {
    ApplyOptions {
        manager,
        force,
        now,
        api_version: "v1",
        subresource: None,
    }
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "d", "labels": {"app": "x"}}, "data": data})
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Stand-in for what the server adds on create.
fn stored(mut v: Value) -> Value {
    v["metadata"]["uid"] = json!("u1");
    v["metadata"]["resourceVersion"] = json!("1");
    v["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    v
}

#[test]
fn create_records_apply_entry() {
    let out = apply(None, &cm(json!({"a": "1"})), &opts("kubectl", false, "T1")).unwrap();
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(
        entries(&out),
        vec![json!({
            "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "T1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
        })]
    );
}

#[test]
fn reapply_is_a_noop() {
    let live = stored(apply(None, &cm(json!({"a": "1"})), &opts("kubectl", false, "T1")).unwrap());
    let again = apply(
        Some(&live),
        &cm(json!({"a": "1"})),
        &opts("kubectl", false, "T2"),
    )
    .unwrap();
    assert_eq!(
        again, live,
        "unchanged apply must return the live object unchanged"
    );
}

#[test]
fn dropped_fields_are_removed() {
    let live = stored(
        apply(
            None,
            &cm(json!({"a": "1", "b": "2"})),
            &opts("kubectl", false, "T1"),
        )
        .unwrap(),
    );
    let mut cfg = cm(json!({"b": "3"}));
    cfg["metadata"].as_object_mut().unwrap().remove("labels");
    let out = apply(Some(&live), &cfg, &opts("kubectl", false, "T2")).unwrap();
    assert_eq!(out["data"], json!({"b": "3"}));
    assert!(out["metadata"].get("labels").is_none(), "{out}");
    assert_eq!(out["metadata"]["uid"], "u1");
    assert_eq!(entries(&out)[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    assert_eq!(entries(&out)[0]["time"], "T2");
}

#[test]
fn conflicts_and_force() {
    let live = stored(
        apply(
            None,
            &cm(json!({"a": "1", "b": "2"})),
            &opts("alice", false, "T1"),
        )
        .unwrap(),
    );
    // Same value: shared ownership, no conflict.
    let shared = apply(
        Some(&live),
        &cm(json!({"a": "1"})),
        &opts("bob", false, "T2"),
    )
    .unwrap();
    assert_eq!(entries(&shared).len(), 2);
    // Different value: conflict naming the owner and the field.
    let errs = apply(
        Some(&live),
        &cm(json!({"a": "9", "b": "8"})),
        &opts("bob", false, "T2"),
    )
    .unwrap_err();
    assert_eq!(
        errs,
        vec![
            Conflict {
                manager: "alice".into(),
                field: ".data.a".into()
            },
            Conflict {
                manager: "alice".into(),
                field: ".data.b".into()
            },
        ]
    );
    assert_eq!(errs[0].to_string(), "conflict with \"alice\": .data.a");
    // Force takes ownership.
    let forced = apply(
        Some(&live),
        &cm(json!({"a": "9"})),
        &opts("bob", true, "T2"),
    )
    .unwrap();
    assert_eq!(forced["data"], json!({"a": "9", "b": "2"}));
    let es = entries(&forced);
    let alice = es.iter().find(|e| e["manager"] == "alice").unwrap();
    let bob = es.iter().find(|e| e["manager"] == "bob").unwrap();
    assert_eq!(alice["fieldsV1"]["f:data"], json!({"f:b": {}}));
    assert_eq!(bob["fieldsV1"]["f:data"], json!({"f:a": {}}));
    // Alice now conflicts with bob over .data.a.
    let errs = apply(
        Some(&forced),
        &cm(json!({"a": "1", "b": "2"})),
        &opts("alice", false, "T3"),
    )
    .unwrap_err();
    assert_eq!(
        errs,
        vec![Conflict {
            manager: "bob".into(),
            field: ".data.a".into()
        }]
    );
}

#[test]
fn shared_field_survives_when_one_owner_drops_it() {
    let live = stored(apply(None, &cm(json!({"a": "1"})), &opts("alice", false, "T1")).unwrap());
    let live = apply(
        Some(&live),
        &cm(json!({"a": "1"})),
        &opts("bob", false, "T2"),
    )
    .unwrap();
    let out = apply(Some(&live), &cm(json!({})), &opts("alice", false, "T3")).unwrap();
    assert_eq!(out["data"], json!({"a": "1"}));
    let out = apply(Some(&out), &cm(json!({})), &opts("bob", false, "T4")).unwrap();
    assert_eq!(out["data"], json!({}));
}

#[test]
fn record_update_then_apply_conflicts() {
    let mut created = stored(cm(json!({"a": "1"})));
    record_update(None, &mut created, "kubectl-create", "T1", "v1", None);
    let es = entries(&created);
    assert_eq!(es.len(), 1);
    assert_eq!(es[0]["operation"], "Update");
    assert_eq!(es[0]["manager"], "kubectl-create");
    assert_eq!(
        es[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert!(es[0].get("subresource").is_none());

    let errs = apply(
        Some(&created),
        &cm(json!({"a": "2"})),
        &opts("kubectl", false, "T2"),
    )
    .unwrap_err();
    assert!(
        errs.contains(&Conflict {
            manager: "kubectl-create".into(),
            field: ".data.a".into()
        }),
        "{errs:?}"
    );

    // An update that changes a field moves it to the updater; removing a
    // field drops it from every set.
    let mut updated = created.clone();
    updated["data"] = json!({"b": "2"});
    record_update(Some(&created), &mut updated, "editor", "T3", "v1", None);
    let es = entries(&updated);
    let creator = es
        .iter()
        .find(|e| e["manager"] == "kubectl-create")
        .unwrap();
    let editor = es.iter().find(|e| e["manager"] == "editor").unwrap();
    assert_eq!(
        creator["fieldsV1"],
        json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert_eq!(editor["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    assert_eq!(editor["time"], "T3");

    // A no-op update leaves managedFields alone.
    let mut same = updated.clone();
    record_update(Some(&updated), &mut same, "other", "T4", "v1", None);
    assert_eq!(same, updated);

    // Status writes are recorded against the subresource.
    let mut st = updated.clone();
    st["status"] = json!({"phase": "x"});
    record_update(Some(&updated), &mut st, "ctl", "T5", "v1", Some("status"));
    let e = entries(&st)
        .into_iter()
        .find(|e| e["manager"] == "ctl")
        .unwrap();
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {".": {}, "f:phase": {}}}));
}

#[test]
fn record_update_honours_client_managed_fields() {
    let mut created = stored(cm(json!({"a": "1"})));
    record_update(None, &mut created, "m", "T1", "v1", None);
    let mut cleared = created.clone();
    cleared["metadata"]["managedFields"] = json!([]);
    record_update(Some(&created), &mut cleared, "m", "T2", "v1", None);
    assert!(cleared["metadata"].get("managedFields").is_none());
    let mut omitted = created.clone();
    omitted["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    record_update(Some(&created), &mut omitted, "m", "T2", "v1", None);
    assert_eq!(omitted, created);
}

#[test]
fn apply_entry_ordering_and_update_entries_coexist() {
    let mut live = stored(cm(json!({"a": "1"})));
    record_update(
        None,
        &mut live,
        "creator",
        "2024-01-01T00:00:00Z",
        "v1",
        None,
    );
    let out = apply(
        Some(&live),
        &cm(json!({"b": "2"})),
        &opts("kubectl", false, "2024-01-02T00:00:00Z"),
    )
    .unwrap();
    let ops: Vec<_> = entries(&out)
        .iter()
        .map(|e| e["operation"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, ["Apply", "Update"]);
    assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
}

#[test]
fn owner_references_merge_by_uid_and_finalizers_as_set() {
    let cfg = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
        "ownerReferences": [{"uid": "1", "name": "o", "kind": "K", "apiVersion": "v1"}],
        "finalizers": ["a/b"]}});
    let out = apply(None, &cfg, &opts("m", false, "T")).unwrap();
    assert_eq!(
        entries(&out)[0]["fieldsV1"],
        json!({"f:metadata": {
            "f:finalizers": {"v:\"a/b\"": {}},
            "f:ownerReferences": {"k:{\"uid\":\"1\"}": {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}}
        }})
    );
    let mut live = stored(out);
    live["metadata"]["finalizers"] = json!(["a/b", "other"]);
    let out = apply(
        Some(&live),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        &opts("m", false, "T2"),
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["other"]));
    assert!(out["metadata"].get("ownerReferences").is_none());
    assert!(out["metadata"].get("managedFields").is_none());
}

#[test]
fn schema_driven_lists() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "disks": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"tags": {"type": "array", "x-kubernetes-list-type": "set"}}}},
        "plain": {"type": "array"}
    }}}});
    assert_eq!(
        schema_list_strategy(&schema, "spec.disks"),
        Some(ListStrategy::MergeByKey("name".into()))
    );
    assert_eq!(
        schema_list_strategy(&schema, "spec.disks.tags"),
        Some(ListStrategy::SetMerge)
    );
    assert_eq!(schema_list_strategy(&schema, "spec.plain"), None);
    assert_eq!(schema_list_strategy(&schema, "spec.nope"), None);
    let strat = |p: &str| schema_list_strategy(&schema, p);
    let obj = |disks: Value| json!({"apiVersion": "x/v1", "kind": "H", "metadata": {"name": "h"}, "spec": {"disks": disks}});
    let live = apply_with(
        None,
        &obj(json!([{"name": "a", "size": 1}])),
        &opts("alice", false, "T1"),
        &strat,
    )
    .unwrap();
    let live = apply_with(
        Some(&live),
        &obj(json!([{"name": "b", "size": 2}])),
        &opts("bob", false, "T2"),
        &strat,
    )
    .unwrap();
    assert_eq!(
        live["spec"]["disks"],
        json!([{"name": "a", "size": 1}, {"name": "b", "size": 2}])
    );
    let errs = apply_with(
        Some(&live),
        &obj(json!([{"name": "a", "size": 5}])),
        &opts("bob", false, "T3"),
        &strat,
    )
    .unwrap_err();
    assert_eq!(
        errs,
        vec![Conflict {
            manager: "alice".into(),
            field: ".spec.disks[name=\"a\"].size".into()
        }]
    );
    // Alice dropping her item removes it; bob's stays.
    let out = apply_with(
        Some(&live),
        &obj(json!([])),
        &opts("alice", false, "T4"),
        &strat,
    )
    .unwrap();
    assert_eq!(out["spec"]["disks"], json!([{"name": "b", "size": 2}]));
}

#[test]
fn keyed_list_merge_order() {
    let strat = |p: &str| (p == "spec.l").then(|| ListStrategy::MergeByKey("n".into()));
    let obj = |l: Value| json!({"apiVersion": "x/v1", "kind": "H", "metadata": {"name": "h"}, "spec": {"l": l}});
    let live = obj(json!([{"n": "a"}, {"n": "x"}, {"n": "b"}, {"n": "y"}]));
    let out = apply_with(
        Some(&live),
        &obj(json!([{"n": "b", "v": 1}, {"n": "a"}, {"n": "c"}])),
        &opts("m", false, "T"),
        &strat,
    )
    .unwrap();
    let names: Vec<&str> = out["spec"]["l"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["n"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b", "a", "x", "y", "c"]);
    assert_eq!(out["spec"]["l"][0], json!({"n": "b", "v": 1}));
}

#[test]
fn multi_key_lists_from_schema() {
    let schema = json!({"properties": {"spec": {"properties": {"ports": {"type": "array",
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"]}}}}});
    assert_eq!(
        schema_list_strategy(&schema, "spec.ports"),
        Some(ListStrategy::MergeByKey("port,protocol".into()))
    );
    let strat = |p: &str| schema_list_strategy(&schema, p);
    let obj = |l: Value| json!({"apiVersion": "x/v1", "kind": "S", "metadata": {"name": "s"}, "spec": {"ports": l}});
    let live = apply_with(
        None,
        &obj(json!([{"port": 80, "protocol": "TCP", "n": "a"}])),
        &opts("alice", false, "T1"),
        &strat,
    )
    .unwrap();
    assert_eq!(
        entries(&live)[0]["fieldsV1"]["f:spec"]["f:ports"],
        json!({"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:n": {}, "f:port": {}, "f:protocol": {}}})
    );
    let out = apply_with(
        Some(&live),
        &obj(json!([{"port": 80, "protocol": "UDP", "n": "b"}])),
        &opts("bob", false, "T2"),
        &strat,
    )
    .unwrap();
    assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
    let errs = apply_with(
        Some(&out),
        &obj(json!([{"port": 80, "protocol": "TCP", "n": "z"}])),
        &opts("bob", false, "T3"),
        &strat,
    )
    .unwrap_err();
    assert_eq!(errs[0].field, ".spec.ports[port=80,protocol=\"TCP\"].n");
}

#[test]
fn atomic_lists_replace_and_conflict_whole() {
    let obj = |v: Value| json!({"apiVersion": "x/v1", "kind": "H", "metadata": {"name": "h"}, "spec": {"l": v}});
    let live = apply(None, &obj(json!([1, 2])), &opts("alice", false, "T1")).unwrap();
    assert_eq!(
        entries(&live)[0]["fieldsV1"],
        json!({"f:spec": {"f:l": {}}})
    );
    let errs = apply(Some(&live), &obj(json!([3])), &opts("bob", false, "T2")).unwrap_err();
    assert_eq!(
        errs,
        vec![Conflict {
            manager: "alice".into(),
            field: ".spec.l".into()
        }]
    );
    let out = apply(Some(&live), &obj(json!([3])), &opts("alice", false, "T2")).unwrap();
    assert_eq!(out["spec"]["l"], json!([3]));
}

#[test]
fn fields_v1_round_trip() {
    let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {".": {}, "f:x": {}},
        "f:list": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}, "v:\"x\"": {}, "i:0": {}}});
    assert_eq!(FieldSet::from_fields_v1(&v).to_fields_v1(), v);
    assert_eq!(
        path_string(&[
            "f:spec".into(),
            "k:{\"name\":\"a\",\"port\":80}".into(),
            "v:\"x\"".into(),
            "i:2".into()
        ]),
        ".spec[name=\"a\",port=80][=\"x\"][2]"
    );
}

#[test]
fn update_takes_ownership_from_applier() {
    let live = stored(
        apply(
            None,
            &cm(json!({"a": "1", "b": "1"})),
            &opts("alice", false, "T1"),
        )
        .unwrap(),
    );
    let mut edited = live.clone();
    edited["data"]["a"] = json!("2");
    record_update(Some(&live), &mut edited, "bob", "T2", "v1", None);
    let es = entries(&edited);
    let alice = es.iter().find(|e| e["manager"] == "alice").unwrap();
    assert_eq!(alice["fieldsV1"]["f:data"], json!({"f:b": {}}));
    assert_eq!(alice["time"], "T1", "untouched entries keep their time");
    // Re-applying the old value now conflicts with the updater.
    let errs = apply(
        Some(&edited),
        &cm(json!({"a": "1", "b": "1"})),
        &opts("alice", false, "T3"),
    )
    .unwrap_err();
    assert_eq!(
        errs,
        vec![Conflict {
            manager: "bob".into(),
            field: ".data.a".into()
        }]
    );
    // Dropping a field alice no longer owns leaves it alone.
    let out = apply(
        Some(&edited),
        &cm(json!({"b": "1"})),
        &opts("alice", false, "T3"),
    )
    .unwrap();
    assert_eq!(out["data"], json!({"a": "2", "b": "1"}));
}

#[test]
fn applied_managed_fields_and_nulls_are_ignored() {
    let mut cfg = cm(json!({"a": "1", "gone": null}));
    cfg["metadata"]["managedFields"] =
        json!([{"manager": "evil", "operation": "Apply", "fieldsV1": {"f:data": {}}}]);
    let out = apply(None, &cfg, &opts("m", false, "T")).unwrap();
    let es = entries(&out);
    assert_eq!(es.len(), 1);
    assert_eq!(es[0]["manager"], "m");
    assert_eq!(out["data"], json!({"a": "1"}));
}

#[test]
fn apply_at_new_version_replaces_the_entry() {
    let live = stored(apply(None, &cm(json!({"a": "1"})), &opts("m", false, "T1")).unwrap());
    let o = ApplyOptions {
        api_version: "v2",
        ..opts("m", false, "T2")
    };
    let out = apply(Some(&live), &cm(json!({"a": "1"})), &o).unwrap();
    let es = entries(&out);
    assert_eq!(es.len(), 1);
    assert_eq!(es[0]["apiVersion"], "v2");
    assert_eq!(es[0]["time"], "T2");
}

#[test]
fn garbage_does_not_panic() {
    let garbage = [
        json!(null),
        json!("s"),
        json!([1, {"a": 2}]),
        json!({"metadata": "x"}),
        json!({"metadata": {"managedFields": [1, {"operation": "Apply", "fieldsV1": "x"}, {"manager": "m", "operation": "Update", "fieldsV1": {"f:a": 3}}]}}),
    ];
    for live in &garbage {
        for applied in &garbage {
            let _ = apply(Some(live), applied, &opts("m", false, "T"));
            let _ = apply(None, applied, &opts("m", true, "T"));
            let mut n = applied.clone();
            record_update(Some(live), &mut n, "m", "T", "v1", None);
            let mut n = applied.clone();
            record_update(None, &mut n, "m", "T", "v1", Some("status"));
        }
    }
}

#[test]
fn update_managers_are_capped_into_ancient_changes() {
    let mut live = cm(json!({}));
    for i in 0..50 {
        let mut next = live.clone();
        next["data"][format!("k{i:02}")] = json!("v");
        // Distinct seconds, so age (not name) picks the merged ones.
        let now = format!("2024-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
        record_update(
            Some(&live),
            &mut next,
            &format!("m{i:02}"),
            &now,
            "v1",
            None,
        );
        live = next;
        let updates = entries(&live)
            .into_iter()
            .filter(|e| e["operation"] == "Update")
            .count();
        assert!(updates <= 10, "after {i}: {updates}");
    }
    let all = entries(&live);
    let managers: Vec<&str> = all.iter().map(|e| e["manager"].as_str().unwrap()).collect();
    assert_eq!(all.len(), 10);
    // Nine newest updaters, and one entry holding everything older.
    let mut want = vec!["ancient-changes".to_string()];
    want.extend((41..50).map(|i| format!("m{i}")));
    let mut got: Vec<String> = managers.iter().map(|m| m.to_string()).collect();
    got.sort();
    assert_eq!(got, want);
    let ancient = all
        .iter()
        .find(|e| e["manager"] == "ancient-changes")
        .unwrap();
    let owned = ancient["fieldsV1"]["f:data"].as_object().unwrap();
    assert_eq!(owned.len(), 41);
    assert_eq!(ancient["time"], "2024-01-01T00:00:40Z");
    assert_eq!(live["data"].as_object().unwrap().len(), 50);

    // Its fields are still owned: an apply conflicts with it, unless forced.
    let applied = cm(json!({"k00": "w"}));
    let errs = apply(Some(&live), &applied, &opts("applier", false, "T9")).unwrap_err();
    assert_eq!(errs[0].manager, "ancient-changes");
    let out = apply(Some(&live), &applied, &opts("applier", true, "T9")).unwrap();
    assert_eq!(out["data"]["k00"], "w");
    let e = entries(&out);
    assert!(
        e.iter()
            .any(|e| e["manager"] == "applier" && e["operation"] == "Apply")
    );
    assert_eq!(e.iter().filter(|e| e["operation"] == "Update").count(), 10);

    // One more updater merges into the same bucket, not a second one.
    let mut next = out.clone();
    next["data"]["new"] = json!("v");
    record_update(
        Some(&out),
        &mut next,
        "late",
        "2024-01-02T00:00:00Z",
        "v1",
        None,
    );
    let e = entries(&next);
    assert_eq!(
        e.iter()
            .filter(|e| e["manager"] == "ancient-changes")
            .count(),
        1
    );
    assert_eq!(e.iter().filter(|e| e["operation"] == "Update").count(), 10);
}
