//! Label and field selectors (`-l`, `--field-selector`, and the JSON LabelSelector of
//! policies): parse and match against an object.

use ferrometal_apimachinery::selector::{FieldSelector, LabelSelector};
use serde_json::json;

/// One input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let object = json!({
        "metadata": {"name": "h0", "namespace": "default",
                     "labels": {"app": "web", "tier": "a", "example.com/shard": "1"}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}
    });
    let (labels, fields) = text.split_once('\n').unwrap_or((text, ""));
    if let Ok(selector) = LabelSelector::parse(labels) {
        let _ = selector.matches_object(&object);
    }
    if let Ok(selector) = FieldSelector::parse(fields) {
        let _ = selector.matches(&object);
        let _ = selector.fields();
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
        && let Ok(selector) = LabelSelector::from_label_selector_json(&value)
    {
        let _ = selector.matches_object(&object);
    }
}
