//! Merge, JSON and strategic merge patches, directives and errors.

use serde_json::{Value, json};

use super::*;

#[test]
fn merge_patch_rfc7386_examples() {
    // The RFC 7386 appendix test cases.
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (
            json!({"a": "b"}),
            json!({"b": "c"}),
            json!({"a": "b", "b": "c"}),
        ),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (
            json!({"a": "b", "b": "c"}),
            json!({"a": null}),
            json!({"b": "c"}),
        ),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (
            json!({"a": [{"b": "c"}]}),
            json!({"a": [1]}),
            json!({"a": [1]}),
        ),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a": "b"}), json!(["c"]), json!(["c"])),
        (json!({"a": "foo"}), json!(null), json!(null)),
        (json!({"a": "foo"}), json!("bar"), json!("bar")),
        (
            json!({"e": null}),
            json!({"a": 1}),
            json!({"e": null, "a": 1}),
        ),
        (
            json!([1, 2]),
            json!({"a": "b", "c": null}),
            json!({"a": "b"}),
        ),
        (
            json!({}),
            json!({"a": {"bb": {"ccc": null}}}),
            json!({"a": {"bb": {}}}),
        ),
    ];
    for (mut target, patch, want) in cases {
        merge_patch(&mut target, &patch);
        assert_eq!(target, want, "patch {patch}");
    }
}

#[test]
fn json_patch_ops_and_atomicity() {
    let mut doc = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"list": [1, 2]}});
    json_patch(
        &mut doc,
        &json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "replace", "path": "/spec/list/0", "value": 9},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "test", "path": "/spec/list/1", "value": 2},
            {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/spec/moved"}
        ]),
    )
    .unwrap();
    assert_eq!(
        doc,
        json!({"metadata": {"labels": {"b": "2"}}, "spec": {"list": [9, 2, 3], "moved": [9, 2, 3]}})
    );
    let before = doc.clone();
    let err = json_patch(
        &mut doc,
        &json!([
            {"op": "add", "path": "/spec/x", "value": 1},
            {"op": "test", "path": "/spec/list/0", "value": 1}
        ]),
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::JsonPatch(_)), "{err}");
    assert_eq!(doc, before, "failed patch must not modify the document");
    let err = json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
    assert!(err.to_string().contains("/nope"), "{err}");
    let err = json_patch(&mut doc, &json!({"op": "add"})).unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)));
    let err = json_patch(&mut doc, &json!([{"op": "frobnicate", "path": "/a"}])).unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)));
}

fn smp(target: Value, patch: Value, kind: &str) -> Result<Value, PatchError> {
    let mut t = target;
    let k = kind.to_string();
    strategic_merge_patch(&mut t, &patch, &|p| builtin_list_strategy(&k, p))?;
    Ok(t)
}

fn pods_strategy(p: &str) -> Option<ListStrategy> {
    match p {
        "spec.containers" => Some(ListStrategy::MergeByKey("name".into())),
        "spec.containers.ports" => Some(ListStrategy::MergeByKey("containerPort".into())),
        "spec.containers.args" => None,
        other => builtin_list_strategy("Pod", other),
    }
}

#[test]
fn smp_maps_and_null() {
    let got = smp(
        json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}}),
        json!({"metadata": {"labels": {"a": null, "c": "3"}}, "data": {"y": "2"}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(
        got,
        json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "data": {"x": "1", "y": "2"}})
    );
}

#[test]
fn smp_merge_by_key_lists() {
    let target = json!({"metadata": {"ownerReferences": [
        {"uid": "1", "name": "a", "kind": "X"},
        {"uid": "2", "name": "b", "kind": "X"}
    ]}});
    let got = smp(
        target.clone(),
        json!({"metadata": {"ownerReferences": [
            {"uid": "2", "name": "b2"},
            {"uid": "3", "name": "c", "kind": "Y"}
        ]}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(
        got["metadata"]["ownerReferences"],
        json!([
            {"uid": "1", "name": "a", "kind": "X"},
            {"uid": "2", "name": "b2", "kind": "X"},
            {"uid": "3", "name": "c", "kind": "Y"}
        ])
    );
    // $patch: delete inside a keyed element removes it.
    let got = smp(
        target.clone(),
        json!({"metadata": {"ownerReferences": [{"uid": "1", "$patch": "delete"}]}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(
        got["metadata"]["ownerReferences"],
        json!([{"uid": "2", "name": "b", "kind": "X"}])
    );
    // A {"$patch": "replace"} element replaces the whole list.
    let got = smp(
        target,
        json!({"metadata": {"ownerReferences": [{"$patch": "replace"}, {"uid": "9", "name": "z"}]}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(
        got["metadata"]["ownerReferences"],
        json!([{"uid": "9", "name": "z"}])
    );
}

#[test]
fn smp_nested_keyed_lists_and_default_replace() {
    let mut t = json!({"spec": {"containers": [
        {"name": "a", "image": "i1", "args": ["x"], "ports": [{"containerPort": 80, "name": "http"}]},
        {"name": "b", "image": "i2"}
    ]}});
    strategic_merge_patch(
        &mut t,
        &json!({"spec": {"containers": [
            {"name": "a", "args": ["y", "z"], "ports": [{"containerPort": 443, "name": "https"}]}
        ]}}),
        &pods_strategy,
    )
    .unwrap();
    assert_eq!(
        t,
        json!({"spec": {"containers": [
            {"name": "a", "image": "i1", "args": ["y", "z"], "ports": [
                {"containerPort": 80, "name": "http"},
                {"containerPort": 443, "name": "https"}
            ]},
            {"name": "b", "image": "i2"}
        ]}})
    );
}

#[test]
fn smp_primitive_set_merge_and_delete_from_primitive_list() {
    let target = json!({"metadata": {"finalizers": ["a", "b"]}});
    let got = smp(
        target.clone(),
        json!({"metadata": {"finalizers": ["b", "c"]}}),
        "Secret",
    )
    .unwrap();
    assert_eq!(got["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let got = smp(
        target,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        "Secret",
    )
    .unwrap();
    assert_eq!(got["metadata"]["finalizers"], json!(["b"]));
    // Lists without a strategy are replaced.
    let got = smp(
        json!({"spec": {"finalizers": ["kubernetes"]}}),
        json!({"spec": {"finalizers": []}}),
        "Namespace",
    )
    .unwrap();
    assert_eq!(got["spec"]["finalizers"], json!([]));
}

#[test]
fn smp_patch_directives_on_maps() {
    let target = json!({"data": {"a": "1", "b": "2"}, "metadata": {"name": "x"}});
    let got = smp(
        target.clone(),
        json!({"data": {"$patch": "replace", "c": "3"}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(got["data"], json!({"c": "3"}));
    let got = smp(
        target.clone(),
        json!({"data": {"$patch": "delete"}}),
        "ConfigMap",
    )
    .unwrap();
    assert!(got.get("data").is_none());
    let got = smp(
        target.clone(),
        json!({"data": {"$patch": "merge", "c": "3"}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(got["data"], json!({"a": "1", "b": "2", "c": "3"}));
    let got = smp(
        target.clone(),
        json!({"$patch": "replace", "kind": "ConfigMap"}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(got, json!({"kind": "ConfigMap"}));
    let err = smp(
        target.clone(),
        json!({"data": {"$patch": "explode"}}),
        "ConfigMap",
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::UnsupportedDirective(_)), "{err}");
    assert!(err.to_string().contains("explode") && err.to_string().contains("data"));
    let err = smp(target, json!({"$frob": 1}), "ConfigMap").unwrap_err();
    assert!(err.to_string().contains("$frob"));
}

#[test]
fn smp_retain_keys() {
    let got = smp(
        json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        "Deployment",
    )
    .unwrap();
    assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));
    let err = smp(json!({}), json!({"$retainKeys": "x"}), "X").unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)));
}

#[test]
fn smp_set_element_order() {
    let target = json!({"metadata": {"ownerReferences": [
        {"uid": "1"}, {"uid": "2"}, {"uid": "3"}
    ], "finalizers": ["a", "b", "c"]}});
    let got = smp(
        target,
        json!({"metadata": {
            "$setElementOrder/ownerReferences": [{"uid": "3"}, {"uid": "1"}],
            "ownerReferences": [{"uid": "3", "name": "three"}],
            "$setElementOrder/finalizers": ["c", "a"]
        }}),
        "ConfigMap",
    )
    .unwrap();
    // Server-only "2" precedes "3" on the server, so it stays before it.
    assert_eq!(
        got["metadata"]["ownerReferences"],
        json!([{"uid": "2"}, {"uid": "3", "name": "three"}, {"uid": "1"}])
    );
    assert_eq!(got["metadata"]["finalizers"], json!(["b", "c", "a"]));
    let got = smp(
        json!({"metadata": {"finalizers": ["a", "b"]}}),
        json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}),
        "ConfigMap",
    )
    .unwrap();
    assert_eq!(got["metadata"]["finalizers"], json!(["b", "a"]));
}

#[test]
fn smp_errors_leave_target_untouched() {
    let target = json!({"metadata": {"ownerReferences": [{"uid": "1"}]}, "a": 1});
    for bad in [
        json!({"a": 2, "metadata": {"ownerReferences": ["nope"]}}),
        json!({"a": 2, "metadata": {"ownerReferences": [{"name": "nokey"}]}}),
        json!({"a": 2, "metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
        json!({"a": 2, "metadata": {"$setElementOrder/finalizers": 1}}),
        json!([1]),
    ] {
        let mut t = target.clone();
        let r = strategic_merge_patch(&mut t, &bad, &|p| builtin_list_strategy("X", p));
        assert!(r.is_err(), "{bad}");
        assert_eq!(t, target, "{bad}");
    }
}

#[test]
fn smp_element_level_replace_and_nested_null() {
    let mut t = json!({"spec": {"containers": [
        {"name": "a", "image": "i1", "env": {"X": "1"}},
        {"name": "b", "image": "i2", "tty": true}
    ]}});
    strategic_merge_patch(
        &mut t,
        &json!({"spec": {"containers": [
            {"name": "a", "$patch": "replace", "image": "new"},
            {"name": "b", "tty": null}
        ]}}),
        &pods_strategy,
    )
    .unwrap();
    assert_eq!(
        t["spec"]["containers"],
        json!([{"name": "a", "image": "new"}, {"name": "b", "image": "i2"}])
    );
}

#[test]
fn smp_garbage_does_not_panic() {
    let inputs = [
        json!(null),
        json!(1),
        json!("s"),
        json!([1, {"$patch": "delete"}]),
        json!({"$patch": 1}),
        json!({"$retainKeys": [1]}),
        json!({"metadata": {"finalizers": [{"a": 1}], "ownerReferences": 7}}),
        json!({"metadata": {"ownerReferences": [{"uid": {"x": 1}, "$patch": "delete"}]}}),
        json!({"metadata": {"$setElementOrder/ownerReferences": [1, "x", null]}}),
    ];
    for target in &inputs {
        for p in &inputs {
            let mut t = target.clone();
            let _ = strategic_merge_patch(&mut t, p, &|path| builtin_list_strategy("X", path));
            let mut t = target.clone();
            merge_patch(&mut t, p);
            let mut t = target.clone();
            let _ = json_patch(&mut t, p);
        }
    }
}

#[test]
fn smp_multi_key_lists() {
    let strat = |p: &str| (p == "ports").then(|| ListStrategy::MergeByKey("port,protocol".into()));
    let mut t = json!({"ports": [{"port": 80, "protocol": "TCP", "n": 1}, {"port": 80, "protocol": "UDP", "n": 2}]});
    strategic_merge_patch(
        &mut t,
        &json!({"ports": [{"port": 80, "protocol": "UDP", "n": 3}, {"port": 443, "protocol": "TCP", "$patch": "delete"}]}),
        &strat,
    )
    .unwrap();
    assert_eq!(
        t["ports"],
        json!([{"port": 80, "protocol": "TCP", "n": 1}, {"port": 80, "protocol": "UDP", "n": 3}])
    );
}

#[test]
fn builtin_strategies() {
    assert_eq!(
        builtin_list_strategy("Secret", "metadata.ownerReferences"),
        Some(ListStrategy::MergeByKey("uid".into()))
    );
    assert_eq!(
        builtin_list_strategy("Lease", "metadata.finalizers"),
        Some(ListStrategy::SetMerge)
    );
    assert_eq!(
        builtin_list_strategy("CustomResourceDefinition", "spec.versions"),
        Some(ListStrategy::MergeByKey("name".into()))
    );
    assert_eq!(builtin_list_strategy("ConfigMap", "data"), None);
    let got = smp(
        json!({"spec": {"versions": [{"name": "v1", "served": true}, {"name": "v2", "served": false}]}}),
        json!({"spec": {"versions": [{"name": "v2", "served": true}]}}),
        "CustomResourceDefinition",
    )
    .unwrap();
    assert_eq!(
        got["spec"]["versions"],
        json!([{"name": "v1", "served": true}, {"name": "v2", "served": true}])
    );
}
