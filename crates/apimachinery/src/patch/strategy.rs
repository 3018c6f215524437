//! How each list merges in a strategic merge patch: [`ListStrategy`], merge keys, and
//! the strategies of the built-in kinds served here.

/// How a list at a given path merges in a strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStrategy {
    /// `patchStrategy: merge` with `patchMergeKey`: elements are objects
    /// matched by this key. Several comma-separated keys (a CRD's
    /// `x-kubernetes-list-map-keys`) match on all of them.
    MergeByKey(String),
    /// `patchStrategy: merge` on a list of primitives: set union.
    SetMerge,
    /// The default: the patch's list replaces the original.
    Replace,
}

/// The field names of a merge key: one name, or several comma-separated.
pub fn merge_key_fields(key: &str) -> Vec<&str> {
    key.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect()
}

/// The list strategies of the built-in kinds this server serves (from the
/// Go `patchStrategy`/`patchMergeKey` tags). `path` is dotted, as passed to
/// [`strategic_merge_patch`](super::strategic_merge_patch)'s
/// callback. `None` means replace.
pub fn builtin_list_strategy(kind: &str, path: &str) -> Option<ListStrategy> {
    match path {
        "metadata.ownerReferences" => return Some(ListStrategy::MergeByKey("uid".into())),
        "metadata.finalizers" => return Some(ListStrategy::SetMerge),
        "metadata.managedFields" => return Some(ListStrategy::Replace),
        _ => {}
    }
    match (kind, path) {
        ("Namespace", "status.conditions") => Some(ListStrategy::MergeByKey("type".into())),
        ("Namespace", "spec.finalizers") => Some(ListStrategy::Replace),
        ("CustomResourceDefinition", "spec.versions") => {
            Some(ListStrategy::MergeByKey("name".into()))
        }
        ("CustomResourceDefinition", "status.conditions") => {
            Some(ListStrategy::MergeByKey("type".into()))
        }
        _ => None,
    }
}
