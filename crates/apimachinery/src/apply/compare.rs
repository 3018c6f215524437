//! The fields a value sets, and what was added, changed or removed between two values
//! (structured-merge-diff's `Compare`), as field sets.

use std::collections::BTreeMap;

use serde_json::Value;

use super::fieldset::FieldSet;
use super::lists::{ListKind, Strategy, child_path, item_key, list_kind, value_key};

/// The fields an applied configuration sets: leaves, keyed list items (as
/// members) and set elements. Nulls are not owned.
pub(super) fn to_set(v: &Value, path: &str, strat: Strategy) -> FieldSet {
    let mut s = FieldSet::default();
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, cv) in m {
                if cv.is_null() {
                    continue;
                }
                s.children
                    .insert(format!("f:{k}"), to_set(cv, &child_path(path, k), strat));
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let st = strat(path);
            match list_kind(items, &st) {
                ListKind::Atomic => s.member = true,
                ListKind::Set => {
                    for i in items {
                        s.children.insert(value_key(i), FieldSet::leaf());
                    }
                }
                ListKind::Map(key) => {
                    for i in items {
                        let mut c = to_set(i, path, strat);
                        c.member = true;
                        s.children.insert(item_key(i, &key), c);
                    }
                }
            }
        }
        _ => s.member = true,
    }
    s
}

/// Every path of a subtree, containers included, as Compare reports for an
/// added or removed subtree.
fn whole_set(v: &Value, path: &str, strat: Strategy) -> FieldSet {
    let mut s = FieldSet::leaf();
    match v {
        Value::Object(m) => {
            for (k, cv) in m {
                s.children
                    .insert(format!("f:{k}"), whole_set(cv, &child_path(path, k), strat));
            }
        }
        Value::Array(items) => {
            let st = strat(path);
            match list_kind(items, &st) {
                ListKind::Atomic => {}
                ListKind::Set => {
                    for i in items {
                        s.children.insert(value_key(i), FieldSet::leaf());
                    }
                }
                ListKind::Map(key) => {
                    for i in items {
                        s.children
                            .insert(item_key(i, &key), whole_set(i, path, strat));
                    }
                }
            }
        }
        _ => {}
    }
    s
}

#[derive(Default)]
pub(super) struct Comparison {
    pub(super) added: FieldSet,
    pub(super) modified: FieldSet,
    pub(super) removed: FieldSet,
}

/// Compares two values at the same path, recording differences under `key`.
pub(super) fn compare(
    old: &Value,
    new: &Value,
    path: &str,
    strat: Strategy,
    c: &mut Comparison,
    at: &mut Vec<String>,
) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            // The object's own field bookkeeping is no field of it (and not copied to be left
            // out: it is the largest part of many objects).
            let skip = |k: &str| path == "metadata" && k == "managedFields";
            for (k, av) in a {
                if skip(k) {
                    continue;
                }
                at.push(format!("f:{k}"));
                let cpath = child_path(path, k);
                match b.get(k) {
                    Some(bv) => compare(av, bv, &cpath, strat, c, at),
                    None => insert_at(&mut c.removed, at, whole_set(av, &cpath, strat)),
                }
                at.pop();
            }
            for (k, bv) in b {
                if !a.contains_key(k) && !skip(k) {
                    at.push(format!("f:{k}"));
                    insert_at(&mut c.added, at, whole_set(bv, &child_path(path, k), strat));
                    at.pop();
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let st = strat(path);
            match (list_kind(a, &st), list_kind(b, &st)) {
                (ListKind::Map(key), ListKind::Map(_)) => {
                    let index = |l: &[Value]| -> BTreeMap<String, usize> {
                        l.iter()
                            .enumerate()
                            .map(|(i, v)| (item_key(v, &key), i))
                            .collect()
                    };
                    let (ai, bi) = (index(a), index(b));
                    for (k, &i) in &ai {
                        at.push(k.clone());
                        match bi.get(k) {
                            Some(&j) => compare(&a[i], &b[j], path, strat, c, at),
                            None => insert_at(&mut c.removed, at, whole_set(&a[i], path, strat)),
                        }
                        at.pop();
                    }
                    for (k, &j) in &bi {
                        if !ai.contains_key(k) {
                            at.push(k.clone());
                            insert_at(&mut c.added, at, whole_set(&b[j], path, strat));
                            at.pop();
                        }
                    }
                }
                (ListKind::Set, ListKind::Set) => {
                    for v in a.iter().filter(|v| !b.contains(v)) {
                        at.push(value_key(v));
                        insert_at(&mut c.removed, at, FieldSet::leaf());
                        at.pop();
                    }
                    for v in b.iter().filter(|v| !a.contains(v)) {
                        at.push(value_key(v));
                        insert_at(&mut c.added, at, FieldSet::leaf());
                        at.pop();
                    }
                }
                _ => {
                    if a != b {
                        insert_at(&mut c.modified, at, FieldSet::leaf());
                    }
                }
            }
        }
        (a, b) => {
            if a != b {
                insert_at(&mut c.modified, at, FieldSet::leaf());
            }
        }
    }
}

fn insert_at(set: &mut FieldSet, at: &[String], node: FieldSet) {
    let mut cur = set;
    for pe in at {
        cur = cur.children.entry(pe.clone()).or_default();
    }
    *cur = cur.union(&node);
}

/// Drops what the server manages itself from a field set, as kube-apiserver
/// strips apiVersion, kind and server-owned metadata from managedFields.
pub(super) fn strip_server_fields(mut s: FieldSet) -> FieldSet {
    s.children.remove("f:apiVersion");
    s.children.remove("f:kind");
    if let Some(meta) = s.children.get_mut("f:metadata") {
        meta.member = false;
        for f in [
            "f:name",
            "f:namespace",
            "f:uid",
            "f:resourceVersion",
            "f:generation",
            "f:creationTimestamp",
            "f:selfLink",
            "f:managedFields",
            "f:clusterName",
        ] {
            meta.children.remove(f);
        }
    }
    s.prune();
    s
}
