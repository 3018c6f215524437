//! Merging an applied configuration into the live object, and removing the fields a
//! manager stopped applying.

use serde_json::Value;

use super::fieldset::FieldSet;
use super::lists::{ListKind, Strategy, child_path, item_id, list_kind};

/// Merges an applied configuration into the live object: maps recurse,
/// keyed lists merge by key, sets union, everything else is replaced.
pub(super) fn ssa_merge(live: &Value, applied: &Value, path: &str, strat: Strategy) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            let mut out = l.clone();
            for (k, av) in a {
                if av.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match l.get(k) {
                    Some(lv) => ssa_merge(lv, av, &child_path(path, k), strat),
                    None => without_nulls(av),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => {
            let st = strat(path);
            match (list_kind(l, &st), list_kind(a, &st)) {
                (ListKind::Map(key), ListKind::Map(_)) => {
                    let id = |v: &Value| item_id(v, &key);
                    Value::Array(merge_ordered(l, a, &id, &|lv, av| match lv {
                        Some(lv) => ssa_merge(lv, av, path, strat),
                        None => without_nulls(av),
                    }))
                }
                (ListKind::Set, ListKind::Set) => {
                    Value::Array(merge_ordered(l, a, &|v| v.clone(), &|_, av| av.clone()))
                }
                _ => without_nulls(applied),
            }
        }
        _ => without_nulls(applied),
    }
}

/// Merges two associative lists the way structured-merge-diff orders them:
/// applied items keep the applied order, live-only items stay where they
/// were relative to it.
fn merge_ordered(
    live: &[Value],
    applied: &[Value],
    id: &dyn Fn(&Value) -> Value,
    merge: &dyn Fn(Option<&Value>, &Value) -> Value,
) -> Vec<Value> {
    let live_ids: Vec<Value> = live.iter().map(id).collect();
    let applied_ids: Vec<Value> = applied.iter().map(id).collect();
    let live_item = |k: &Value| live_ids.iter().position(|x| x == k).map(|i| &live[i]);
    let mut out = Vec::with_capacity(live.len() + applied.len());
    let mut emitted: Vec<Value> = Vec::new();
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < applied.len() {
        if li < live.len() {
            let lid = &live_ids[li];
            if emitted.contains(lid) {
                li += 1;
                continue;
            }
            if !applied_ids.contains(lid) {
                out.push(live[li].clone());
                emitted.push(lid.clone());
                li += 1;
                continue;
            }
        }
        if ri < applied.len() {
            let rid = &applied_ids[ri];
            if !emitted.contains(rid) {
                out.push(merge(live_item(rid), &applied[ri]));
                emitted.push(rid.clone());
            }
            ri += 1;
        } else {
            li += 1;
        }
    }
    out
}

/// A null in an applied configuration unsets the field rather than
/// storing a null.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, c)| !c.is_null())
                .map(|(k, c)| (k.clone(), without_nulls(c)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Removes the member paths of `remove` from `v`, except where `keep` still
/// owns something underneath (then only the unowned parts go).
pub(super) fn remove_paths(v: &mut Value, remove: &FieldSet, keep: Option<&FieldSet>) {
    for (pe, rnode) in &remove.children {
        let knode = keep.and_then(|k| k.children.get(pe));
        let kept_below = knode.is_some_and(|k| !k.is_empty());
        if let Some(f) = pe.strip_prefix("f:") {
            let Value::Object(m) = v else { continue };
            if rnode.member && !kept_below {
                m.remove(f);
            } else if let Some(child) = m.get_mut(f) {
                remove_paths(child, rnode, knode);
            }
        } else {
            let Value::Array(items) = v else { continue };
            let Some(pos) = items.iter().position(|i| element_matches(i, pe)) else {
                continue;
            };
            if rnode.member && !kept_below {
                items.remove(pos);
            } else {
                remove_paths(&mut items[pos], rnode, knode);
            }
        }
    }
}

fn element_matches(item: &Value, pe: &str) -> bool {
    if let Some(k) = pe.strip_prefix("k:") {
        match serde_json::from_str::<Value>(k) {
            Ok(Value::Object(keys)) => keys.iter().all(|(kk, kv)| item.get(kk) == Some(kv)),
            _ => false,
        }
    } else if let Some(val) = pe.strip_prefix("v:") {
        serde_json::from_str::<Value>(val).is_ok_and(|x| x == *item)
    } else {
        false
    }
}

/// Typed ObjectMeta drops empty labels/annotations maps; keep that shape.
pub(super) fn drop_empty_meta_maps(obj: &mut Value) {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        for k in ["labels", "annotations", "ownerReferences", "finalizers"] {
            let empty = match m.get(k) {
                Some(Value::Object(x)) => x.is_empty(),
                Some(Value::Array(x)) => x.is_empty(),
                _ => false,
            };
            if empty {
                m.remove(k);
            }
        }
    }
}
