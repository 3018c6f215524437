//! What goes on a host's config drive, whoever writes it (Ironic builds the drive from this
//! JSON; the deploy agent's server side writes it with xorriso): user data as given, network
//! data and metadata as objects, with the identifying metadata metal3 adds.

use serde_json::{Map, Value, json};

use crate::{Deployment, HostInfo};

/// Text that is JSON or YAML into a JSON value; anything else stays a string.
pub fn structured(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v;
    }
    match serde_yaml::from_str::<Value>(text) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => v,
        _ => Value::String(text.to_string()),
    }
}

/// The config drive's contents as `{"meta_data", "user_data", "network_data"}` (the JSON
/// Ironic builds a drive from, API >= 1.56); `None` when there is nothing to put on one.
pub fn configdrive(host: &HostInfo, node_uuid: &str, deployment: &Deployment) -> Option<Value> {
    // As metal3: a live ISO gets no config drive. Ironic would attach it as a second virtual
    // medium, which much hardware (and sushy-tools) cannot take, failing the deploy.
    if deployment.image.as_ref().is_some_and(|i| i.is_live_iso()) {
        return None;
    }
    if deployment.user_data.is_none()
        && deployment.network_data.is_none()
        && deployment.meta_data.is_none()
    {
        return None;
    }
    let (namespace, name) = host.key.split_once('~').unwrap_or(("", &host.key));
    let mut meta = match deployment.meta_data.as_deref().map(structured) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, v) in [
        ("uuid", node_uuid),
        ("metal3-namespace", namespace),
        ("metal3-name", name),
        ("local-hostname", name),
        ("local_hostname", name),
        ("name", name),
    ] {
        meta.entry(k).or_insert_with(|| json!(v));
    }
    let mut drive = json!({ "meta_data": meta });
    if let Some(user) = &deployment.user_data {
        drive["user_data"] = json!(user);
    }
    if let Some(network) = deployment.network_data.as_deref() {
        drive["network_data"] = structured(network);
    }
    Some(drive)
}
