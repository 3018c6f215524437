//! Compiling a whole schema: its root node, then the checks that need
//! the whole tree, then (once it is sound) the cost of its rules.

use serde_json::Value;

use super::checks::{check_defaults, check_root_metadata};
use super::context::{Ctx, Place};
use super::keywords::compile_node;
use crate::cost::check_static;
use crate::error::{FieldError, Reason};
use crate::node::{Node, ROOT_PATH, Type};
use crate::regexes::{Literals, Table};
use crate::wording::quote;

/// The compiled schema, and the literal patterns of its rules. `enforce`:
/// whether static cost limits apply (`CostLimits::Enforce`).
pub(crate) fn compile_root(
    schema: &Value,
    env: &cel::Env,
    enforce: bool,
) -> Result<(Node, Table), Vec<FieldError>> {
    let mut ctx = Ctx {
        env,
        errs: Vec::new(),
        literals: Literals::new(enforce),
    };
    let node = compile_node(&mut ctx, schema, ROOT_PATH, Place::Root, 0, true);
    if let Some(node) = &node {
        if node.ty != Some(Type::Object) && ctx.errs.is_empty() {
            let got = node.ty.map(Type::as_str).unwrap_or("");
            ctx.err(
                format!("{ROOT_PATH}.type"),
                Reason::FieldValueInvalid,
                format!("Invalid value: {}: must be object at the root", quote(got)),
            );
        }
        check_root_metadata(&mut ctx, schema);
        check_defaults(&mut ctx, node, ROOT_PATH);
        // Rule costs are estimated once the schema is sound: they need
        // every rule compiled.
        if enforce && ctx.errs.is_empty() {
            ctx.errs = check_static(node, &ctx.literals.table);
        }
    }
    match node {
        Some(node) if ctx.errs.is_empty() => Ok((node, ctx.literals.table)),
        _ => Err(ctx.errs),
    }
}
