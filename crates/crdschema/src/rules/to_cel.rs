//! Object values into CEL values, typed by the schema as Kubernetes
//! types them.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map};
use serde_json::Value;

use crate::formats;
use crate::node::{Node, Reads, Type};

/// Values nested deeper than this are neither converted nor walked.
pub(super) const MAX_DEPTH: usize = 256;

/// JSON to CEL, guided by the schema as Kubernetes types it: integers
/// stay ints, `number` fields are always doubles (so `1` and `1.5` compare
/// alike), objects become maps, and strings with format `date-time`/`date`,
/// `duration` or `byte` become timestamps, durations and bytes.
/// At the root, `metadata` shows only `name` and `generateName`.
pub(super) fn to_cel(v: &Value, n: Option<&Node>, depth: usize, root: bool) -> cel::Value {
    if depth > MAX_DEPTH {
        return cel::Value::Null;
    }
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(num) => {
            let want_float = n.is_some_and(|n| n.ty == Some(Type::Number));
            if !want_float && let Some(i) = num.as_i64() {
                cel::Value::Int(i)
            } else if !want_float && let Some(u) = num.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(num.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => {
            let format = n
                .filter(|n| n.ty == Some(Type::String))
                .and_then(|n| n.format.as_deref());
            format
                .and_then(|f| formatted_string(f, s))
                .unwrap_or_else(|| cel::Value::String(Arc::new(s.clone())))
        }
        Value::Array(items) => {
            let item = n.and_then(|n| n.items.as_deref());
            cel::Value::List(Arc::new(
                items
                    .iter()
                    .map(|i| to_cel(i, item, depth + 1, false))
                    .collect(),
            ))
        }
        Value::Object(obj) => {
            let whole = obj.iter().map(|(k, val)| (k, val, &Reads::Whole));
            object_to_cel(whole, obj.len(), n, depth, root)
        }
    }
}

/// A rule-bearing node's value as its rules read it: of objects, only the
/// fields read; a field only tested for (`has()`) and holding an object or
/// a list stands as `null`.
pub(super) fn node_value(v: &Value, n: &Node, root: bool, reads: &Reads) -> cel::Value {
    read_value(v, Some(n), 0, root, reads)
}

fn read_value(v: &Value, n: Option<&Node>, depth: usize, root: bool, reads: &Reads) -> cel::Value {
    match (v, reads) {
        (Value::Object(_) | Value::Array(_), Reads::Presence) => cel::Value::Null,
        (Value::Object(obj), Reads::Fields(fields)) if depth <= MAX_DEPTH => {
            let read = fields.iter().filter_map(|(k, read)| {
                let (k, val) = obj.get_key_value(k.as_str())?;
                Some((k, val, read))
            });
            object_to_cel(read, fields.len(), n, depth, root)
        }
        _ => to_cel(v, n, depth, root),
    }
}

/// An object's `entries`, each converted as read; at the root, `metadata`
/// shows only `name` and `generateName`.
fn object_to_cel<'a>(
    entries: impl Iterator<Item = (&'a String, &'a Value, &'a Reads)>,
    len: usize,
    n: Option<&Node>,
    depth: usize,
    root: bool,
) -> cel::Value {
    let mut map = HashMap::with_capacity(len);
    for (k, val, read) in entries {
        let converted = if root && k == "metadata" {
            root_metadata(val)
        } else {
            read_value(val, n.and_then(|n| n.child(k)), depth + 1, false, read)
        };
        map.insert(Key::String(Arc::new(k.clone())), converted);
    }
    cel::Value::Map(Map { map: Arc::new(map) })
}

fn root_metadata(v: &Value) -> cel::Value {
    let mut map = HashMap::new();
    if let Some(obj) = v.as_object() {
        for k in ["name", "generateName"] {
            if let Some(Value::String(s)) = obj.get(k) {
                map.insert(
                    Key::String(Arc::new(k.to_string())),
                    cel::Value::String(Arc::new(s.clone())),
                );
            }
        }
    }
    cel::Value::Map(Map { map: Arc::new(map) })
}

/// A string in the CEL type its format implies; `None` keeps it a string
/// (also when it does not parse, which OpenAPI validation reports).
fn formatted_string(format: &str, s: &str) -> Option<cel::Value> {
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(cel::Value::Timestamp),
        "date" => {
            let day = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
            let utc = chrono::FixedOffset::east_opt(0)?;
            let midnight = day.and_hms_opt(0, 0, 0)?.and_local_timezone(utc).single()?;
            Some(cel::Value::Timestamp(midnight))
        }
        "duration" => formats::parse_duration(s)
            .map(|ns| cel::Value::Duration(chrono::Duration::nanoseconds(ns))),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .ok()
                .map(|b| cel::Value::Bytes(Arc::new(b)))
        }
        _ => None,
    }
}
