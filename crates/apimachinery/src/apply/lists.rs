//! How a list is treated (atomic, set or map keyed by some fields): from the caller's
//! list strategy, ObjectMeta's built-in lists, or a CRD schema, resolved against the
//! list's actual items.

use serde_json::{Map, Value};

use crate::patch::ListStrategy;

pub(super) type Strategy<'a> = &'a dyn Fn(&str) -> Option<ListStrategy>;

pub(super) fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// How a list is treated, resolved against its actual items: a keyed list
/// whose items are not all objects carrying the key degrades to atomic.
pub(super) enum ListKind<'k> {
    Atomic,
    Set,
    Map(Vec<&'k str>),
}

pub(super) fn list_kind<'k>(items: &[Value], strategy: &'k Option<ListStrategy>) -> ListKind<'k> {
    match strategy {
        Some(ListStrategy::MergeByKey(k)) => {
            let keys = crate::patch::merge_key_fields(k);
            // The first key must be present; later ones may be defaulted.
            match keys.first() {
                Some(first) if items.iter().all(|i| i.get(*first).is_some()) => ListKind::Map(keys),
                _ => ListKind::Atomic,
            }
        }
        Some(ListStrategy::SetMerge) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            ListKind::Set
        }
        _ => ListKind::Atomic,
    }
}

/// The key fields of an associative list item, as a JSON object.
pub(super) fn item_id(item: &Value, keys: &[&str]) -> Value {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = item.get(*k) {
            m.insert((*k).to_string(), v.clone());
        }
    }
    Value::Object(m)
}

pub(super) fn item_key(item: &Value, keys: &[&str]) -> String {
    format!("k:{}", item_id(item, keys))
}

pub(super) fn value_key(v: &Value) -> String {
    format!("v:{v}")
}

/// The list strategy used when the caller gives none: ObjectMeta's lists.
pub(super) fn default_strategy(path: &str) -> Option<ListStrategy> {
    match path {
        "metadata.ownerReferences" => Some(ListStrategy::MergeByKey("uid".into())),
        "metadata.finalizers" => Some(ListStrategy::SetMerge),
        _ => None,
    }
}

/// A list strategy read from an OpenAPI v3 schema (a CRD version's
/// `openAPIV3Schema`): `x-kubernetes-list-type: map` merges by all of
/// `x-kubernetes-list-map-keys` (comma-joined), `set` is a set, and
/// anything else is atomic. `path` is dotted, list items adding no segment.
pub fn schema_list_strategy(schema: &Value, path: &str) -> Option<ListStrategy> {
    let mut cur = schema;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        // Descend through list items to reach the item's properties.
        while cur.get("type").and_then(Value::as_str) == Some("array") {
            cur = cur.get("items")?;
        }
        cur = cur.get("properties")?.get(seg)?;
    }
    match cur.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> = cur
                .get("x-kubernetes-list-map-keys")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if keys.is_empty() {
                return None;
            }
            Some(ListStrategy::MergeByKey(keys.join(",")))
        }
        Some("set") => Some(ListStrategy::SetMerge),
        Some(_) => Some(ListStrategy::Replace),
        None => None,
    }
}
