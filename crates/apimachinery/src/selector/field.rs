//! [`FieldSelector`]: `--field-selector` text, matched against an object's fields.

use serde_json::Value;

use super::error::{SelectorError, invalid};

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    field: String,
    value: String,
    negate: bool,
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// Splits on unescaped `sep`, keeping escapes in place for later decoding.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    parts.push(cur);
    parts
}

fn unescape_field_value(input: &str, v: &str) -> Result<String, SelectorError> {
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=' | '!')) => out.push(e),
                Some(e) => return Err(invalid(input, format!("invalid escape sequence \\{e}"))),
                None => return Err(invalid(input, "trailing backslash")),
            }
        } else if matches!(c, ',' | '=') {
            return Err(invalid(input, format!("unescaped {c:?} in value {v:?}")));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses `field=value,field!=value` (also `==`); blank selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        for part in split_unescaped(s, ',') {
            let (field, rest, negate) = if let Some(i) = part.find("!=") {
                (&part[..i], &part[i + 2..], true)
            } else if let Some(i) = part.find("==") {
                (&part[..i], &part[i + 2..], false)
            } else if let Some(i) = part.find('=') {
                (&part[..i], &part[i + 1..], false)
            } else {
                return Err(invalid(
                    s,
                    format!("{part:?} is not a field=value, field==value or field!=value term"),
                ));
            };
            let field = field.trim();
            if field.is_empty()
                || !field
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
            {
                return Err(invalid(s, format!("invalid field name {field:?}")));
            }
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value: unescape_field_value(s, rest.trim())?,
                negate,
            });
        }
        Ok(Self { requirements })
    }

    /// Evaluates against the object's fields; a missing field reads as "".
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = field_value(obj, &r.field);
            (actual == r.value) != r.negate
        })
    }

    /// The field labels used, so the server can reject unsupported ones.
    pub fn fields(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.requirements {
            if !out.contains(&r.field) {
                out.push(r.field.clone());
            }
        }
        out
    }

    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The value required by a plain `field=value` term, if any (lets the
    /// server narrow lookups such as `metadata.name=x`).
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && !r.negate)
            .map(|r| r.value.as_str())
    }
}

/// Reads a dotted path as the string the apiserver's field sets would hold.
fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}
