//! Definitions: a kind's (with its GVK and described apiVersion/kind/metadata), its
//! list's, and every registry definition they refer to.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::builtin::{
    DELETE_OPTIONS, LIST_META, OBJECT_META, PATCH, STATUS, builtin_name, definition_name, registry,
};
use super::resource::{ResourceSchema, guess_plural};

// Where definitions live in each document version.
pub(super) const V3_REF: &str = "#/components/schemas/";
pub(super) const V2_REF: &str = "#/definitions/";

const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
pub(super) const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

pub(super) fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// A resource's definition with its GVK, metadata pointing at ObjectMeta
/// and apiVersion/kind described, as kube-apiserver publishes CRD schemas.
fn kind_definition(r: &ResourceSchema) -> Value {
    let mut s = match &r.schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    s.entry("type").or_insert_with(|| "object".into());
    let props = s.entry("properties").or_insert_with(|| json!({}));
    if !props.is_object() {
        *props = json!({});
    }
    if let Value::Object(p) = props {
        if builtin_name(&r.group, &r.version, &r.kind).is_none() {
            p.insert(
                "metadata".into(),
                json!({
                    "description": METADATA_DESC,
                    "allOf": [{"$ref": format!("{V3_REF}{OBJECT_META}")}],
                    "default": {},
                }),
            );
        }
        for (field, desc) in [("apiVersion", API_VERSION_DESC), ("kind", KIND_DESC)] {
            let entry = p.entry(field).or_insert_with(|| json!({"type": "string"}));
            if let Value::Object(e) = entry {
                e.entry("description").or_insert_with(|| desc.into());
            }
        }
    }
    s.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk(&r.group, &r.version, &r.kind)]),
    );
    Value::Object(s)
}

fn list_definition(r: &ResourceSchema, item_name: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {}", r.kind, r.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESC, "type": "string"},
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", guess_plural(&r.kind)),
                "type": "array",
                "items": {"$ref": format!("{V3_REF}{item_name}")},
            },
            "kind": {"description": KIND_DESC, "type": "string"},
            "metadata": {
                "description": LIST_METADATA_DESC,
                "allOf": [{"$ref": format!("{V3_REF}{LIST_META}")}],
                "default": {},
            },
        },
        "x-kubernetes-group-version-kind": [gvk(&r.group, &r.version, &format!("{}List", r.kind))],
    })
}

/// Adds every definition `v` refers to (transitively) from the registry.
fn add_referenced(v: &Value, out: &mut Map<String, Value>) {
    let mut stack = vec![v.clone()];
    let mut seen: BTreeSet<String> = out.keys().cloned().collect();
    while let Some(cur) = stack.pop() {
        let mut refs = Vec::new();
        collect_refs(&cur, &mut refs);
        for name in refs {
            if seen.insert(name.clone())
                && let Some(def) = registry().get(&name)
            {
                out.insert(name, def.clone());
                stack.push(def.clone());
            }
        }
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                if k == "$ref"
                    && let Some(name) = c.as_str().and_then(|s| s.strip_prefix(V3_REF))
                {
                    out.push(name.to_string());
                } else {
                    collect_refs(c, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
        _ => {}
    }
}

pub(super) fn build_definitions(resources: &[ResourceSchema]) -> Map<String, Value> {
    let mut defs = Map::new();
    for r in resources {
        let name = definition_name(&r.group, &r.version, &r.kind);
        defs.insert(name.clone(), kind_definition(r));
        defs.insert(format!("{name}List"), list_definition(r, &name));
    }
    for name in [OBJECT_META, LIST_META, STATUS, DELETE_OPTIONS, PATCH] {
        if let Some(d) = registry().get(name) {
            defs.insert(name.to_string(), d.clone());
        }
    }
    let snapshot = Value::Object(defs.clone());
    add_referenced(&snapshot, &mut defs);
    defs
}
