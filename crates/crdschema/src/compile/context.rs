//! What compiling a schema carries from node to node, where a node sits,
//! and the readers of typed keyword values.

use serde_json::{Map, Value};

use crate::error::{FieldError, Reason};
use crate::regexes::Literals;
use crate::wording::fmt_value;

/// What compiling one schema carries from node to node.
pub(super) struct Ctx<'a> {
    pub env: &'a cel::Env,
    pub errs: Vec<FieldError>,
    /// The literal patterns of the rules, compiled with them.
    pub literals: Literals,
}

impl Ctx<'_> {
    pub(super) fn err(&mut self, field: String, reason: Reason, message: impl Into<String>) {
        self.errs.push(FieldError::new(field, reason, message));
    }
}

/// Which part of the schema a node sits in; structural rules differ.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Root,
    Property,
    Items,
    Additional,
    /// Inside allOf/anyOf/oneOf/not: value validations only.
    Junctor,
}

pub(super) fn get_bool(ctx: &mut Ctx, obj: &Map<String, Value>, key: &str, path: &str) -> bool {
    match obj.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a boolean", fmt_value(other)),
            );
            false
        }
    }
}

pub(super) fn get_string(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a string", fmt_value(other)),
            );
            None
        }
    }
}

pub(super) fn get_f64(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Option<f64> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a number", fmt_value(other)),
            );
            None
        }
    }
}

pub(super) fn get_u64(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Option<u64> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: must be a non-negative integer",
                    fmt_value(other)
                ),
            );
            None
        }
    }
}
