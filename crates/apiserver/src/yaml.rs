//! Multi-document YAML, as kubectl and manifests write it.

use serde::Deserialize;
use serde_json::Value;

/// Every non-empty document of `text`, as JSON values.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| e.to_string())?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}
