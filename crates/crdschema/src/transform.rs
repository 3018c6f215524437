//! Defaulting and pruning: the two steps that rewrite an object before it
//! is validated.

use serde_json::Value;

use crate::node::{Additional, Node};
use crate::path::Path;

/// Beyond this depth values are left alone; schemas are far shallower and
/// the limit keeps hostile input from exhausting the stack.
const MAX_DEPTH: usize = 256;

/// ObjectMeta fields kept in the `metadata` of embedded resources.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

pub(crate) fn default(n: &Node, v: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(obj) => {
            for (name, child) in &n.properties {
                match obj.get(name) {
                    None => {
                        if let Some(d) = &child.default {
                            obj.insert(name.clone(), d.clone());
                        }
                    }
                    // A null for a non-nullable field means "unset": the
                    // default applies, or the field goes away.
                    Some(Value::Null) if !child.nullable => match &child.default {
                        Some(d) => {
                            obj.insert(name.clone(), d.clone());
                        }
                        None => {
                            obj.remove(name);
                        }
                    },
                    Some(_) => {}
                }
            }
            for (name, val) in obj.iter_mut() {
                if let Some(child) = n.properties.get(name) {
                    default(child, val, depth + 1);
                } else if let Additional::Schema(a) = &n.additional {
                    default(a, val, depth + 1);
                }
            }
            if let Additional::Schema(a) = &n.additional
                && !a.nullable
            {
                obj.retain(|_, val| !val.is_null() || a.default.is_some());
                for val in obj.values_mut() {
                    if val.is_null()
                        && let Some(d) = &a.default
                    {
                        *val = d.clone();
                        default(a, val, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &n.items {
                for val in items.iter_mut() {
                    if val.is_null()
                        && !item.nullable
                        && let Some(d) = &item.default
                    {
                        *val = d.clone();
                    }
                    default(item, val, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// `root` marks the object's top level, where apiVersion, kind and metadata
/// are the server's to handle. The paths of dropped fields are added to
/// `dropped`, for the server's field validation (`unknown field "..."`).
pub(crate) fn prune(
    n: &Node,
    v: &mut Value,
    root: bool,
    depth: usize,
    path: &Path,
    dropped: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(obj) => {
            let keep_meta = root || n.embedded;
            obj.retain(|name, _| {
                let keep = (keep_meta
                    && matches!(name.as_str(), "apiVersion" | "kind" | "metadata"))
                    || n.properties.contains_key(name)
                    || !matches!(
                        n.additional,
                        Additional::Unspecified | Additional::Allowed(false)
                    )
                    || n.preserve_unknown;
                if !keep {
                    dropped.push(path.field(name).render());
                }
                keep
            });
            for (name, val) in obj.iter_mut() {
                if root && name == "metadata" {
                    continue;
                }
                if let Some(child) = n.properties.get(name) {
                    prune(child, val, false, depth + 1, &path.field(name), dropped);
                } else if let Additional::Schema(a) = &n.additional {
                    prune(a, val, false, depth + 1, &path.key(name), dropped);
                } else if n.embedded && !root && name == "metadata" {
                    prune_embedded_metadata(val, &path.field(name), dropped);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &n.items {
                for (i, val) in items.iter_mut().enumerate() {
                    prune(item, val, false, depth + 1, &path.index(i), dropped);
                }
            }
        }
        _ => {}
    }
}

fn prune_embedded_metadata(v: &mut Value, path: &Path, dropped: &mut Vec<String>) {
    if let Value::Object(obj) = v {
        obj.retain(|k, _| {
            let keep = OBJECT_META_FIELDS.contains(&k.as_str());
            if !keep {
                dropped.push(path.field(k).render());
            }
            keep
        });
    }
}
