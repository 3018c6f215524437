//! Conversion between API versions that share storage. `events.k8s.io/v1` Events are stored in
//! their `core/v1` form, as kube-apiserver does, so events recorded by controllers (kube-rs
//! `Recorder` writes events.k8s.io) show up in `kubectl describe` and `kubectl get events`.

use serde_json::{Map, Value};

use crate::registry::Resource;

/// Field renames between events.k8s.io/v1 (left) and core/v1 (right).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedSource", "source"),
    ("reportingController", "reportingComponent"),
];

/// Whether objects of `res` are stored in another version's form.
pub fn converts(res: &Resource) -> bool {
    res.builtin && res.group == "events.k8s.io"
}

fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let mut moved = Map::new();
    for (from, to) in pairs {
        if let Some(v) = o.remove(from) {
            moved.insert(to.to_string(), v);
        }
    }
    o.extend(moved);
}

/// Into the stored form (in place).
pub fn to_storage(res: &Resource, obj: &mut Value) {
    if !converts(res) {
        return;
    }
    rename(obj, EVENT_FIELDS.iter().copied());
    obj["apiVersion"] = Value::String("v1".into());
}

/// From the stored form into the form `res` serves.
pub fn from_storage(res: &Resource, obj: &Value) -> Value {
    let mut v = obj.clone();
    if converts(res) {
        rename(&mut v, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
    }
    v["apiVersion"] = Value::String(res.api_version());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_fields_round_trip() {
        let snap = crate::registry::Registry::default();
        snap.rebuild(std::iter::empty());
        let s = snap.snapshot();
        let ev = s.find("events.k8s.io", "v1", "events").unwrap();
        let mut v = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "regarding": {"name": "h"}, "note": "hi", "reportingController": "c"});
        to_storage(ev, &mut v);
        assert_eq!(v["involvedObject"]["name"], "h");
        assert_eq!(v["message"], "hi");
        assert_eq!(v["apiVersion"], "v1");
        let back = from_storage(ev, &v);
        assert_eq!(back["note"], "hi");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
        assert!(back.get("message").is_none());
    }
}
