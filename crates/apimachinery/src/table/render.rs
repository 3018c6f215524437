//! [`to_table`]: objects and columns to a meta.k8s.io/v1 Table.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::cells::cell;
use super::columns::PrinterColumn;

/// What each row's `object` carries (the `includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value; unknown values yield `None`.
    pub fn from_query(s: &str) -> Option<Self> {
        match s {
            "None" => Some(Self::None),
            "Metadata" => Some(Self::Metadata),
            "Object" => Some(Self::Object),
            _ => None,
        }
    }
}

/// Builds a meta.k8s.io/v1 Table of `objects`.
pub fn to_table(
    objects: &[Value],
    columns: &[PrinterColumn],
    include_object: IncludeObject,
    now: SystemTime,
    list_meta: Value,
) -> Value {
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let defs: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format.clone().unwrap_or_default(),
                "description": c.description.clone().unwrap_or_default(),
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(obj, c, now)).collect();
            let object = match include_object {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_object_metadata(obj),
                IncludeObject::Object => obj.clone(),
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    let list_meta = if list_meta.is_object() {
        list_meta
    } else {
        Value::Object(Map::new())
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

/// The object as a meta.k8s.io/v1 PartialObjectMetadata.
pub fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}
