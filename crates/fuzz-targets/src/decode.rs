//! Request bodies decoded as the API server decodes them (JSON, YAML, protobuf, by media
//! type), and multi-document YAML as `kubectl apply -f` sends it.

use ferrometal_apiserver::fuzzing::{decode_body, yaml_documents};

const MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
];

/// One input.
pub fn run(data: &[u8]) {
    let Some((pick, body)) = data.split_first() else {
        return;
    };
    let media_type = MEDIA_TYPES[*pick as usize % MEDIA_TYPES.len()];
    if let Ok(value) = decode_body(media_type, body) {
        // Whatever was accepted serializes again (nothing half-decoded is kept).
        serde_json::to_vec(&value).expect("a decoded body serializes");
    }
    if let Ok(text) = std::str::from_utf8(body) {
        let _ = yaml_documents(text);
    }
}
