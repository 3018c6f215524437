//! `metadata.managedFields` entries: read, capped as kube-apiserver caps `Update`
//! managers, and written back in kube-apiserver's order.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::fieldset::FieldSet;

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) api_version: String,
    pub(super) time: Option<String>,
    pub(super) subresource: String,
    pub(super) set: FieldSet,
}

impl Entry {
    pub(super) fn is(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        subresource: &str,
    ) -> bool {
        // Apply entries are identified without their apiVersion, so a
        // manager applying at a new version replaces its old entry.
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), self.manager.clone().into());
        m.insert("operation".into(), self.operation.clone().into());
        m.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(t) = &self.time {
            m.insert("time".into(), t.clone().into());
        }
        m.insert("fieldsType".into(), "FieldsV1".into());
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), self.subresource.clone().into());
        }
        Value::Object(m)
    }
}

pub(super) fn parse_entries(v: Option<&Value>) -> Vec<Entry> {
    let Some(Value::Array(items)) = v else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Entry {
                manager: s("manager").unwrap_or_default(),
                operation: s("operation")?,
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time"),
                subresource: s("subresource").unwrap_or_default(),
                set: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

pub(super) fn managed_fields_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

pub(super) fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(Value::Object(m)) = o.get_mut("metadata") {
        m.remove("managedFields");
    }
    o
}

/// kube-apiserver's DefaultMaxUpdateManagers: at most this many `Update` entries are kept.
const MAX_UPDATE_MANAGERS: usize = 10;
/// The manager the oldest `Update` entries are merged into beyond that, one per apiVersion.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Merges the oldest `Update` entries into an `ancient-changes` entry per apiVersion until at
/// most [`MAX_UPDATE_MANAGERS`] remain, as kube-apiserver's capManagersManager: otherwise
/// every distinct updater adds an entry to the object forever. The merged entry keeps the
/// union of the fields, so ownership (and conflicts) survive the merge.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].operation == "Update")
        .collect();
    let mut count = updaters.len();
    if count <= MAX_UPDATE_MANAGERS {
        return;
    }
    // Oldest first, then by name; the times are RFC 3339 in UTC, which order as strings.
    updaters.sort_by(|&a, &b| {
        (&entries[a].time, &entries[a].manager).cmp(&(&entries[b].time, &entries[b].manager))
    });
    let is_bucket = |e: &Entry| {
        e.operation == "Update" && e.manager == ANCIENT_CHANGES && e.subresource.is_empty()
    };
    // Per apiVersion, the entry that is (or becomes) its ancient-changes bucket; one left by
    // an earlier cap is reused so there is never a second.
    let mut buckets: BTreeMap<String, usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| is_bucket(e))
        .map(|(i, e)| (e.api_version.clone(), i))
        .collect();
    let mut merged = vec![false; entries.len()];
    for i in updaters {
        if count <= MAX_UPDATE_MANAGERS {
            break;
        }
        match buckets.get(&entries[i].api_version).copied() {
            Some(b) if b == i => {}
            Some(b) => {
                let set = entries[b].set.union(&entries[i].set);
                let time = entries[b].time.clone().max(entries[i].time.clone());
                let bucket = &mut entries[b];
                bucket.manager = ANCIENT_CHANGES.into();
                bucket.subresource.clear();
                bucket.set = set;
                bucket.time = time;
                merged[i] = true;
                count -= 1;
            }
            None => {
                buckets.insert(entries[i].api_version.clone(), i);
            }
        }
    }
    let mut i = 0;
    entries.retain(|_| {
        i += 1;
        !merged[i - 1]
    });
}

/// Writes entries into `metadata.managedFields`, ordered as kube-apiserver
/// orders them (operation, time, manager, apiVersion, subresource).
pub(super) fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    cap_update_managers(&mut entries);
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Value::Object(root) = obj else { return };
    if entries.is_empty() {
        if let Some(Value::Object(m)) = root.get_mut("metadata") {
            m.remove("managedFields");
        }
        return;
    }
    let meta = root.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Value::Object(m) = meta {
        m.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}
