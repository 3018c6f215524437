//! The two RFC patch formats: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

use serde_json::{Map, Value};

use super::error::PatchError;

/// Applies an RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(pm) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(tm) = target else { return };
    for (k, v) in pm {
        if v.is_null() {
            tm.remove(k);
        } else {
            merge_patch(tm.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// Applies an RFC 6902 JSON patch atomically: on error `target` is untouched.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Invalid(format!("not a JSON patch operation list: {e}")))?;
    // Work on a copy so a failing operation never leaves a half-applied document.
    let mut doc = target.clone();
    json_patch::patch_unsafe(&mut doc, &ops.0).map_err(|e| PatchError::JsonPatch(e.to_string()))?;
    *target = doc;
    Ok(())
}
