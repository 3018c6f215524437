//! Server-side apply with managedFields in FieldsV1 format.

use serde_json::Value;

#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    pub manager: &'a str,
    pub force: bool,
    pub now: &'a str,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub manager: String,
    pub field: String,
}

pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions,
) -> Result<Value, Vec<Conflict>> {
    let _ = (live, applied, opts);
    todo!()
}

pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    api_version: &str,
    subresource: Option<&str>,
) {
    let _ = (old, new, manager, now, api_version, subresource);
    todo!()
}
