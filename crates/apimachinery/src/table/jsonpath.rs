//! The JSONPath subset printer columns use, evaluated against an object.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    Filter {
        lhs: Vec<Step>,
        op: Option<(bool, Value)>,
    },
}

/// Splits `s` at the first top-level `]` (outside quotes).
fn bracket_end(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<String> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() >= 2 && (b[0] == b'\'' || b[0] == b'"') && b[b.len() - 1] == b[0] {
        Some(s[1..s.len() - 1].to_string())
    } else {
        None
    }
}

fn parse_steps(mut s: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    s = s.strip_prefix('$').unwrap_or(s);
    while !s.is_empty() {
        if let Some(rest) = s.strip_prefix('.') {
            if rest.starts_with('.') {
                // Recursive descent is outside the printer-column subset.
                return None;
            }
            let mut name = String::new();
            let mut end = rest.len();
            let mut chars = rest.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            name.push(e);
                        }
                    }
                    '.' | '[' => {
                        end = i;
                        break;
                    }
                    _ => name.push(c),
                }
            }
            if name == "*" {
                steps.push(Step::Wildcard);
            } else if !name.is_empty() {
                steps.push(Step::Field(name));
            }
            s = &rest[end..];
        } else if let Some(rest) = s.strip_prefix('[') {
            let end = bracket_end(rest)?;
            let inner = rest[..end].trim();
            s = &rest[end + 1..];
            if inner == "*" {
                steps.push(Step::Wildcard);
            } else if let Some(f) = unquote(inner) {
                steps.push(Step::Field(f));
            } else if let Ok(i) = inner.parse::<i64>() {
                steps.push(Step::Index(i));
            } else if let Some(expr) = inner.strip_prefix("?(").and_then(|e| e.strip_suffix(')')) {
                steps.push(parse_filter(expr.trim())?);
            } else {
                return None;
            }
        } else {
            // A bare leading name, as in "metadata.name".
            let end = s.find(['.', '[']).unwrap_or(s.len());
            steps.push(Step::Field(s[..end].to_string()));
            s = &s[end..];
        }
    }
    Some(steps)
}

fn parse_filter(expr: &str) -> Option<Step> {
    let (lhs, op) = if let Some(i) = expr.find("==") {
        (&expr[..i], Some((false, &expr[i + 2..])))
    } else if let Some(i) = expr.find("!=") {
        (&expr[..i], Some((true, &expr[i + 2..])))
    } else {
        (expr, None)
    };
    let lhs = lhs.trim().strip_prefix('@')?;
    let lhs = parse_steps(lhs)?;
    let op = match op {
        None => None,
        Some((neg, rhs)) => {
            let rhs = rhs.trim();
            let value = match unquote(rhs) {
                Some(s) => Value::String(s),
                None => serde_json::from_str(rhs).ok()?,
            };
            Some((neg, value))
        }
    };
    Some(Step::Filter { lhs, op })
}

fn eval<'a>(cur: Vec<&'a Value>, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = cur;
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => next.extend(v.get(f.as_str())),
                Step::Index(i) => {
                    if let Value::Array(a) = v {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        if let Ok(idx) = usize::try_from(idx) {
                            next.extend(a.get(idx));
                        }
                    }
                }
                Step::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { lhs, op } => {
                    let items: Vec<&Value> = match v {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    for item in items {
                        let got = eval(vec![item], lhs);
                        let keep = match op {
                            None => !got.is_empty(),
                            Some((neg, want)) => got.contains(&want) != *neg,
                        };
                        if keep {
                            next.push(item);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

/// Evaluates the simple JSONPath subset used by printer columns and returns
/// the first match: `.a.b`, `['key']`, `[0]`, `[*]`, `[?(@.type=="Ready")]`,
/// optionally wrapped in `{}`. Unsupported syntax yields `None`.
pub fn jsonpath_get(obj: &Value, path: &str) -> Option<Value> {
    let mut p = path.trim();
    if let Some(inner) = p.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        p = inner.trim();
    }
    if p.is_empty() {
        return Some(obj.clone());
    }
    let steps = parse_steps(p)?;
    eval(vec![obj], &steps).first().map(|v| (*v).clone())
}
