//! [`Stored`]: one object as kept in memory, and its `metadata.resourceVersion`.

use bytes::Bytes;
use serde_json::Value;

/// One object as currently stored: its revision, the JSON served to clients (serialized once
/// per write), the slim metadata view selectors read (as JSON too), and the few fields the
/// collector and the write paths check on every object, unpacked. Parsed JSON costs several
/// times its size, so nothing is kept parsed: memory must stay small with 100,000 objects.
#[derive(Debug)]
pub struct Stored {
    pub rev: u64,
    pub json: Bytes,
    /// `apiVersion`, `kind`, `metadata` without `managedFields` and `annotations`, and the
    /// top-level fields Events are selected by; see [`Stored::meta`]. Only kept
    /// when it is under a quarter of the object's size: for smaller objects (Events, whose
    /// view is half of them) parsing the whole object is about as cheap, and a second copy
    /// would cost half as much again as the object.
    meta_json: Option<Box<[u8]>>,
    pub api_version: Box<str>,
    pub uid: Box<str>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.ownerReferences` is not empty.
    pub has_owners: bool,
}

/// Top-level fields kept in [`Stored::meta`] besides metadata (Event selection).
const META_FIELDS: &[&str] = &["apiVersion", "kind", "involvedObject", "type", "reason"];

impl Stored {
    pub fn new(rev: u64, value: Value) -> Self {
        let mut json = serde_json::to_vec(&value).expect("JSON values serialize");
        // Kept for the object's lifetime: without this, up to half of it is spare capacity.
        json.shrink_to_fit();
        let json = Bytes::from(json);
        let mut meta = serde_json::Map::new();
        if let Value::Object(o) = &value {
            for k in META_FIELDS {
                if let Some(v) = o.get(*k) {
                    meta.insert((*k).to_string(), v.clone());
                }
            }
            if let Some(Value::Object(m)) = o.get("metadata") {
                let mut m = m.clone();
                m.remove("managedFields");
                m.remove("annotations");
                meta.insert("metadata".into(), Value::Object(m));
            }
        }
        let meta = Value::Object(meta);
        let text = |p: &str| meta.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let api_version = text("/apiVersion").into();
        let uid = text("/metadata/uid").into();
        let deleting = meta.pointer("/metadata/deletionTimestamp").is_some();
        let has_owners = meta
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|r| !r.is_empty());
        let meta_json = serde_json::to_vec(&meta).expect("JSON values serialize");
        let meta_json = (meta_json.len() * 4 < json.len()).then(|| meta_json.into_boxed_slice());
        Stored {
            rev,
            json,
            meta_json,
            api_version,
            uid,
            deleting,
            has_owners,
        }
    }

    /// The slim metadata view (see `Stored::meta_json`) parsed, or for small objects the
    /// whole object: a superset selectors read the same way.
    pub fn meta(&self) -> Value {
        let bytes = self.meta_json.as_deref().unwrap_or(&self.json);
        serde_json::from_slice(bytes).unwrap_or(Value::Null)
    }

    /// The whole object, parsed from its JSON.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("stored JSON parses")
    }
}

pub fn resource_version(value: &Value) -> Option<u64> {
    value
        .pointer("/metadata/resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

pub(super) fn set_resource_version(value: &mut Value, rev: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
}
