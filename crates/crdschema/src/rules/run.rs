//! Running one compiled expression on a value, contained: a panic inside
//! cel becomes an error, and errors are worded as cel-go words them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::Context;
use cel::common::ast::IdedExpr;
use cel::objects::OptionalValue;

use crate::node::Rule;

pub(super) fn run(
    root: &Context,
    program: &IdedExpr,
    self_val: &cel::Value,
    old_val: Option<&cel::Value>,
    rule: &Rule,
) -> Result<cel::Value, String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_from_value("self", self_val.clone());
        if rule.optional_old_self {
            let opt = match old_val {
                Some(o) => OptionalValue::of(o.clone()),
                None => OptionalValue::none(),
            };
            ctx.add_variable_from_value("oldSelf", cel::Value::Opaque(Arc::new(opt)));
        } else if let Some(o) = old_val {
            ctx.add_variable_from_value("oldSelf", o.clone());
        }
        ctx.resolve(program).map_err(|e| eval_error_text(&e))
    }));
    outcome.unwrap_or_else(|_| Err("internal error while evaluating the rule".to_string()))
}

/// The evaluation error as cel-go, and so kube-apiserver, words the common
/// ones; others keep cel's own wording.
fn eval_error_text(e: &cel::ExecutionError) -> String {
    use cel::ExecutionError as E;
    match e {
        E::NoSuchKey(k) => format!("no such key: {k}"),
        E::DivisionByZero(_) => "division by zero".to_string(),
        E::RemainderByZero(_) => "modulus by zero".to_string(),
        E::Overflow(..) => "integer overflow".to_string(),
        E::IndexOutOfBounds(i) => match i {
            cel::Value::Int(i) => format!("index out of bounds: {i}"),
            cel::Value::UInt(i) => format!("index out of bounds: {i}"),
            _ => "index out of bounds".to_string(),
        },
        E::NoSuchOverload(_) => "no such overload".to_string(),
        other => other.to_string(),
    }
}
