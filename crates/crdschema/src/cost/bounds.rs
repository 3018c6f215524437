//! The sizes a schema allows its values, as kube-apiserver assumes them
//! when a CRD is written: declared maxima, else as large as a request can
//! make them.

use serde_json::Value;

use crate::limits::MAX_REQUEST_SIZE_BYTES;
use crate::node::{Additional, Node, Type};

pub(super) const REQ: u64 = MAX_REQUEST_SIZE_BYTES;
/// The longest `metadata.name`/`generateName` assumed when a CRD is written.
pub(super) const MAX_NAME_LEN: u64 = 253;
/// The longest `apiVersion` or `kind` assumed when a CRD is written.
pub(super) const MAX_TYPE_META_LEN: u64 = 317;

/// The smallest JSON serialization of a value of `n`.
pub(super) fn min_size(n: &Node) -> u64 {
    let size = if n.int_or_string {
        1
    } else {
        match n.ty {
            Some(Type::String) => 2,
            Some(Type::Integer | Type::Number) | None => 1,
            Some(Type::Boolean) => 4,
            Some(Type::Object | Type::Array) => 2,
        }
    };
    if n.nullable { size.min(4) } else { size }
}

/// The largest `size()` a value of `n` may have, as kube-apiserver
/// estimates it: declared maxima, else as many as fit in a request.
pub(super) fn static_len(n: &Node) -> u64 {
    if n.int_or_string {
        return REQ - 2;
    }
    match n.ty {
        Some(Type::String) => {
            if let Some(m) = n.max_length {
                return m;
            }
            if let Some(values) = &n.enum_values
                && values.iter().all(Value::is_string)
            {
                return values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| s.len() as u64)
                    .max()
                    .unwrap_or(0);
            }
            match n.format.as_deref() {
                Some("duration" | "date-time" | "datetime") => 32,
                Some("date") => 12,
                _ => REQ - 2,
            }
        }
        Some(Type::Array) => n.max_items.unwrap_or_else(|| {
            let item = n.items.as_deref().map(min_size).unwrap_or(1);
            (REQ - 2) / (item + 1)
        }),
        Some(Type::Object) => {
            let open = match &n.additional {
                Additional::Schema(a) => Some(min_size(a)),
                Additional::Allowed(true) => Some(1),
                _ if n.preserve_unknown => Some(1),
                _ => None,
            };
            match (open, n.max_properties) {
                (_, Some(m)) if open.is_some() => m,
                (Some(value), _) => (REQ - 2) / (value + 6),
                (None, max) => (n.properties.len() as u64).min(max.unwrap_or(u64::MAX)),
            }
        }
        Some(_) => 0,
        None if n.preserve_unknown => REQ - 2,
        None => 0,
    }
}

/// The largest integer a value of `n` may hold.
pub(super) fn static_num(n: &Node) -> u64 {
    match n.ty {
        Some(Type::Integer) => match (n.minimum, n.maximum) {
            (Some(lo), Some(hi)) => lo.abs().max(hi.abs()).ceil() as u64,
            _ => u64::MAX,
        },
        Some(Type::String | Type::Boolean | Type::Object | Type::Array) => 0,
        _ => u64::MAX,
    }
}
