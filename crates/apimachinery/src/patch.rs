//! Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed (wrong shape, bad directive value).
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// A JSON patch operation could not be applied (missing path, failed test).
    #[error("json patch failed: {0}")]
    JsonPatch(String),
    /// A `$patch` or other directive the server does not understand.
    #[error("unsupported strategic merge patch directive: {0}")]
    UnsupportedDirective(String),
}

/// How a list at a given path merges in a strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStrategy {
    MergeByKey(String),
    SetMerge,
    Replace,
}

pub fn merge_patch(target: &mut Value, patch: &Value) {
    let _ = (target, patch);
    todo!()
}

pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let _ = (target, patch);
    todo!()
}

pub fn strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    merge_keys: &dyn Fn(&str) -> Option<ListStrategy>,
) -> Result<(), PatchError> {
    let _ = (target, patch, merge_keys);
    todo!()
}

pub fn builtin_list_strategy(kind: &str, path: &str) -> Option<ListStrategy> {
    let _ = (kind, path);
    None
}
