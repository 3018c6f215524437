//! What a node's rules read of `self` and `oldSelf`, so that only that is
//! converted for them: a host's root rules read its name, parts of its spec
//! and its provisioning state, never the rest of its status, which is most
//! of the object.

use std::collections::BTreeMap;

use cel::common::ast::{Expr, IdedExpr};

use super::parse::children;
use crate::node::{Reads, Rule};

impl Reads {
    fn merge(&mut self, other: Reads) {
        match (&mut *self, other) {
            (Reads::Whole, _) | (_, Reads::Presence) => {}
            (Reads::Fields(mine), Reads::Fields(theirs)) => {
                for (k, v) in theirs {
                    match mine.get_mut(&k) {
                        Some(m) => m.merge(v),
                        None => {
                            mine.insert(k, v);
                        }
                    }
                }
            }
            (me, other) => *me = other,
        }
    }

    /// `self` after reading `read` at `path` below it.
    fn add(&mut self, path: &[&str], read: Reads) {
        let whole = path.iter().rev().fold(read, |inner, f| {
            Reads::Fields(BTreeMap::from([(f.to_string(), inner)]))
        });
        self.merge(whole);
    }
}

/// What `rules` (and their message expressions) read of `self` and
/// `oldSelf`, both taken alike. Field selections are followed; any other
/// use of a value (`self == oldSelf`, `size(self.x)`, `self.all(...)`,
/// `oldSelf.value()`) reads it whole.
///
/// A comprehension variable that shadows `self` only makes the answer
/// larger, never smaller than what is read.
pub(crate) fn rule_reads(rules: &[Rule]) -> Reads {
    let mut out = Reads::Presence;
    for rule in rules {
        let exprs =
            std::iter::once(&rule.expr).chain(rule.message_expression.as_ref().map(|m| &m.1));
        for e in exprs {
            visit(e, &mut out);
            if out == Reads::Whole {
                return out;
            }
        }
    }
    out
}

/// The fields selected below `self`/`oldSelf` in a chain of selections
/// ending at `e`, outermost last; `None` if the chain starts elsewhere.
fn bound_path(e: &IdedExpr) -> Option<Vec<&str>> {
    match &e.expr {
        Expr::Ident(name) if name == "self" || name == "oldSelf" => Some(Vec::new()),
        Expr::Select(s) if !s.test => {
            let mut path = bound_path(&s.operand)?;
            path.push(&s.field);
            Some(path)
        }
        _ => None,
    }
}

fn visit(e: &IdedExpr, out: &mut Reads) {
    if let Some(path) = bound_path(e) {
        return out.add(&path, Reads::Whole);
    }
    if let Expr::Select(s) = &e.expr
        && s.test
        && let Some(mut path) = bound_path(&s.operand)
    {
        path.push(&s.field);
        return out.add(&path, Reads::Presence);
    }
    for child in children(e) {
        visit(child, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads_of(sources: &[&str]) -> Reads {
        let env = crate::rules::env();
        let rules: Vec<Rule> = sources
            .iter()
            .map(|src| Rule {
                source: src.to_string(),
                expr: env.compile(src).expect("compiles").expression().clone(),
                message: None,
                message_expression: None,
                field_path: Vec::new(),
                reason: crate::error::Reason::FieldValueInvalid,
                optional_old_self: false,
                transition: false,
            })
            .collect();
        rule_reads(&rules)
    }

    fn fields(pairs: &[(&str, Reads)]) -> Reads {
        Reads::Fields(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn selections_are_followed_and_other_uses_read_whole() {
        use Reads::{Presence, Whole};
        let cases: &[(&[&str], Reads)] = &[
            (&["self.a == 1"], fields(&[("a", Whole)])),
            (
                &["self.a.b == oldSelf.c"],
                fields(&[("a", fields(&[("b", Whole)])), ("c", Whole)]),
            ),
            (
                &["!has(self.a.b) || self.a.c > 1"],
                fields(&[("a", fields(&[("b", Presence), ("c", Whole)]))]),
            ),
            (
                &["has(self.a)", "self.a.b == 1"],
                fields(&[("a", fields(&[("b", Whole)]))]),
            ),
            (
                &["self.a.b == 1", "size(self.a) > 0"],
                fields(&[("a", Whole)]),
            ),
            (&["self == oldSelf"], Whole),
            (&["self.all(k, k != '')"], Whole),
            (&["self.a.all(x, x > 0)"], fields(&[("a", Whole)])),
            (&["1 == 1"], Presence),
            (&["[1].all(self, self > 0)"], Whole),
        ];
        for (sources, want) in cases {
            assert_eq!(&reads_of(sources), want, "{sources:?}");
        }
    }
}
