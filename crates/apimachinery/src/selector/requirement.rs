//! One label requirement (`a=b`, `a in (x)`, `!a`, `a>1`, …) and Kubernetes' rules for
//! label keys and values.

use std::collections::BTreeMap;

use super::error::{SelectorError, invalid};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Requirement {
    pub(super) key: String,
    pub(super) op: Op,
}

impl Requirement {
    pub(super) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let v = labels.get(&self.key);
        match &self.op {
            Op::Equals(x) => v == Some(x),
            Op::NotEquals(x) => v != Some(x),
            Op::In(xs) => v.is_some_and(|v| xs.contains(v)),
            Op::NotIn(xs) => !v.is_some_and(|v| xs.contains(v)),
            Op::Exists => v.is_some(),
            Op::DoesNotExist => v.is_none(),
            Op::Gt(n) => v
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Op::Lt(n) => v
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// Validates a label key: optional DNS-subdomain prefix, then a name of at
/// most 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub(super) fn validate_key(input: &str, key: &str) -> Result<(), SelectorError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !ok {
            return Err(invalid(input, format!("invalid label key prefix {p:?}")));
        }
    }
    if !is_label_value(name) || name.is_empty() {
        return Err(invalid(input, format!("invalid label key {key:?}")));
    }
    Ok(())
}

/// Label values: empty, or up to 63 chars of alphanumerics, `-`, `_`, `.`
/// beginning and ending with an alphanumeric.
fn is_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

pub(super) fn validate_value(input: &str, v: &str) -> Result<(), SelectorError> {
    if is_label_value(v) {
        Ok(())
    } else {
        Err(invalid(input, format!("invalid label value {v:?}")))
    }
}
