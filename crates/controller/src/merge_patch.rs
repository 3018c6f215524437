//! The minimal merge patch between two statuses, so a write sends only what changed.

use serde_json::{Map, Value};

/// A JSON merge patch (RFC 7386) turning `old` into `new`: changed keys only, `null` for
/// removed ones, so fields our types omit when empty are really cleared on the server.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => {
                        out.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (o, n) if o == n => None,
        (_, n) => Some(n.clone()),
    }
}

/// Writes `meta` (lists such as finalizers or owner references, which a merge patch replaces
/// whole) into `object`'s metadata, with the resourceVersion it was read at so a concurrent
/// change is a conflict to retry rather than overwritten. An object gone meanwhile is `None`.
pub async fn patch_metadata<K>(
    api: &kube::Api<K>,
    object: &K,
    mut meta: Map<String, Value>,
) -> Result<Option<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    meta.insert(
        "resourceVersion".into(),
        serde_json::json!(object.meta().resource_version),
    );
    let name = object.meta().name.clone().unwrap_or_default();
    crate::error::ignore_not_found(
        api.patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({ "metadata": meta })),
        )
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_diff_sets_changes_and_nulls_removals() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1], "gone": "x"});
        let new = json!({"a": 1, "b": {"c": 5, "d": 3}, "e": [1, 2], "new": true});
        assert_eq!(
            merge_diff(&old, &new).unwrap(),
            json!({"b": {"c": 5}, "e": [1, 2], "new": true, "gone": null})
        );
        assert_eq!(merge_diff(&new, &new), None);
    }
}
