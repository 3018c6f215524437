//! Rule sources into programs: parsed within bounds on size and depth,
//! then rewritten into the expressions that run. Also the walks over an
//! expression tree that compiling a rule needs.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::{Env, Program};

use super::k8s::MATCHES;

/// Longest rule or message expression accepted, in bytes; cel-go allows
/// 100k code points, far beyond any real rule.
const MAX_SOURCE_LEN: usize = 100_000;

/// Deepest expression accepted, cel-go's default parser recursion limit.
/// It bounds the interpreter's recursion when the rule runs.
const MAX_EXPR_DEPTH: usize = 250;

pub(super) fn parse(env: &Env, src: &str) -> Result<Program, String> {
    if src.len() > MAX_SOURCE_LEN {
        return Err(format!(
            "ERROR: expression code point size exceeds limit: size: {}, limit {MAX_SOURCE_LEN}",
            src.chars().count()
        ));
    }
    // Brackets nest the parser's own recursion; refuse what would nest
    // deeper than the expression may before handing it over.
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for c in src.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_EXPR_DEPTH {
        return Err(format!(
            "ERROR: max recursion depth exceeded: {MAX_EXPR_DEPTH}"
        ));
    }
    let program = match catch_unwind(AssertUnwindSafe(|| env.compile(src))) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("ERROR: the expression could not be parsed".to_string()),
    };
    if expr_depth(program.expression(), 0) > MAX_EXPR_DEPTH {
        return Err(format!(
            "ERROR: max recursion depth exceeded: {MAX_EXPR_DEPTH}"
        ));
    }
    Ok(program)
}

/// The depth of an expression tree, counted up to just past the limit.
fn expr_depth(e: &IdedExpr, at: usize) -> usize {
    if at > MAX_EXPR_DEPTH {
        return at;
    }
    let next = at + 1;
    let deepest = |items: &mut dyn Iterator<Item = &IdedExpr>| {
        items.map(|c| expr_depth(c, next)).max().unwrap_or(next)
    };
    match &e.expr {
        Expr::Call(call) => deepest(&mut call.target.as_deref().into_iter().chain(&call.args)),
        Expr::Comprehension(c) => deepest(
            &mut [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter(),
        ),
        Expr::List(l) => deepest(&mut l.elements.iter()),
        Expr::Map(m) => deepest(&mut m.entries.iter().flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
            EntryExpr::StructField(sf) => vec![&sf.value],
        })),
        Expr::Struct(s) => deepest(&mut s.entries.iter().flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
            EntryExpr::StructField(sf) => vec![&sf.value],
        })),
        Expr::Select(s) => expr_depth(&s.operand, next),
        _ => next,
    }
}

/// The direct subexpressions of `e`.
pub(super) fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m.entries.iter().flat_map(entry_children).collect(),
        Expr::Struct(s) => s.entries.iter().flat_map(entry_children).collect(),
        Expr::Select(s) => vec![&s.operand],
        _ => Vec::new(),
    }
}

fn entry_children(entry: &cel::common::ast::IdedEntryExpr) -> Vec<&IdedExpr> {
    match &entry.expr {
        EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
        EntryExpr::StructField(sf) => vec![&sf.value],
    }
}

/// Calls taking a regular expression as their second parameter (after
/// the receiver).
fn regex_function(name: &str) -> bool {
    matches!(name, "matches" | "find" | "findAll")
}

/// The patterns given as string literals to `matches`, `find`, `findAll`.
pub(super) fn literal_patterns<'e>(e: &'e IdedExpr, out: &mut Vec<&'e str>) {
    if let Expr::Call(call) = &e.expr
        && regex_function(&call.func_name)
    {
        let pattern = if call.target.is_some() {
            call.args.first()
        } else {
            call.args.get(1)
        };
        if let Some(IdedExpr {
            expr: Expr::Literal(LiteralValue::String(p)),
            ..
        }) = pattern
        {
            out.push(p.inner());
        }
    }
    for c in children(e) {
        literal_patterns(c, out);
    }
}
/// `program`'s expression as it is run: `matches` renamed to [`MATCHES`].
pub(super) fn runnable(program: &Program) -> IdedExpr {
    fn rename(e: &mut IdedExpr) {
        match &mut e.expr {
            Expr::Call(call) => {
                let arity = call.args.len() + usize::from(call.target.is_some());
                if call.func_name == "matches" && arity == 2 {
                    call.func_name = MATCHES.to_string();
                }
                if let Some(t) = call.target.as_deref_mut() {
                    rename(t);
                }
                call.args.iter_mut().for_each(rename);
            }
            Expr::Comprehension(c) => {
                rename(&mut c.iter_range);
                rename(&mut c.accu_init);
                rename(&mut c.loop_cond);
                rename(&mut c.loop_step);
                rename(&mut c.result);
            }
            Expr::List(l) => l.elements.iter_mut().for_each(rename),
            Expr::Map(m) => m.entries.iter_mut().for_each(rename_entry),
            Expr::Struct(s) => s.entries.iter_mut().for_each(rename_entry),
            Expr::Select(s) => rename(&mut s.operand),
            _ => {}
        }
    }
    fn rename_entry(entry: &mut cel::common::ast::IdedEntryExpr) {
        match &mut entry.expr {
            EntryExpr::MapEntry(me) => {
                rename(&mut me.key);
                rename(&mut me.value);
            }
            EntryExpr::StructField(sf) => rename(&mut sf.value),
        }
    }
    let mut e = program.expression().clone();
    rename(&mut e);
    e
}
