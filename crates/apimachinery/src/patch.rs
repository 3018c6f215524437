//! Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//!
//! Strategic merge patch follows `k8s.io/apimachinery/pkg/util/strategicpatch`:
//! maps merge recursively, `null` deletes, lists merge by key / as sets / are
//! replaced per [`ListStrategy`], and the directives `$patch` (`replace`,
//! `delete`, `merge`), `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>` are honoured.

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed (wrong shape, bad directive value).
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// A JSON patch operation could not be applied (missing path, failed test).
    #[error("json patch failed: {0}")]
    JsonPatch(String),
    /// A `$patch` or other directive the server does not understand.
    #[error("unsupported strategic merge patch directive: {0}")]
    UnsupportedDirective(String),
}

/// How a list at a given path merges in a strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStrategy {
    /// `patchStrategy: merge` with `patchMergeKey`: elements are objects
    /// matched by this key. Several comma-separated keys (a CRD's
    /// `x-kubernetes-list-map-keys`) match on all of them.
    MergeByKey(String),
    /// `patchStrategy: merge` on a list of primitives: set union.
    SetMerge,
    /// The default: the patch's list replaces the original.
    Replace,
}

/// Applies an RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(pm) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(tm) = target else { return };
    for (k, v) in pm {
        if v.is_null() {
            tm.remove(k);
        } else {
            merge_patch(tm.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// Applies an RFC 6902 JSON patch atomically: on error `target` is untouched.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Invalid(format!("not a JSON patch operation list: {e}")))?;
    // Work on a copy so a failing operation never leaves a half-applied document.
    let mut doc = target.clone();
    json_patch::patch_unsafe(&mut doc, &ops.0).map_err(|e| PatchError::JsonPatch(e.to_string()))?;
    *target = doc;
    Ok(())
}

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Applies a Kubernetes strategic merge patch. `merge_keys` maps a dotted
/// field path (list items add no segment, e.g. "spec.containers.ports") to
/// the strategy of the list there; `None` means replace.
pub fn strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    merge_keys: &dyn Fn(&str) -> Option<ListStrategy>,
) -> Result<(), PatchError> {
    let Value::Object(pm) = patch else {
        return Err(PatchError::Invalid(format!(
            "a strategic merge patch must be a JSON object, got {patch}"
        )));
    };
    let orig = match target {
        Value::Object(m) => std::mem::take(m),
        _ => Map::new(),
    };
    let result = match merge_map(orig.clone(), pm, "", merge_keys) {
        Ok(r) => r,
        Err(e) => {
            *target = Value::Object(orig);
            return Err(e);
        }
    };
    *target = Value::Object(result.unwrap_or_default());
    Ok(())
}

fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Merges `patch` into `orig`; `None` means the map itself was deleted.
fn merge_map(
    mut orig: Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
    strat: &dyn Fn(&str) -> Option<ListStrategy>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get(PATCH) {
        None => {}
        Some(Value::String(d)) if d == "replace" => {
            return Ok(Some(strip_directives(patch, path, strat)?));
        }
        Some(Value::String(d)) if d == "delete" => return Ok(None),
        Some(Value::String(d)) if d == "merge" => {}
        Some(other) => {
            return Err(PatchError::UnsupportedDirective(format!(
                "{PATCH}: {other} at {}",
                display_path(path)
            )));
        }
    }
    if let Some(rk) = patch.get(RETAIN_KEYS) {
        let keys = rk.as_array().ok_or_else(|| {
            PatchError::Invalid(format!(
                "{RETAIN_KEYS} at {} must be a list",
                display_path(path)
            ))
        })?;
        let keys: Vec<&str> = keys
            .iter()
            .map(|k| {
                k.as_str().ok_or_else(|| {
                    PatchError::Invalid(format!(
                        "{RETAIN_KEYS} at {} must hold strings, got {k}",
                        display_path(path)
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        orig.retain(|k, _| keys.contains(&k.as_str()));
    }
    let mut orders: Vec<(&str, &Value)> = Vec::new();
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            let vals = v.as_array().ok_or_else(|| {
                PatchError::Invalid(format!("{k} at {} must be a list", display_path(path)))
            })?;
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                list.retain(|item| !vals.contains(item));
            }
        } else if let Some(field) = k.strip_prefix(SET_ORDER) {
            if !v.is_array() {
                return Err(PatchError::Invalid(format!(
                    "{k} at {} must be a list",
                    display_path(path)
                )));
            }
            orders.push((field, v));
        } else if k.starts_with('$') && k != PATCH && k != RETAIN_KEYS {
            // Unknown directives are errors rather than data: silently
            // storing a misspelt directive would corrupt the object.
            return Err(PatchError::UnsupportedDirective(format!(
                "{k} at {}",
                display_path(path)
            )));
        }
    }
    for (k, v) in patch {
        if k.starts_with('$') {
            continue;
        }
        let cpath = child_path(path, k);
        match v {
            Value::Null => {
                orig.remove(k);
            }
            Value::Object(pm) => {
                let base = match orig.remove(k) {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                if let Some(m) = merge_map(base, pm, &cpath, strat)? {
                    orig.insert(k.clone(), Value::Object(m));
                }
            }
            Value::Array(items) => {
                let base = match orig.remove(k) {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                };
                let merged = merge_list(base, items, &cpath, strat)?;
                orig.insert(k.clone(), Value::Array(merged));
            }
            other => {
                orig.insert(k.clone(), other.clone());
            }
        }
    }
    for (field, order) in orders {
        let cpath = child_path(path, field);
        let key = match strat(&cpath) {
            Some(ListStrategy::MergeByKey(k)) => Some(k),
            _ => None,
        };
        if let Some(Value::Array(list)) = orig.get_mut(field) {
            let order = order.as_array().map(Vec::as_slice).unwrap_or_default();
            *list = apply_element_order(std::mem::take(list), order, key.as_deref());
        }
    }
    Ok(Some(orig))
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "the root".to_string()
    } else {
        format!("{path:?}")
    }
}

/// Applies a patch map onto nothing, which drops its directives.
fn strip_directives(
    patch: &Map<String, Value>,
    path: &str,
    strat: &dyn Fn(&str) -> Option<ListStrategy>,
) -> Result<Map<String, Value>, PatchError> {
    let mut p = patch.clone();
    p.remove(PATCH);
    Ok(merge_map(Map::new(), &p, path, strat)?.unwrap_or_default())
}

/// The field names of a merge key: one name, or several comma-separated.
pub fn merge_key_fields(key: &str) -> Vec<&str> {
    key.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect()
}

fn is_directive_element(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.contains_key(PATCH))
}

fn merge_list(
    orig: Vec<Value>,
    patch: &[Value],
    path: &str,
    strat: &dyn Fn(&str) -> Option<ListStrategy>,
) -> Result<Vec<Value>, PatchError> {
    let replace_all = patch
        .iter()
        .any(|v| is_directive_element(v) && v[PATCH] == "replace");
    match strat(path) {
        Some(ListStrategy::MergeByKey(key)) => {
            let mut out = if replace_all { Vec::new() } else { orig };
            for item in patch {
                if is_directive_element(item) {
                    continue;
                }
                let Value::Object(pm) = item else {
                    return Err(PatchError::Invalid(format!(
                        "list {path:?} merges by key {key:?} but the patch element {item} is not an object"
                    )));
                };
                let keys = merge_key_fields(&key);
                if !keys.iter().any(|k| pm.contains_key(*k)) {
                    return Err(PatchError::Invalid(format!(
                        "patch element {item} of list {path:?} lacks the merge key {key:?}"
                    )));
                }
                let same = |o: &Value| keys.iter().all(|k| o.get(*k) == pm.get(*k));
                let pos = out.iter().position(same);
                if pm.get(PATCH).and_then(Value::as_str) == Some("delete") {
                    out.retain(|o| !same(o));
                    continue;
                }
                match pos {
                    Some(i) => {
                        let base = match std::mem::take(&mut out[i]) {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        match merge_map(base, pm, path, strat)? {
                            Some(m) => out[i] = Value::Object(m),
                            None => {
                                out.remove(i);
                            }
                        }
                    }
                    None => {
                        if let Some(m) = merge_map(Map::new(), pm, path, strat)? {
                            out.push(Value::Object(m));
                        }
                    }
                }
            }
            Ok(out)
        }
        Some(ListStrategy::SetMerge) => {
            let mut out = if replace_all { Vec::new() } else { orig };
            for item in patch {
                if is_directive_element(item) {
                    continue;
                }
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Ok(out)
        }
        Some(ListStrategy::Replace) | None => Ok(patch
            .iter()
            .filter(|v| !is_directive_element(v))
            .cloned()
            .collect()),
    }
}

/// Orders `list` as `$setElementOrder` asks: listed elements in that order,
/// server-only elements kept where they were relative to the listed ones
/// (the interleaving rule of strategicpatch's mergeSortedSlice).
fn apply_element_order(list: Vec<Value>, order: &[Value], key: Option<&str>) -> Vec<Value> {
    let keys = key.map(merge_key_fields);
    let ident = |v: &Value| -> Value {
        match &keys {
            Some(ks) => Value::Array(
                ks.iter()
                    .map(|k| v.get(*k).cloned().unwrap_or(Value::Null))
                    .collect(),
            ),
            None => v.clone(),
        }
    };
    let order_ids: Vec<Value> = order.iter().map(ident).collect();
    let server_ids: Vec<Value> = list.iter().map(ident).collect();
    let mut left: Vec<(Value, usize)> = Vec::new();
    let mut right: Vec<(Value, usize)> = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        if order_ids.contains(&server_ids[i]) {
            left.push((item, i));
        } else {
            right.push((item, i));
        }
    }
    left.sort_by_key(|(item, _)| {
        let id = ident(item);
        order_ids
            .iter()
            .position(|o| *o == id)
            .unwrap_or(usize::MAX)
    });
    // As in mergeSortedSlice: server-only elements go first only when they
    // preceded the listed element in the server's list.
    let (left, right) = (right, left);
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut li, mut ri) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        match (li.peek(), ri.peek()) {
            (Some((_, l)), Some((_, r))) => {
                if l < r {
                    out.extend(li.next().map(|x| x.0));
                } else {
                    out.extend(ri.next().map(|x| x.0));
                }
            }
            (Some(_), None) => out.extend(li.next().map(|x| x.0)),
            (None, Some(_)) => out.extend(ri.next().map(|x| x.0)),
            (None, None) => break,
        }
    }
    out
}

/// The list strategies of the built-in kinds this server serves (from the
/// Go `patchStrategy`/`patchMergeKey` tags). `path` is dotted, as passed to
/// [`strategic_merge_patch`]'s callback. `None` means replace.
pub fn builtin_list_strategy(kind: &str, path: &str) -> Option<ListStrategy> {
    match path {
        "metadata.ownerReferences" => return Some(ListStrategy::MergeByKey("uid".into())),
        "metadata.finalizers" => return Some(ListStrategy::SetMerge),
        "metadata.managedFields" => return Some(ListStrategy::Replace),
        _ => {}
    }
    match (kind, path) {
        ("Namespace", "status.conditions") => Some(ListStrategy::MergeByKey("type".into())),
        ("Namespace", "spec.finalizers") => Some(ListStrategy::Replace),
        ("CustomResourceDefinition", "spec.versions") => {
            Some(ListStrategy::MergeByKey("name".into()))
        }
        ("CustomResourceDefinition", "status.conditions") => {
            Some(ListStrategy::MergeByKey("type".into()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let strat =
            |p: &str| (p == "ports").then(|| ListStrategy::MergeByKey("port,protocol".into()));
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
}
