//! What the steps ask of JSON values: their type as go-openapi names it,
//! whether they have a node's type, equality by value, and which old list
//! element a new one corresponds to. Shared by validation, CEL rules and
//! cost estimates, so it sits below all of them.

use serde_json::Value;

use crate::node::{ListType, Node, Type};

/// Values nested deeper than this compare unequal (see [`json_eq`]).
const MAX_DEPTH: usize = 256;

/// The JSON type name go-openapi reports for a value.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` has the type the node declares (anything, if none).
pub(crate) fn type_matches(n: &Node, v: &Value) -> bool {
    if v.is_null() {
        return n.nullable || (n.ty.is_none() && !n.int_or_string);
    }
    if n.int_or_string {
        return matches!(json_type(v), "integer" | "string");
    }
    match n.ty {
        None => true,
        Some(Type::Object) => v.is_object(),
        Some(Type::Array) => v.is_array(),
        Some(Type::String) => v.is_string(),
        Some(Type::Boolean) => v.is_boolean(),
        Some(Type::Number) => v.is_number(),
        Some(Type::Integer) => json_type(v) == "integer",
    }
}

/// JSON equality with numbers compared by value, so `1` equals `1.0`.
/// Values nested deeper than any schema compare unequal rather than
/// risking the stack.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    json_eq_at(a, b, 0)
}

fn json_eq_at(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| json_eq_at(i, j, depth + 1))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, xv)| y.get(k).is_some_and(|yv| json_eq_at(xv, yv, depth + 1)))
        }
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        _ => false,
    }
}

/// The old element matching a new one, as Kubernetes correlates them:
/// by key for map lists, by value for sets, not at all for atomic lists.
pub(crate) fn correlate<'a>(n: &Node, val: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    match n.list_type {
        Some(ListType::Map) if !n.list_map_keys.is_empty() => olds.iter().find(|o| {
            n.list_map_keys
                .iter()
                .all(|k| match (val.get(k), o.get(k)) {
                    (Some(a), Some(b)) => json_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
        }),
        Some(ListType::Set) => olds.iter().find(|o| json_eq(o, val)),
        _ => None,
    }
}
