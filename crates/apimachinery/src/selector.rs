//! Label and field selectors (kubectl `-l` / `--field-selector` syntax).

use std::collections::BTreeMap;

/// Errors from parsing a selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid selector {input:?}: {reason}")]
    Invalid { input: String, reason: String },
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<()>,
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let _ = s;
        Ok(Self::default())
    }
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let _ = (labels, &self.requirements);
        true
    }
    pub fn from_label_selector_json(v: &serde_json::Value) -> Result<Self, SelectorError> {
        let _ = v;
        Ok(Self::default())
    }
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<()>,
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let _ = s;
        Ok(Self::default())
    }
    pub fn matches(&self, obj: &serde_json::Value) -> bool {
        let _ = (obj, &self.requirements);
        true
    }
    pub fn fields(&self) -> Vec<String> {
        Vec::new()
    }
}
