//! Label and field selectors (kubectl `-l` / `--field-selector` syntax).
//!
//! Label selectors follow `k8s.io/apimachinery/pkg/labels`: comma-separated
//! requirements `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
//! plus `a>1` / `a<1`. Field selectors support `=`, `==` and `!=` on dotted
//! JSON paths, with `\` escaping `,`, `=`, `!` and `\` in values.

use std::collections::BTreeMap;

use serde_json::Value;

/// Errors from parsing a selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid selector {input:?}: {reason}")]
    Invalid { input: String, reason: String },
}

fn invalid(input: &str, reason: impl Into<String>) -> SelectorError {
    SelectorError::Invalid {
        input: input.to_string(),
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
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
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
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

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// Validates a label key: optional DNS-subdomain prefix, then a name of at
/// most 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn validate_key(input: &str, key: &str) -> Result<(), SelectorError> {
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

fn validate_value(input: &str, v: &str) -> Result<(), SelectorError> {
    if is_label_value(v) {
        Ok(())
    } else {
        Err(invalid(input, format!("invalid label value {v:?}")))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Comma,
    Open,
    Close,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    In,
    NotIn,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Tok::Ident(w) => return write!(f, "{w:?}"),
            Tok::Comma => "','",
            Tok::Open => "'('",
            Tok::Close => "')'",
            Tok::Not => "'!'",
            Tok::Eq => "'='",
            Tok::DoubleEq => "'=='",
            Tok::NotEq => "'!='",
            Tok::Gt => "'>'",
            Tok::Lt => "'<'",
            Tok::In => "'in'",
            Tok::NotIn => "'notin'",
        };
        f.write_str(s)
    }
}

/// Names a token, or the end of the input, for error messages.
fn show(t: Option<&Tok>) -> String {
    t.map_or_else(|| "end of input".to_string(), Tok::to_string)
}

fn is_ident_char(c: char) -> bool {
    !c.is_whitespace() && !matches!(c, ',' | '(' | ')' | '!' | '=' | '<' | '>')
}

fn tokenize(input: &str) -> Result<Vec<Tok>, SelectorError> {
    let mut out = Vec::new();
    let chars: Vec<char> = input.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            ',' => {
                out.push(Tok::Comma);
                i += 1
            }
            '(' => {
                out.push(Tok::Open);
                i += 1
            }
            ')' => {
                out.push(Tok::Close);
                i += 1
            }
            '>' => {
                out.push(Tok::Gt);
                i += 1
            }
            '<' => {
                out.push(Tok::Lt);
                i += 1
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::NotEq);
                i += 2
            }
            '!' => {
                out.push(Tok::Not);
                i += 1
            }
            '=' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::DoubleEq);
                i += 2
            }
            '=' => {
                out.push(Tok::Eq);
                i += 1
            }
            _ => {
                let start = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push(match word.as_str() {
                    "in" => Tok::In,
                    "notin" => Tok::NotIn,
                    _ => Tok::Ident(word),
                });
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    input: &'a str,
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn err(&self, reason: impl Into<String>) -> SelectorError {
        invalid(self.input, reason)
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let negated = if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Some(Tok::Ident(k)) => k,
            // "in"/"notin" are legal key names when used as such.
            Some(Tok::In) => "in".to_string(),
            Some(Tok::NotIn) => "notin".to_string(),
            other => {
                return Err(self.err(format!(
                    "expected a label key, found {}",
                    show(other.as_ref())
                )));
            }
        };
        validate_key(self.input, &key)?;
        if negated {
            return match self.peek() {
                None | Some(Tok::Comma) => Ok(Requirement {
                    key,
                    op: Op::DoesNotExist,
                }),
                Some(t) => Err(self.err(format!("unexpected {t} after !{key}"))),
            };
        }
        let op = match self.peek() {
            None | Some(Tok::Comma) => {
                return Ok(Requirement {
                    key,
                    op: Op::Exists,
                });
            }
            Some(_) => self.next().unwrap_or(Tok::Comma),
        };
        let op = match op {
            Tok::Eq | Tok::DoubleEq => Op::Equals(self.single_value()?),
            Tok::NotEq => Op::NotEquals(self.single_value()?),
            Tok::In => Op::In(self.value_set(&key)?),
            Tok::NotIn => Op::NotIn(self.value_set(&key)?),
            Tok::Gt | Tok::Lt => {
                let v = self.single_value()?;
                let n: i64 = v
                    .parse()
                    .map_err(|_| self.err(format!("value {v:?} for {key} must be an integer")))?;
                if op == Tok::Gt { Op::Gt(n) } else { Op::Lt(n) }
            }
            t => return Err(self.err(format!("expected an operator after {key}, found {t}"))),
        };
        Ok(Requirement { key, op })
    }

    /// A value after `=`/`!=`; may be empty (`a=`).
    fn single_value(&mut self) -> Result<String, SelectorError> {
        let v = match self.peek() {
            None | Some(Tok::Comma) => String::new(),
            Some(Tok::Ident(_)) | Some(Tok::In) | Some(Tok::NotIn) => match self.next() {
                Some(Tok::Ident(v)) => v,
                Some(Tok::In) => "in".into(),
                _ => "notin".into(),
            },
            Some(t) => return Err(self.err(format!("expected a value, found {t}"))),
        };
        validate_value(self.input, &v)?;
        Ok(v)
    }

    fn value_set(&mut self, key: &str) -> Result<Vec<String>, SelectorError> {
        if self.next() != Some(Tok::Open) {
            return Err(self.err(format!("expected '(' after set operator for {key}")));
        }
        let mut vals = Vec::new();
        loop {
            match self.next() {
                Some(Tok::Ident(v)) => {
                    validate_value(self.input, &v)?;
                    vals.push(v);
                }
                Some(Tok::In) => vals.push("in".into()),
                Some(Tok::NotIn) => vals.push("notin".into()),
                // An empty value between commas, e.g. "(a,,b)" or "(a,)".
                Some(Tok::Comma) => {
                    vals.push(String::new());
                    continue;
                }
                Some(Tok::Close) => break,
                other => {
                    return Err(self.err(format!(
                        "unexpected {} in value set for {key}",
                        show(other.as_ref())
                    )));
                }
            }
            match self.next() {
                Some(Tok::Comma) => {
                    if self.peek() == Some(&Tok::Close) {
                        vals.push(String::new());
                    }
                }
                Some(Tok::Close) => break,
                other => {
                    return Err(self.err(format!(
                        "expected ',' or ')' in value set for {key}, found {}",
                        show(other.as_ref())
                    )));
                }
            }
        }
        if vals.is_empty() {
            return Err(self.err(format!("values set for {key} can't be empty")));
        }
        Ok(vals)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

    #[test]
    fn label_selector_table() {
        let cases: &[Case] = &[
            ("", &[], true),
            ("  ", &[("a", "b")], true),
            ("a=b", &[("a", "b")], true),
            ("a==b", &[("a", "b")], true),
            ("a=b", &[("a", "c")], false),
            ("a=b", &[], false),
            ("a!=b", &[], true),
            ("a!=b", &[("a", "b")], false),
            ("a!=b", &[("a", "c")], true),
            ("a in (x,y)", &[("a", "y")], true),
            ("a in (x, y)", &[("a", "z")], false),
            ("a in (x)", &[], false),
            ("a notin (x)", &[], true),
            ("a notin (x)", &[("a", "x")], false),
            ("a", &[("a", "")], true),
            ("a", &[], false),
            ("!a", &[], true),
            ("!a", &[("a", "1")], false),
            (
                "a=b,c!=d,e in (x,y),f notin (z),g,!h",
                &[("a", "b"), ("e", "x"), ("g", "1")],
                true,
            ),
            (
                "a=b,c!=d,e in (x,y),f notin (z),g,!h",
                &[("a", "b"), ("e", "x"), ("g", "1"), ("h", "")],
                false,
            ),
            (
                "app.kubernetes.io/name=web",
                &[("app.kubernetes.io/name", "web")],
                true,
            ),
            ("a=", &[("a", "")], true),
            ("a>3", &[("a", "4")], true),
            ("a<3", &[("a", "4")], false),
            ("a>3", &[("a", "x")], false),
        ];
        for (sel, l, want) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&labels(l)), *want, "selector {sel:?} on {l:?}");
        }
    }

    #[test]
    fn label_selector_errors() {
        for bad in [
            "a=b,",
            ",a",
            "a in x",
            "a in ()",
            "a in (x",
            "a=b c",
            "!a=b",
            "-a=b",
            "a=b-",
            "a in (x y)",
            "a>b",
            "Prefix_Bad/a=b",
            "(",
        ] {
            let err = LabelSelector::parse(bad);
            assert!(err.is_err(), "{bad:?} should fail, got {err:?}");
            let msg = err.unwrap_err().to_string();
            assert!(
                msg.contains(&format!("{bad:?}")),
                "error should name the input: {msg}"
            );
        }
    }

    #[test]
    fn label_selector_error_messages_are_readable() {
        let msg = LabelSelector::parse("a in (").unwrap_err().to_string();
        assert_eq!(
            msg,
            "invalid selector \"a in (\": unexpected end of input in value set for a"
        );
        let msg = LabelSelector::parse("a=b )").unwrap_err().to_string();
        assert!(msg.ends_with("unexpected ')'"), "{msg}");
    }

    #[test]
    fn label_selector_from_json() {
        let s = LabelSelector::from_label_selector_json(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a"), ("legacy", "1")])));
        assert!(
            LabelSelector::from_label_selector_json(&json!({}))
                .unwrap()
                .is_empty()
        );
        assert!(
            LabelSelector::from_label_selector_json(&Value::Null)
                .unwrap()
                .is_empty()
        );
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Gte", "values": ["x"]}]}),
            json!({"matchLabels": {"a": 1}}),
            json!([1]),
        ] {
            assert!(
                LabelSelector::from_label_selector_json(&bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn matches_object_labels() {
        let s = LabelSelector::parse("app=web").unwrap();
        assert!(s.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
        assert!(!s.matches_object(&json!({"metadata": {}})));
        assert!(!s.matches_object(&json!("garbage")));
    }

    #[test]
    fn field_selector_table() {
        let obj = json!({
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": {"online": true, "count": 3},
            "type": "Opaque"
        });
        let cases = [
            ("", true),
            ("metadata.name=x", true),
            ("metadata.name==x", true),
            ("metadata.name=y", false),
            ("metadata.name=x,metadata.namespace!=y", true),
            ("metadata.name=x,metadata.namespace!=ns", false),
            ("spec.online=true", true),
            ("spec.count=3", true),
            ("spec.missing=", true),
            ("spec.missing!=", false),
            ("type=Opaque", true),
        ];
        for (sel, want) in cases {
            let s = FieldSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&obj), want, "{sel}");
        }
        let s = FieldSelector::parse("metadata.name=a\\,b").unwrap();
        assert!(s.matches(&json!({"metadata": {"name": "a,b"}})));
        assert_eq!(
            FieldSelector::parse("metadata.name=x,spec.a!=b,metadata.name!=z")
                .unwrap()
                .fields(),
            vec!["metadata.name".to_string(), "spec.a".to_string()]
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=x")
                .unwrap()
                .required_value("metadata.name"),
            Some("x")
        );
    }

    #[test]
    fn field_selector_errors() {
        for bad in ["metadata.name", "=x", "a=b=c", "a=b\\", "a=\\q", "a b=c"] {
            let e = FieldSelector::parse(bad);
            assert!(e.is_err(), "{bad:?} should fail: {e:?}");
            assert!(e.unwrap_err().to_string().contains(&format!("{bad:?}")));
        }
    }
}
