//! [`LabelSelector`]: parsed from kubectl `-l` text or a `metav1.LabelSelector`, and
//! matched against labels.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::{SelectorError, invalid};
use super::label_syntax::{Parser, Tok, tokenize};
use super::requirement::{Op, Requirement, validate_key, validate_value};

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses kubectl `-l` syntax; an empty or blank string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let toks = tokenize(s)?;
        let mut p = Parser {
            input: s,
            toks,
            pos: 0,
        };
        let mut requirements = Vec::new();
        if p.peek().is_none() {
            return Ok(Self::default());
        }
        loop {
            requirements.push(p.requirement()?);
            match p.next() {
                None => break,
                Some(Tok::Comma) => {
                    if p.peek().is_none() {
                        return Err(invalid(s, "trailing ','"));
                    }
                }
                Some(t) => return Err(invalid(s, format!("unexpected {t}"))),
            }
        }
        Ok(Self { requirements })
    }

    /// True when every requirement holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when the selector has no requirements and so selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Matches the `metadata.labels` of a JSON object (missing labels = none).
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(&labels_of(obj))
    }

    /// Builds a selector from a `metav1.LabelSelector` (`matchLabels`,
    /// `matchExpressions`). Null or `{}` selects everything.
    pub fn from_label_selector_json(v: &Value) -> Result<Self, SelectorError> {
        let input = v.to_string();
        let obj = match v {
            Value::Null => return Ok(Self::default()),
            Value::Object(m) => m,
            _ => return Err(invalid(&input, "label selector must be an object")),
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(ml)) => {
                for (k, val) in ml {
                    let val = val.as_str().ok_or_else(|| {
                        invalid(
                            &input,
                            format!("matchLabels value for {k:?} must be a string"),
                        )
                    })?;
                    validate_key(&input, k)?;
                    validate_value(&input, val)?;
                    requirements.push(Requirement {
                        key: k.clone(),
                        op: Op::Equals(val.to_string()),
                    });
                }
            }
            Some(_) => return Err(invalid(&input, "matchLabels must be an object")),
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for e in exprs {
                    requirements.push(expression(&input, e)?);
                }
            }
            Some(_) => return Err(invalid(&input, "matchExpressions must be an array")),
        }
        Ok(Self { requirements })
    }
}

fn expression(input: &str, e: &Value) -> Result<Requirement, SelectorError> {
    let key = e
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(input, "matchExpressions entry needs a string key"))?;
    validate_key(input, key)?;
    let op = e.get("operator").and_then(Value::as_str).ok_or_else(|| {
        invalid(
            input,
            format!("matchExpressions entry {key:?} needs an operator"),
        )
    })?;
    let values: Vec<String> = match e.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vs)) => vs
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(input, format!("values of {key:?} must be strings")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(invalid(
                input,
                format!("values of {key:?} must be an array"),
            ));
        }
    };
    let op = match op {
        "In" | "NotIn" => {
            if values.is_empty() {
                return Err(invalid(
                    input,
                    format!("operator {op} on {key:?} needs values"),
                ));
            }
            for v in &values {
                validate_value(input, v)?;
            }
            if op == "In" {
                Op::In(values)
            } else {
                Op::NotIn(values)
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return Err(invalid(
                    input,
                    format!("operator {op} on {key:?} takes no values"),
                ));
            }
            if op == "Exists" {
                Op::Exists
            } else {
                Op::DoesNotExist
            }
        }
        other => {
            return Err(invalid(
                input,
                format!("unknown operator {other:?} on {key:?}"),
            ));
        }
    };
    Ok(Requirement {
        key: key.to_string(),
        op,
    })
}

/// The string labels of an object; non-string values are ignored.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}
