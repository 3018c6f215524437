//! The kubectl `-l` text: tokens, and a parser reading one requirement at a time.

use super::error::{SelectorError, invalid};
use super::requirement::{Op, Requirement, validate_key, validate_value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
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

pub(super) fn tokenize(input: &str) -> Result<Vec<Tok>, SelectorError> {
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

pub(super) struct Parser<'a> {
    pub(super) input: &'a str,
    pub(super) toks: Vec<Tok>,
    pub(super) pos: usize,
}

impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    pub(super) fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn err(&self, reason: impl Into<String>) -> SelectorError {
        invalid(self.input, reason)
    }

    pub(super) fn requirement(&mut self) -> Result<Requirement, SelectorError> {
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
            Some(Tok::Ident(_) | Tok::In | Tok::NotIn) => match self.next() {
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
