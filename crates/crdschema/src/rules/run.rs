//! Running one compiled expression on a value, contained: a panic inside
//! cel becomes an error, and errors are worded as cel-go words them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::Context;
use cel::common::ast::IdedExpr;
use cel::objects::OptionalValue;

use serde_json::Value;

use super::to_cel::node_value;
use crate::node::{Node, Rule};

/// A node's value (and its old value) bound as `self` and `oldSelf` for
/// the node's rules: converted and bound once, when the first rule runs,
/// for all of them. Binding converts the value deeply again (cel 0.15), so
/// doing it per rule cost more than most rules; a node whose rules all
/// skip (ratcheting) converts nothing.
pub(super) struct Scopes<'c, 'j> {
    root: &'c Context<'static, 'static>,
    node: &'j Node,
    value: &'j Value,
    old: Option<&'j Value>,
    at_root: bool,
    converted: Option<(cel::Value, Option<cel::Value>)>,
    /// `oldSelf` bound as the value itself, or as an optional for rules
    /// with `optionalOldSelf`.
    plain: Option<Context<'c, 'static>>,
    optional: Option<Context<'c, 'static>>,
}

impl<'c, 'j> Scopes<'c, 'j> {
    pub(super) fn new(
        root: &'c Context<'static, 'static>,
        node: &'j Node,
        value: &'j Value,
        old: Option<&'j Value>,
        at_root: bool,
    ) -> Self {
        Scopes {
            root,
            node,
            value,
            old,
            at_root,
            converted: None,
            plain: None,
            optional: None,
        }
    }

    pub(super) fn has_old(&self) -> bool {
        self.old.is_some()
    }

    /// Runs one compiled expression of `rule`, contained.
    pub(super) fn run(&mut self, program: &IdedExpr, rule: &Rule) -> Result<cel::Value, String> {
        let optional = rule.optional_old_self;
        let Scopes {
            root,
            node,
            value,
            old,
            at_root,
            converted,
            plain,
            optional: optional_scope,
        } = self;
        let slot = if optional { optional_scope } else { plain };
        if slot.is_none() {
            let bound = catch_unwind(AssertUnwindSafe(|| {
                let (self_val, old_val) = converted.get_or_insert_with(|| {
                    let reads = &node.rule_reads;
                    (
                        node_value(value, node, *at_root, reads),
                        old.map(|o| node_value(o, node, *at_root, reads)),
                    )
                });
                let mut ctx = root.new_inner_scope();
                ctx.add_variable_from_value("self", self_val.clone());
                if optional {
                    let opt = match old_val {
                        Some(o) => OptionalValue::of(o.clone()),
                        None => OptionalValue::none(),
                    };
                    ctx.add_variable_from_value("oldSelf", cel::Value::Opaque(Arc::new(opt)));
                } else if let Some(o) = old_val {
                    ctx.add_variable_from_value("oldSelf", o.clone());
                }
                ctx
            }));
            *slot = Some(bound.map_err(|_| internal())?);
        }
        let Some(ctx) = slot.as_ref() else {
            return Err(internal());
        };
        catch_unwind(AssertUnwindSafe(|| {
            ctx.resolve(program).map_err(|e| eval_error_text(&e))
        }))
        .unwrap_or_else(|_| Err(internal()))
    }
}

fn internal() -> String {
    "internal error while evaluating the rule".to_string()
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
