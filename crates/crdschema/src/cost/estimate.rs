//! The estimator: one evaluation of an expression, followed over abstract
//! values.

use std::rc::Rc;

use cel::IdedExpr;
use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue};

use super::abstract_value::{Abs, Shape, join, literal};
use super::functions::function;
use super::sizes::Sizes;
use crate::node::Node;
use crate::regexes::Table;

const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;

/// Estimates one evaluation of `expr`, a rule or message expression
/// declared at `node`.
pub(crate) fn estimate(
    sizes: &Sizes,
    regexes: &Table,
    expr: &IdedExpr,
    node: &Node,
    root: bool,
) -> u64 {
    let mut est = Estimator {
        sizes,
        regexes,
        scope: Vec::new(),
    };
    let this = sizes.node(node, root);
    est.scope.push(Var {
        name: "self",
        value: this.clone(),
        accumulator: false,
    });
    est.scope.push(Var {
        name: "oldSelf",
        value: this,
        accumulator: false,
    });
    est.eval(expr).0
}

struct Var<'a> {
    name: &'a str,
    value: Abs<'a>,
    accumulator: bool,
}

struct Estimator<'a, 's> {
    sizes: &'s Sizes<'s>,
    regexes: &'s Table,
    scope: Vec<Var<'a>>,
}

impl<'a> Estimator<'a, '_> {
    fn lookup(&self, name: &str) -> Option<&Var<'a>> {
        self.scope.iter().rev().find(|v| v.name == name)
    }

    fn eval(&mut self, e: &'a IdedExpr) -> (u64, Abs<'a>) {
        match &e.expr {
            Expr::Literal(l) => (0, literal(l)),
            Expr::Ident(name) => (
                1,
                self.lookup(name)
                    .map(|v| v.value.clone())
                    .unwrap_or_else(|| Abs::leaf(0, 0)),
            ),
            Expr::Select(s) => {
                let (cost, operand) = self.eval(&s.operand);
                let value = if s.test {
                    Abs::leaf(0, 0)
                } else {
                    self.sizes.select(&operand, &s.field)
                };
                (cost.saturating_add(1), value)
            }
            Expr::Call(call) => self.call(call),
            Expr::List(l) => {
                let n = l.elements.len() as u64;
                let mut cost = LIST_CREATE_BASE_COST + n;
                let mut elem = Abs::bottom();
                let mut weight = 2u64;
                for el in &l.elements {
                    let (c, a) = self.eval(el);
                    cost = cost.saturating_add(c);
                    weight = weight.saturating_add(a.weight.saturating_add(1));
                    elem = join(&elem, &a, 0);
                }
                (cost, Abs::list(n, weight, elem))
            }
            Expr::Map(m) => {
                let n = m.entries.len() as u64;
                let mut cost = MAP_CREATE_BASE_COST + n;
                let mut key = Abs::bottom();
                let mut elem = Abs::bottom();
                let mut weight = 2u64;
                for entry in &m.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            let (ck, k) = self.eval(&me.key);
                            let (cv, v) = self.eval(&me.value);
                            cost = cost.saturating_add(ck).saturating_add(cv);
                            weight = weight.saturating_add(k.weight).saturating_add(v.weight + 2);
                            key = join(&key, &k, 0);
                            elem = join(&elem, &v, 0);
                        }
                        EntryExpr::StructField(sf) => {
                            let (cv, v) = self.eval(&sf.value);
                            cost = cost.saturating_add(cv);
                            weight = weight.saturating_add(v.weight + 2);
                            elem = join(&elem, &v, 0);
                        }
                    }
                }
                let value = Abs {
                    len: n,
                    weight,
                    num: 0,
                    shape: Shape::Built {
                        elem: Rc::new(elem),
                        key: Rc::new(key),
                        map: true,
                    },
                };
                (cost, value)
            }
            Expr::Struct(s) => {
                let mut cost = STRUCT_CREATE_BASE_COST;
                for entry in &s.entries {
                    let value = match &entry.expr {
                        EntryExpr::MapEntry(me) => &me.value,
                        EntryExpr::StructField(sf) => &sf.value,
                    };
                    cost = cost.saturating_add(self.eval(value).0);
                }
                (cost, self.sizes.top())
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => (0, Abs::bottom()),
        }
    }

    fn comprehension(&mut self, c: &'a ComprehensionExpr) -> (u64, Abs<'a>) {
        let (range_cost, range) = self.eval(&c.iter_range);
        let (init_cost, init) = self.eval(&c.accu_init);
        let base = range_cost.saturating_add(init_cost);
        let n = range.len;
        let depth = self.scope.len();
        if n == 0 {
            // A binding (`optMap`, `sortBy`): the loop never runs.
            self.push(&c.accu_var, init, false);
            let (cost, value) = self.eval(&c.result);
            self.scope.truncate(depth);
            return (base.saturating_add(cost), value);
        }
        // The macros only ever pass the accumulator through (`@result &&
        // x`, `c ? @result + 1 : @result`, `@result + [x]`), so that it
        // grows by the same amount each time round. Anything else would
        // need a real fixpoint; no macro makes it.
        if !passes_through(&c.loop_step, &c.accu_var) || !passes_through(&c.loop_cond, &c.accu_var)
        {
            return (u64::MAX, self.sizes.top());
        }
        match &c.iter_var2 {
            Some(v2) => {
                let first = if range.is_list() && !range.is_map() {
                    Abs::leaf(0, n)
                } else {
                    self.sizes.key(&range)
                };
                self.push(&c.iter_var, first, false);
                let second = self.sizes.elem(&range);
                self.push(v2, second, false);
            }
            None => {
                let item = self.sizes.iterated(&range);
                self.push(&c.iter_var, item, false);
            }
        }
        self.push(&c.accu_var, init.clone(), true);
        let (step_cost, once) = self.eval(&c.loop_step);
        let grown = Abs {
            len: grow(init.len, once.len, n),
            weight: grow(init.weight, once.weight, n),
            num: grow(init.num, once.num, n),
            shape: join(&init, &once, 0).shape,
        };
        self.scope.pop();
        self.push(&c.accu_var, grown.clone(), true);
        let (cond_cost, _) = self.eval(&c.loop_cond);
        self.scope.truncate(depth);
        self.push(&c.accu_var, grown, true);
        let (result_cost, value) = self.eval(&c.result);
        self.scope.truncate(depth);
        let per_item = step_cost.saturating_add(cond_cost);
        let cost = base
            .saturating_add(n.saturating_mul(per_item))
            .saturating_add(result_cost);
        (cost, value)
    }

    fn push(&mut self, name: &'a str, value: Abs<'a>, accumulator: bool) {
        self.scope.push(Var {
            name,
            value,
            accumulator,
        });
    }

    fn is_accumulator(&self, e: &IdedExpr) -> bool {
        matches!(&e.expr, Expr::Ident(name) if self.lookup(name).is_some_and(|v| v.accumulator))
    }

    fn call(&mut self, call: &'a CallExpr) -> (u64, Abs<'a>) {
        let mut cost = 0u64;
        let mut params: Vec<Abs<'a>> = Vec::with_capacity(call.args.len() + 1);
        // `optional.of(x)`, `lists.range(n)`: a namespace, not a receiver.
        let mut name = call.func_name.clone();
        match call.target.as_deref() {
            Some(IdedExpr {
                expr: Expr::Ident(ns),
                ..
            }) if self.lookup(ns).is_none() => name = format!("{ns}.{name}"),
            Some(t) => {
                let (c, a) = self.eval(t);
                cost = cost.saturating_add(c);
                params.push(a);
            }
            None => {}
        }
        let mut arg_costs = Vec::with_capacity(call.args.len());
        for a in &call.args {
            let (c, v) = self.eval(a);
            arg_costs.push(c);
            params.push(v);
        }
        let args_cost = if name == "_?_:_" && arg_costs.len() == 3 {
            arg_costs[0].saturating_add(arg_costs[1].max(arg_costs[2]))
        } else {
            arg_costs.iter().fold(0u64, |s, c| s.saturating_add(*c))
        };
        let accumulating =
            name == "_+_" && call.args.first().is_some_and(|a| self.is_accumulator(a));
        // The second parameter (after the receiver, if any) as a literal.
        let receivers = params.len() - call.args.len();
        let second_literal = match call.args.get(1 - receivers).map(|a| &a.expr) {
            Some(Expr::Literal(LiteralValue::String(s))) => Some(s.inner()),
            _ => None,
        };
        let (own, value) = function(
            self.sizes,
            self.regexes,
            &name,
            &params,
            accumulating,
            second_literal,
        );
        (cost.saturating_add(args_cost).saturating_add(own), value)
    }
}

/// `before` grown `n` times by what one step added.
fn grow(before: u64, once: u64, n: u64) -> u64 {
    before.saturating_add(once.saturating_sub(before).saturating_mul(n))
}

/// Whether `accu` is only passed through by `e`: used directly, as a
/// branch of `?:`, an operand of `&&`/`||`/`!`, or the left operand of `+`.
fn passes_through(e: &IdedExpr, accu: &str) -> bool {
    fn uses(e: &IdedExpr, accu: &str) -> bool {
        match &e.expr {
            Expr::Ident(name) => name == accu,
            Expr::Select(s) => uses(&s.operand, accu),
            Expr::Call(c) => {
                c.target.as_deref().is_some_and(|t| uses(t, accu))
                    || c.args.iter().any(|a| uses(a, accu))
            }
            Expr::List(l) => l.elements.iter().any(|x| uses(x, accu)),
            Expr::Map(m) => m.entries.iter().any(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => uses(&me.key, accu) || uses(&me.value, accu),
                EntryExpr::StructField(sf) => uses(&sf.value, accu),
            }),
            Expr::Struct(s) => s.entries.iter().any(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => uses(&me.key, accu) || uses(&me.value, accu),
                EntryExpr::StructField(sf) => uses(&sf.value, accu),
            }),
            Expr::Comprehension(c) => {
                // Inside the loop, a variable of the same name hides it.
                let hidden = c.accu_var == accu
                    || c.iter_var == accu
                    || c.iter_var2.as_deref() == Some(accu);
                uses(&c.iter_range, accu)
                    || uses(&c.accu_init, accu)
                    || (!hidden
                        && [&c.loop_cond, &c.loop_step, &c.result]
                            .iter()
                            .any(|x| uses(x, accu)))
            }
            Expr::Literal(_) | Expr::Unspecified => false,
        }
    }
    match &e.expr {
        Expr::Ident(_) | Expr::Literal(_) => true,
        Expr::Call(c) if c.target.is_none() => match (c.func_name.as_str(), c.args.as_slice()) {
            ("_?_:_", [cond, yes, no]) => {
                !uses(cond, accu) && passes_through(yes, accu) && passes_through(no, accu)
            }
            ("_&&_" | "_||_", [x, y]) => passes_through(x, accu) && passes_through(y, accu),
            ("!_" | "@not_strictly_false", [x]) => passes_through(x, accu),
            ("_+_", [x, y]) => passes_through(x, accu) && !uses(y, accu),
            _ => !uses(e, accu),
        },
        _ => !uses(e, accu),
    }
}
