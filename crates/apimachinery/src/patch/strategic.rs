//! Strategic merge patch: maps merge recursively, lists per their strategy, with the
//! `$patch`, `$retainKeys` and `$deleteFromPrimitiveList` directives.

use serde_json::{Map, Value};

use super::element_order::apply_element_order;
use super::error::PatchError;
use super::strategy::{ListStrategy, merge_key_fields};

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
