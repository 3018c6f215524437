//! Evaluating the rules of a schema against an object: a walk over the
//! object, running each node's rules on its values under the object's
//! cost budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cel::common::ast::IdedExpr;
use cel::{Context, Env};
use serde_json::Value;

use super::k8s::{lock, root_context};
use super::run::Scopes;
use super::to_cel::MAX_DEPTH;
use crate::cost::{self, Sizes, Stats};
use crate::error::{FieldError, Reason};
use crate::limits::{PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET};
use crate::node::{Additional, Node, Rule, Type};
use crate::path::Path;
use crate::regexes::{Meter, Table};
use crate::value::{correlate, json_eq, type_matches};
use crate::wording::quote;

pub(crate) fn validate_root(
    n: &Node,
    env: &Arc<Env>,
    literals: &Arc<Table>,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    if !n.has_rules() {
        return Vec::new();
    }
    let meter = Arc::new(Mutex::new(Meter::new(Arc::clone(literals))));
    let ctx = root_context(env, &meter);
    let mut walker = Walker {
        meter,
        literals,
        root: n,
        obj,
        old,
        stats: None,
        costs: HashMap::new(),
        remaining: RUNTIME_CEL_COST_BUDGET,
        stopped: false,
        errs: Vec::new(),
    };
    walker.walk(&ctx, n, obj, old, &Path::default(), 0);
    walker.errs
}

/// One validation's walk over the object, with its cost budget.
struct Walker<'a> {
    meter: Arc<Mutex<Meter>>,
    literals: &'a Table,
    root: &'a Node,
    obj: &'a Value,
    old: Option<&'a Value>,
    /// The largest values the object holds at each node, for estimates;
    /// gathered when the first rule runs (on most updates none does).
    stats: Option<Stats>,
    /// Estimated costs of each rule (and its message expression) for this
    /// object, by the rule's address.
    costs: HashMap<usize, (u64, u64)>,
    /// What is left of [`RUNTIME_CEL_COST_BUDGET`].
    remaining: u64,
    /// Set once the budget is exhausted: no further rule runs.
    stopped: bool,
    errs: Vec<FieldError>,
}

/// Why an evaluation was not allowed to (finish to) run.
enum OverBudget {
    /// Over [`PER_CALL_LIMIT`].
    Call,
    /// Over what is left of the object's budget.
    Object,
}
impl Walker<'_> {
    fn walk(
        &mut self,
        ctx: &Context<'static, 'static>,
        n: &Node,
        v: &Value,
        old: Option<&Value>,
        path: &Path,
        depth: usize,
    ) {
        // Values of the wrong type were reported by OpenAPI validation
        // already; rules written for the declared type would only add noise.
        if self.stopped || depth > MAX_DEPTH || !type_matches(n, v) || v.is_null() {
            return;
        }
        if !n.rules.is_empty() {
            let root = depth == 0;
            let old_val = old.filter(|o| type_matches(n, o) && !o.is_null());
            let mut scopes = Scopes::new(ctx, n, v, old_val, root);
            // Ratcheting: a value left as it was is not held to rules added
            // or tightened since; transition rules still run, they compare.
            let unchanged = old.is_some_and(|o| json_eq(o, v));
            for rule in &n.rules {
                if self.stopped {
                    return;
                }
                if unchanged && !rule.transition {
                    continue;
                }
                self.eval_rule(n, rule, root, &mut scopes, path);
            }
        }
        if !n.rules_below {
            return;
        }
        match v {
            Value::Object(obj) => {
                for (name, val) in obj {
                    let old_child = old.and_then(|o| o.get(name));
                    if let Some(child) = n.properties.get(name) {
                        self.walk(ctx, child, val, old_child, &path.field(name), depth + 1);
                    } else if let Additional::Schema(a) = &n.additional {
                        self.walk(ctx, a, val, old_child, &path.key(name), depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item) = &n.items else { return };
                let old_items = old.and_then(Value::as_array);
                for (i, val) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|olds| correlate(n, val, olds));
                    self.walk(ctx, item, val, old_item, &path.index(i), depth + 1);
                }
            }
            _ => {}
        }
    }

    /// The estimated cost of one run of `rule` (and of its message
    /// expression) on this object's values.
    fn cost_of(&mut self, n: &Node, rule: &Rule, root: bool) -> (u64, u64) {
        let key = rule as *const Rule as usize;
        if let Some(c) = self.costs.get(&key) {
            return *c;
        }
        let (top, obj, old) = (self.root, self.obj, self.old);
        let stats = self.stats.get_or_insert_with(|| {
            let values: Vec<&Value> = std::iter::once(obj).chain(old).collect();
            Stats::collect(top, &values)
        });
        let sizes = Sizes::Runtime(stats);
        let rule_cost = cost::estimate(&sizes, self.literals, &rule.expr, n, root);
        let message_cost = rule.message_expression.as_ref().map_or(0, |(_, m)| {
            cost::estimate(&sizes, self.literals, m, n, root)
        });
        self.costs.insert(key, (rule_cost, message_cost));
        (rule_cost, message_cost)
    }

    /// Charges an evaluation estimated at `estimate` and runs it, metering
    /// what the estimate could not know.
    fn metered(
        &mut self,
        estimate: u64,
        program: &IdedExpr,
        scopes: &mut Scopes<'_, '_>,
        rule: &Rule,
    ) -> Result<Result<cel::Value, String>, OverBudget> {
        if estimate > PER_CALL_LIMIT {
            return Err(OverBudget::Call);
        }
        if estimate > self.remaining {
            return Err(OverBudget::Object);
        }
        self.remaining -= estimate;
        let per_call = PER_CALL_LIMIT - estimate;
        let bound = if per_call <= self.remaining {
            OverBudget::Call
        } else {
            OverBudget::Object
        };
        lock(&self.meter).begin(per_call.min(self.remaining));
        let result = scopes.run(program, rule);
        let (spent, exceeded) = lock(&self.meter).end();
        self.remaining = self.remaining.saturating_sub(spent);
        if exceeded {
            return Err(bound);
        }
        Ok(result)
    }

    fn over_budget(&mut self, path: &Path, type_name: &str, detail: String) {
        self.stopped = true;
        self.errs.push(FieldError::new(
            path.render(),
            Reason::FieldValueInvalid,
            format!("Invalid value: {}: {detail}", quote(type_name)),
        ));
    }

    fn eval_rule(
        &mut self,
        n: &Node,
        rule: &Rule,
        root: bool,
        scopes: &mut Scopes<'_, '_>,
        path: &Path,
    ) {
        if rule.transition && !scopes.has_old() && !rule.optional_old_self {
            return;
        }
        let type_name = node_type_name(n);
        let (rule_cost, message_cost) = self.cost_of(n, rule, root);
        let result = match self.metered(rule_cost, &rule.expr, scopes, rule) {
            Ok(result) => result,
            Err(OverBudget::Call) => {
                return self.over_budget(
                    path,
                    type_name,
                    format!(
                        "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                        rule_error_string(rule)
                    ),
                );
            }
            Err(OverBudget::Object) => {
                return self.over_budget(
                    path,
                    type_name,
                    "validation failed due to running out of cost budget, no further validation rules will be run".into(),
                );
            }
        };
        match result {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                let mut detail = None;
                if let Some((src, m)) = &rule.message_expression {
                    match self.metered(message_cost, m, scopes, rule) {
                        Ok(Ok(cel::Value::String(s))) if !s.trim().is_empty() => {
                            detail = Some(s.to_string());
                        }
                        Ok(_) => {}
                        Err(OverBudget::Call) => {
                            return self.over_budget(
                                path,
                                type_name,
                                format!(
                                    "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                                    quote(src)
                                ),
                            );
                        }
                        Err(OverBudget::Object) => {
                            return self.over_budget(
                                path,
                                type_name,
                                "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into(),
                            );
                        }
                    }
                }
                let detail = detail
                    .or_else(|| rule.message.clone())
                    .unwrap_or_else(|| format!("failed rule: {}", rule.source.trim()));
                self.errs.push(error_for_reason(
                    path.render_with_fields(&rule.field_path),
                    rule.reason,
                    type_name,
                    detail,
                ));
            }
            Ok(other) => self.errs.push(FieldError::new(
                path.render(),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: rule did not evaluate to a bool but to {:?}: {}",
                    quote(type_name),
                    other.type_of().to_string(),
                    rule.source.trim()
                ),
            )),
            Err(e) if e.starts_with("no such overload") => self.errs.push(FieldError::new(
                path.render(),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: '{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                    quote(type_name),
                    rule.source.trim()
                ),
            )),
            Err(e) => self.errs.push(FieldError::new(
                path.render(),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: {e} evaluating rule: {}",
                    quote(type_name),
                    rule.source.trim()
                ),
            )),
        }
    }
}

/// How kube-apiserver names a rule in errors: by its message, if it has one.
fn rule_error_string(rule: &Rule) -> &str {
    match &rule.message {
        Some(m) if !m.trim().is_empty() => m.trim(),
        _ => rule.source.trim(),
    }
}

fn error_for_reason(field: String, reason: Reason, type_name: &str, detail: String) -> FieldError {
    let message = match reason {
        Reason::FieldValueForbidden => format!("Forbidden: {detail}"),
        Reason::FieldValueRequired => format!("Required value: {detail}"),
        Reason::FieldValueDuplicate => format!("Duplicate value: {}: {detail}", quote(type_name)),
        _ => format!("Invalid value: {}: {detail}", quote(type_name)),
    };
    FieldError::new(field, reason, message)
}

fn node_type_name(n: &Node) -> &'static str {
    if n.int_or_string {
        return "integer-or-string";
    }
    n.ty.map(Type::as_str).unwrap_or("object")
}
