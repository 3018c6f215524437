//! [`ResourceSchema`]: one kind and its schema, as a document describes it.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceSchema {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespaced: bool,
    pub schema: Value,
}

impl ResourceSchema {
    /// The resource (URL) name kube-apiserver would guess for this kind.
    pub fn guessed_plural(&self) -> String {
        guess_plural(&self.kind)
    }
}

/// Lower-cased plural of a kind, as Kubernetes' UnsafeGuessKindToResource.
pub fn guess_plural(kind: &str) -> String {
    let s = kind.to_lowercase();
    if s.is_empty() {
        return s;
    }
    if s.ends_with('s') {
        format!("{s}es")
    } else if let Some(stem) = s.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{s}s")
    }
}
