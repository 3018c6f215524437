//! Bounds on the work CEL rules may do, as kube-apiserver bounds it.
//!
//! kube-apiserver relies on cel-go's cost tracking; the `cel` crate has
//! none, so costs are estimated here from the rule's expression tree, in
//! cel-go's units (one unit is roughly one simple operation; string work
//! costs 0.1 per character, `matches` the product of string and pattern
//! length, a comprehension the size of its range times its body).
//!
//! * When a CRD is written, every rule is estimated against the sizes its
//!   schema allows (`maxItems`, `maxLength`, `maxProperties`; what is
//!   unbounded is assumed as large as a request can make it), times the
//!   number of times it may run per object. A rule over
//!   [`STATIC_ESTIMATED_COST_LIMIT`], or a schema whose rules add up to over
//!   [`STATIC_ESTIMATED_CRD_COST_LIMIT`], is refused with kube-apiserver's
//!   messages.
//! * When an object is validated, the same estimate is made against the
//!   largest values the object (and its old version) actually holds at each
//!   place of the schema, before a rule runs. A rule estimated over
//!   [`PER_CALL_LIMIT`], or over what is left of the object's
//!   [`RUNTIME_CEL_COST_BUDGET`], is not run and the object is refused.
//!
//! The estimate is an upper bound: it follows every branch, assumes no
//! short-circuit, and charges every element of a list the largest element's
//! cost. Regular expressions that are not literals in the rule are compiled
//! while the rule runs, and metered then (see `regexes::Meter`).

use std::collections::HashMap;
use std::rc::Rc;

use cel::IdedExpr;
use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue};
use serde_json::Value;

use crate::error::{FieldError, Reason};
use crate::limits::{
    MAX_REQUEST_SIZE_BYTES, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT,
};
use crate::node::{Additional, Node, ROOT_PATH, Type};
use crate::regexes::{self, Table};
use crate::value::type_matches;

const REQ: u64 = MAX_REQUEST_SIZE_BYTES;
const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;
/// The longest `metadata.name`/`generateName` assumed when a CRD is written.
const MAX_NAME_LEN: u64 = 253;
/// The longest `apiVersion` or `kind` assumed when a CRD is written.
const MAX_TYPE_META_LEN: u64 = 317;
/// How deep values are looked at for their sizes: twice the depth rules are
/// run at, as a rule deep in the object sees values deeper still.
const MAX_VALUE_DEPTH: usize = 512;
/// How deep two derived values are merged before giving up on their shape.
const MAX_JOIN_DEPTH: usize = 8;

/// kube-apiserver's wording of an estimate over a limit.
pub(crate) fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

// ------------------------------------------------------------ static check

/// The cost checks kube-apiserver makes when a CRD is written: each rule's
/// estimated cost times the number of times it may run per object, each
/// `messageExpression`'s estimated cost, and their total.
pub(crate) fn check_static(root: &Node, regexes: &Table) -> Vec<FieldError> {
    let mut check = StaticCheck {
        regexes,
        errs: Vec::new(),
        total: 0,
        most_expensive: Vec::new(),
    };
    check.node(root, ROOT_PATH, 1, true);
    let mut errs = check.errs;
    if check.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (path, _) in &check.most_expensive {
            errs.push(FieldError::new(
                path.clone(),
                Reason::FieldValueForbidden,
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        errs.push(FieldError::new(
            ROOT_PATH,
            Reason::FieldValueForbidden,
            format!(
                "Forbidden: {}",
                cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    check.total,
                    STATIC_ESTIMATED_CRD_COST_LIMIT,
                )
            ),
        ));
    }
    errs
}

struct StaticCheck<'r> {
    regexes: &'r Table,
    errs: Vec<FieldError>,
    total: u64,
    /// The (at most four) costliest expressions, each at least 1% of the
    /// schema's limit, which kube-apiserver names when the total is over.
    most_expensive: Vec<(String, u64)>,
}

impl StaticCheck<'_> {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive
            .sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
        self.most_expensive.truncate(4);
    }

    fn limit(&mut self, path: &str, what: &str, cost: u64) {
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            self.errs.push(FieldError::new(
                path,
                Reason::FieldValueForbidden,
                format!(
                    "Forbidden: {}",
                    cost_error_message(what, cost, STATIC_ESTIMATED_COST_LIMIT)
                ),
            ));
        }
    }

    /// `cardinality` is how many values of this node one object may hold.
    fn node(&mut self, n: &Node, path: &str, cardinality: u64, root: bool) {
        // No more values of a node fit in a request than its smallest
        // serialization allows, however the lists above it are bounded.
        let cardinality = cardinality.min(REQ / (min_size(n) + 1)).max(1);
        for (i, rule) in n.rules.iter().enumerate() {
            let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
            let raw = estimate(&Sizes::Static, self.regexes, &rule.expr, n, root);
            let cost = raw.saturating_mul(cardinality);
            let at = format!("{rule_path}.rule");
            self.limit(&at, "estimated rule cost", cost);
            self.observe(at, cost);
            if let Some((_, m)) = &rule.message_expression {
                let cost = estimate(&Sizes::Static, self.regexes, m, n, root);
                let at = format!("{rule_path}.messageExpression");
                self.limit(&at, "estimated messageExpression cost", cost);
                self.observe(at, cost);
            }
        }
        for (name, child) in &n.properties {
            self.node(
                child,
                &format!("{path}.properties[{name}]"),
                cardinality,
                false,
            );
        }
        if let Some(items) = &n.items {
            let each = cardinality.saturating_mul(static_len(n));
            self.node(items, &format!("{path}.items"), each, false);
        }
        if let Additional::Schema(a) = &n.additional {
            let each = cardinality.saturating_mul(static_len(n));
            self.node(a, &format!("{path}.additionalProperties"), each, false);
        }
    }
}

/// The smallest JSON serialization of a value of `n`.
fn min_size(n: &Node) -> u64 {
    let size = if n.int_or_string {
        1
    } else {
        match n.ty {
            Some(Type::String) => 2,
            Some(Type::Integer | Type::Number) | None => 1,
            Some(Type::Boolean) => 4,
            Some(Type::Object | Type::Array) => 2,
        }
    };
    if n.nullable { size.min(4) } else { size }
}

/// The largest `size()` a value of `n` may have, as kube-apiserver
/// estimates it: declared maxima, else as many as fit in a request.
fn static_len(n: &Node) -> u64 {
    if n.int_or_string {
        return REQ - 2;
    }
    match n.ty {
        Some(Type::String) => {
            if let Some(m) = n.max_length {
                return m;
            }
            if let Some(values) = &n.enum_values
                && values.iter().all(Value::is_string)
            {
                return values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| s.len() as u64)
                    .max()
                    .unwrap_or(0);
            }
            match n.format.as_deref() {
                Some("duration") | Some("date-time") | Some("datetime") => 32,
                Some("date") => 12,
                _ => REQ - 2,
            }
        }
        Some(Type::Array) => n.max_items.unwrap_or_else(|| {
            let item = n.items.as_deref().map(min_size).unwrap_or(1);
            (REQ - 2) / (item + 1)
        }),
        Some(Type::Object) => {
            let open = match &n.additional {
                Additional::Schema(a) => Some(min_size(a)),
                Additional::Allowed(true) => Some(1),
                _ if n.preserve_unknown => Some(1),
                _ => None,
            };
            match (open, n.max_properties) {
                (_, Some(m)) if open.is_some() => m,
                (Some(value), _) => (REQ - 2) / (value + 6),
                (None, max) => (n.properties.len() as u64).min(max.unwrap_or(u64::MAX)),
            }
        }
        Some(_) => 0,
        None if n.preserve_unknown => REQ - 2,
        None => 0,
    }
}

/// The largest integer a value of `n` may hold.
fn static_num(n: &Node) -> u64 {
    match n.ty {
        Some(Type::Integer) => match (n.minimum, n.maximum) {
            (Some(lo), Some(hi)) => lo.abs().max(hi.abs()).ceil() as u64,
            _ => u64::MAX,
        },
        Some(Type::String | Type::Boolean | Type::Object | Type::Array) => 0,
        _ => u64::MAX,
    }
}

// ---------------------------------------------------------- runtime sizes

#[derive(Debug, Default, Clone, Copy)]
struct NodeStats {
    len: u64,
    weight: u64,
    num: u64,
    key_len: u64,
}

impl NodeStats {
    fn merge(&mut self, other: NodeStats) {
        self.len = self.len.max(other.len);
        self.weight = self.weight.max(other.weight);
        self.num = self.num.max(other.num);
        self.key_len = self.key_len.max(other.key_len);
    }
}

/// The largest sizes an object (and its old version) holds at each node of
/// the schema, gathered once per validation.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    nodes: HashMap<usize, NodeStats>,
    /// Over every value CEL can see, wherever it is.
    top: NodeStats,
    /// The longest root `metadata.name`/`generateName`.
    meta_len: u64,
    /// The longest root `apiVersion`/`kind`.
    type_meta_len: u64,
    /// Some value does not have its node's type: the schema says nothing
    /// reliable about its children, so every node is sized as `top`.
    mismatch: bool,
}

fn node_key(n: &Node) -> usize {
    n as *const Node as usize
}

impl Stats {
    pub(crate) fn collect(root: &Node, values: &[&Value]) -> Stats {
        let mut stats = Stats::default();
        for v in values {
            stats.visit(Some(root), v, 0, true);
        }
        stats
    }

    /// Records `v` and its children; returns `v`'s weight, roughly its
    /// serialized size.
    fn visit(&mut self, n: Option<&Node>, v: &Value, depth: usize, root: bool) -> u64 {
        if depth > MAX_VALUE_DEPTH {
            return 4;
        }
        let mut s = NodeStats::default();
        match v {
            Value::Null => s.weight = 4,
            Value::Bool(_) => s.weight = 5,
            Value::Number(x) => {
                s.weight = 8;
                s.num = x
                    .as_i64()
                    .map(i64::unsigned_abs)
                    .or_else(|| x.as_u64())
                    .unwrap_or(0);
            }
            Value::String(x) => {
                s.len = x.len() as u64;
                s.weight = s.len + 2;
            }
            Value::Array(items) => {
                let item = n.and_then(|n| n.items.as_deref());
                s.len = items.len() as u64;
                s.weight = 2;
                for i in items {
                    let w = self.visit(item, i, depth + 1, false);
                    s.weight = s.weight.saturating_add(w + 1);
                }
            }
            Value::Object(obj) => {
                s.len = obj.len() as u64;
                s.weight = 2;
                for (k, val) in obj {
                    s.key_len = s.key_len.max(k.len() as u64);
                    let w = if root && k == "metadata" {
                        // CEL sees only name and generateName of it.
                        let mut w = 2;
                        for f in ["name", "generateName"] {
                            if let Some(Value::String(x)) = val.get(f) {
                                self.meta_len = self.meta_len.max(x.len() as u64);
                                w += x.len() as u64 + f.len() as u64 + 6;
                            }
                        }
                        w
                    } else {
                        if root
                            && (k == "apiVersion" || k == "kind")
                            && let Value::String(x) = val
                        {
                            self.type_meta_len = self.type_meta_len.max(x.len() as u64);
                        }
                        let child = n.and_then(|n| n.child(k));
                        self.visit(child, val, depth + 1, false)
                    };
                    s.weight = s.weight.saturating_add(k.len() as u64 + 3 + w);
                }
            }
        }
        self.top.merge(s);
        if let Some(n) = n {
            if !v.is_null() && !type_matches(n, v) {
                self.mismatch = true;
            }
            self.nodes.entry(node_key(n)).or_default().merge(s);
        }
        s.weight
    }
}

/// Where the estimate takes sizes from.
pub(crate) enum Sizes<'a> {
    /// The schema's bounds, when a CRD is written.
    Static,
    /// An object's actual values, when it is validated.
    Runtime(&'a Stats),
}

// ------------------------------------------------------------- estimation

/// What the estimate knows of a value: upper bounds of its `size()`, of the
/// work of traversing it whole, and of its magnitude as an integer, and
/// where its children come from.
#[derive(Clone, Debug)]
struct Abs<'a> {
    len: u64,
    weight: u64,
    num: u64,
    shape: Shape<'a>,
}

#[derive(Clone, Debug)]
enum Shape<'a> {
    /// A scalar or a string: no children.
    Leaf,
    /// A value of a schema node.
    Node { node: &'a Node, root: bool },
    /// The root's `metadata`: `name` and `generateName`.
    Meta,
    /// A list or map made by the rule.
    Built {
        elem: Rc<Abs<'a>>,
        key: Rc<Abs<'a>>,
        map: bool,
    },
    /// Anything: its children are anything too.
    Top,
}

impl<'a> Abs<'a> {
    fn leaf(len: u64, num: u64) -> Abs<'a> {
        Abs {
            len,
            weight: len.saturating_add(8),
            num,
            shape: Shape::Leaf,
        }
    }

    fn bottom() -> Abs<'a> {
        Abs {
            len: 0,
            weight: 0,
            num: 0,
            shape: Shape::Leaf,
        }
    }

    fn list(len: u64, weight: u64, elem: Abs<'a>) -> Abs<'a> {
        Abs {
            len,
            weight,
            num: 0,
            shape: Shape::Built {
                elem: Rc::new(elem),
                key: Rc::new(Abs::leaf(0, len)),
                map: false,
            },
        }
    }

    fn is_list(&self) -> bool {
        match &self.shape {
            Shape::Node { node, .. } => node.ty == Some(Type::Array) || node.ty.is_none(),
            Shape::Built { map, .. } => !map,
            Shape::Top => true,
            Shape::Leaf | Shape::Meta => false,
        }
    }

    fn is_map(&self) -> bool {
        match &self.shape {
            Shape::Node { node, .. } => node.ty == Some(Type::Object),
            Shape::Built { map, .. } => *map,
            Shape::Meta => true,
            Shape::Leaf | Shape::Top => false,
        }
    }
}

fn join<'a>(a: &Abs<'a>, b: &Abs<'a>, depth: usize) -> Abs<'a> {
    let shape = match (&a.shape, &b.shape) {
        (Shape::Leaf, s) | (s, Shape::Leaf) => s.clone(),
        (Shape::Node { node: x, root: rx }, Shape::Node { node: y, root: ry })
            if std::ptr::eq(*x, *y) =>
        {
            Shape::Node {
                node: x,
                root: *rx || *ry,
            }
        }
        (Shape::Meta, Shape::Meta) => Shape::Meta,
        (
            Shape::Built {
                elem: e1,
                key: k1,
                map: m1,
            },
            Shape::Built {
                elem: e2,
                key: k2,
                map: m2,
            },
        ) if depth < MAX_JOIN_DEPTH => Shape::Built {
            elem: Rc::new(join(e1, e2, depth + 1)),
            key: Rc::new(join(k1, k2, depth + 1)),
            map: *m1 || *m2,
        },
        _ => Shape::Top,
    };
    Abs {
        len: a.len.max(b.len),
        weight: a.weight.max(b.weight),
        num: a.num.max(b.num),
        shape,
    }
}

/// cel-go's cost of traversing `n` characters.
fn tr(n: u64) -> u64 {
    n.div_ceil(10)
}

fn log2(n: u64) -> u64 {
    u64::from(64 - n.leading_zeros())
}

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
    let this = est.node(node, root);
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
    fn top(&self) -> Abs<'a> {
        match self.sizes {
            Sizes::Static => Abs {
                len: REQ,
                weight: REQ,
                num: u64::MAX,
                shape: Shape::Top,
            },
            Sizes::Runtime(st) => Abs {
                len: st.top.len,
                weight: st.top.weight,
                num: st.top.num,
                shape: Shape::Top,
            },
        }
    }

    fn node(&self, n: &'a Node, root: bool) -> Abs<'a> {
        let shape = Shape::Node { node: n, root };
        match self.sizes {
            Sizes::Static => {
                let len = static_len(n);
                Abs {
                    len,
                    // cel-go charges comparisons by size, not by depth.
                    weight: len.max(1),
                    num: static_num(n),
                    shape,
                }
            }
            Sizes::Runtime(st) if st.mismatch => self.top(),
            Sizes::Runtime(st) => {
                let s = st.nodes.get(&node_key(n)).copied().unwrap_or_default();
                Abs {
                    len: s.len,
                    weight: s.weight,
                    num: s.num,
                    shape,
                }
            }
        }
    }

    fn meta_string(&self) -> Abs<'a> {
        match self.sizes {
            Sizes::Static => Abs::leaf(MAX_NAME_LEN, 0),
            Sizes::Runtime(st) => Abs::leaf(st.meta_len, 0),
        }
    }

    fn type_meta_string(&self) -> Abs<'a> {
        match self.sizes {
            Sizes::Static => Abs::leaf(MAX_TYPE_META_LEN, 0),
            Sizes::Runtime(st) => Abs::leaf(st.type_meta_len, 0),
        }
    }

    fn key_len(&self, n: &Node) -> u64 {
        match self.sizes {
            Sizes::Runtime(st) => st.nodes.get(&node_key(n)).map(|s| s.key_len).unwrap_or(0),
            Sizes::Static => {
                let open = n.preserve_unknown
                    || matches!(
                        n.additional,
                        Additional::Schema(_) | Additional::Allowed(true)
                    );
                if open {
                    REQ - 2
                } else {
                    n.properties
                        .keys()
                        .map(|k| k.len() as u64)
                        .max()
                        .unwrap_or(0)
                }
            }
        }
    }

    /// `a.field`.
    fn select(&self, a: &Abs<'a>, field: &str) -> Abs<'a> {
        match &a.shape {
            Shape::Node { node, root } => {
                if *root && field == "metadata" {
                    // CEL sees only name and generateName of it.
                    return Abs {
                        len: 2,
                        weight: self.meta_string().len.saturating_mul(2).saturating_add(30),
                        num: 0,
                        shape: Shape::Meta,
                    };
                }
                if let Some(p) = node.properties.get(field) {
                    return self.node(p, false);
                }
                if (*root || node.embedded) && matches!(field, "apiVersion" | "kind" | "metadata") {
                    return if *root {
                        self.type_meta_string()
                    } else {
                        self.top()
                    };
                }
                match &node.additional {
                    Additional::Schema(s) => self.node(s, false),
                    Additional::Allowed(true) => self.top(),
                    _ if node.preserve_unknown || node.ty.is_none() => self.top(),
                    _ => Abs::bottom(),
                }
            }
            Shape::Meta => match field {
                "name" | "generateName" => self.meta_string(),
                _ => Abs::bottom(),
            },
            Shape::Built { elem, .. } => (**elem).clone(),
            Shape::Top => self.top(),
            Shape::Leaf => Abs::bottom(),
        }
    }

    /// The elements of a list, or the values of a map.
    fn elem(&self, a: &Abs<'a>) -> Abs<'a> {
        match &a.shape {
            Shape::Node { node, .. } => {
                if let Some(items) = &node.items {
                    self.node(items, false)
                } else if let Additional::Schema(s) = &node.additional {
                    self.node(s, false)
                } else if matches!(
                    node.ty,
                    Some(Type::String | Type::Integer | Type::Number | Type::Boolean)
                ) && !node.int_or_string
                {
                    Abs::bottom()
                } else {
                    // An object's properties, or anything.
                    self.top()
                }
            }
            Shape::Meta => self.meta_string(),
            Shape::Built { elem, .. } => (**elem).clone(),
            Shape::Top => self.top(),
            Shape::Leaf => Abs::bottom(),
        }
    }

    /// The keys of a map (or the indices of a list).
    fn key(&self, a: &Abs<'a>) -> Abs<'a> {
        match &a.shape {
            Shape::Node { node, .. } => match node.ty {
                Some(Type::Object) => Abs::leaf(self.key_len(node), 0),
                Some(Type::Array) => Abs::leaf(0, a.len),
                None => join(&Abs::leaf(self.key_len(node), a.len), &self.top(), 0),
                _ => Abs::bottom(),
            },
            Shape::Meta => Abs::leaf(12, 0),
            Shape::Built { key, .. } => (**key).clone(),
            Shape::Top => self.top(),
            Shape::Leaf => Abs::bottom(),
        }
    }

    /// What a one-variable comprehension binds: list elements, map keys.
    fn iterated(&self, range: &Abs<'a>) -> Abs<'a> {
        match &range.shape {
            Shape::Node { node, .. } if node.ty == Some(Type::Array) => self.elem(range),
            Shape::Node { node, .. } if node.ty == Some(Type::Object) => self.key(range),
            Shape::Built { map: false, .. } => self.elem(range),
            Shape::Built { map: true, .. } | Shape::Meta => self.key(range),
            _ => join(&self.elem(range), &self.key(range), 0),
        }
    }

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
                    self.select(&operand, &s.field)
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
                (cost, self.top())
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
            return (u64::MAX, self.top());
        }
        match &c.iter_var2 {
            Some(v2) => {
                let first = if range.is_list() && !range.is_map() {
                    Abs::leaf(0, n)
                } else {
                    self.key(&range)
                };
                self.push(&c.iter_var, first, false);
                let second = self.elem(&range);
                self.push(v2, second, false);
            }
            None => {
                let item = self.iterated(&range);
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
        let (own, value) = self.function(&name, &params, accumulating, second_literal);
        (cost.saturating_add(args_cost).saturating_add(own), value)
    }

    /// The cost of calling `name` itself, beyond evaluating its receiver
    /// and arguments (`p`, receiver first), and what it returns.
    fn function(
        &self,
        name: &str,
        p: &[Abs<'a>],
        accumulating: bool,
        second_literal: Option<&str>,
    ) -> (u64, Abs<'a>) {
        let bottom = Abs::bottom();
        let arg = |i: usize| p.get(i).unwrap_or(&bottom);
        let (a, b) = (arg(0), arg(1));
        let leaf = Abs::leaf(0, 0);
        match name {
            "_&&_" | "_||_" => (0, leaf),
            "!_" | "@not_strictly_false" => (1, leaf),
            "_?_:_" => (0, join(b, arg(2), 0)),
            "_==_" | "_!=_" => (1 + tr(a.weight.min(b.weight)), leaf),
            "_<_" | "_<=_" | "_>_" | "_>=_" => (1 + tr(a.len.min(b.len)), leaf),
            "_+_" => {
                let len = a.len.saturating_add(b.len);
                let cost = if accumulating {
                    // map() and filter() append in place.
                    1 + b.len
                } else if a.is_list() || b.is_list() {
                    1u64.saturating_add(len)
                } else {
                    1 + tr(len)
                };
                let shape = match (&a.shape, &b.shape) {
                    (Shape::Leaf, Shape::Leaf) => Shape::Leaf,
                    _ => Shape::Built {
                        elem: Rc::new(join(&self.elem(a), &self.elem(b), 0)),
                        key: Rc::new(Abs::leaf(0, len)),
                        map: false,
                    },
                };
                let value = Abs {
                    len,
                    weight: a.weight.saturating_add(b.weight),
                    num: a.num.saturating_add(b.num),
                    shape,
                };
                (cost, value)
            }
            "_-_" => (1, Abs::leaf(0, a.num.saturating_add(b.num))),
            "_*_" => (1, Abs::leaf(0, a.num.saturating_mul(b.num))),
            "_/_" | "_%_" | "-_" => (1, Abs::leaf(0, a.num)),
            "_[_]" | "_[?_]" | "_?._" => {
                let value = match second_literal {
                    Some(field) if matches!(a.shape, Shape::Node { .. } | Shape::Meta) => {
                        self.select(a, field)
                    }
                    _ => self.elem(a),
                };
                (1, value)
            }
            "@in" => {
                let cost = if b.is_map() {
                    1 + tr(a.len)
                } else {
                    let each = 1 + tr(a.weight.min(self.elem(b).weight));
                    1u64.saturating_add(b.len.saturating_mul(each))
                };
                (cost, leaf)
            }
            "size" => (1, Abs::leaf(0, a.len)),
            "contains" => (
                1u64.saturating_add(tr(a.len).saturating_mul(tr(b.len))),
                leaf,
            ),
            "startsWith" | "endsWith" => (1 + tr(b.len), leaf),
            "matches" | "@matches" | "find" | "findAll" => {
                // A literal pattern's size is known; another's is charged
                // by its length here, the rest as it runs.
                let size = match second_literal.and_then(|p| self.regexes.get(p)) {
                    Some(e) => e.states,
                    None => b.len,
                };
                let cost = 1u64.saturating_add(regexes::match_cost(a.len, size));
                let value = match name {
                    "find" => Abs::leaf(a.len, 0),
                    "findAll" => Abs::list(
                        a.len + 1,
                        a.len.saturating_mul(3).saturating_add(4),
                        Abs::leaf(a.len, 0),
                    ),
                    _ => leaf,
                };
                (cost, value)
            }
            "lowerAscii" | "upperAscii" | "trim" => (1 + tr(a.len), Abs::leaf(a.len, 0)),
            "reverse" if a.is_list() => (1u64.saturating_add(a.len), a.clone()),
            "reverse" => (1 + tr(a.len), Abs::leaf(a.len, 0)),
            "quote" | "strings.quote" => (
                1 + tr(a.len),
                Abs::leaf(a.len.saturating_mul(6).saturating_add(2), 0),
            ),
            "replace" => {
                let len = a.len.saturating_add((a.len + 1).saturating_mul(arg(2).len));
                (1 + tr(a.len.saturating_add(len)), Abs::leaf(len, 0))
            }
            "split" => {
                let n = a.len + 1;
                let value = Abs::list(n, a.len.saturating_add(n.saturating_mul(3)), {
                    Abs::leaf(a.len, 0)
                });
                (1 + tr(a.len) + tr(n), value)
            }
            "join" => {
                let len = a.len.saturating_mul(self.elem(a).len.saturating_add(b.len));
                (
                    1u64.saturating_add(a.len).saturating_add(tr(len)),
                    Abs::leaf(len, 0),
                )
            }
            "substring" => (1 + tr(a.len), Abs::leaf(a.len, 0)),
            "charAt" => (1 + tr(a.len), Abs::leaf(4, 0)),
            "indexOf" | "lastIndexOf" => (
                1u64.saturating_add(tr(a.len).saturating_mul(tr(b.len))),
                Abs::leaf(0, a.len),
            ),
            "format" => {
                // At most 1400 characters per clause (of two characters at
                // least), plus what the arguments print as.
                let len = a
                    .len
                    .saturating_mul(700)
                    .saturating_add(b.weight.saturating_mul(2));
                (
                    1u64.saturating_add(b.len).saturating_add(tr(len)),
                    Abs::leaf(len, 0),
                )
            }
            "string" | "bytes" => (1 + tr(a.len), Abs::leaf(a.len.max(32), 0)),
            "int" | "uint" => (1 + tr(a.len), Abs::leaf(0, u64::MAX)),
            "double" | "bool" | "duration" | "timestamp" => (1 + tr(a.len), leaf),
            "dyn" => (1, a.clone()),
            "type" | "hasValue" => (1, leaf),
            "isURL" => (1 + tr(a.len), leaf),
            "getFullYear" | "getMonth" | "getDate" | "getDayOfMonth" | "getDayOfWeek"
            | "getDayOfYear" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
                (1, Abs::leaf(0, u64::MAX))
            }
            "isSorted" => {
                let each = 1 + tr(self.elem(a).len);
                (1u64.saturating_add(a.len.saturating_mul(each)), leaf)
            }
            "sum" => (
                1u64.saturating_add(a.len),
                Abs::leaf(0, a.len.saturating_mul(self.elem(a).num)),
            ),
            "min" | "max" => {
                // `list.min()`, `min(list)`: the list's elements; `min(a, b,
                // ...)`: the arguments.
                let (n, value) = match p {
                    [list] => (list.len, self.elem(list)),
                    _ => (
                        p.len() as u64,
                        p.iter().fold(Abs::bottom(), |v, x| join(&v, x, 0)),
                    ),
                };
                let each = 1 + tr(value.len);
                (1u64.saturating_add(n.saturating_mul(each)), value)
            }
            "slice" => (1u64.saturating_add(a.len), a.clone()),
            "flatten" => {
                let mut len = 0u64;
                let mut level = a.clone();
                let mut scale = 1u64;
                let mut elem = Abs::bottom();
                for _ in 0..64 {
                    if matches!(level.shape, Shape::Leaf) {
                        break;
                    }
                    scale = scale.saturating_mul(level.len);
                    len = len.saturating_add(scale);
                    level = self.elem(&level);
                    elem = join(&elem, &level, 0);
                    if matches!(level.shape, Shape::Top) {
                        break;
                    }
                }
                let value = Abs::list(len, len.saturating_mul(elem.weight.max(1)), elem);
                (1u64.saturating_add(len), value)
            }
            "distinct" => {
                let each = 1 + tr(self.elem(a).weight);
                let cost = a.len.saturating_mul(a.len).saturating_mul(each);
                (cost.saturating_add(1), a.clone())
            }
            "sort" | "@sortByAssociatedKeys" => {
                let keys = if name == "sort" { a } else { b };
                let each = 1 + tr(self.elem(keys).len);
                let cost = a.len.saturating_mul(log2(a.len) + 1).saturating_mul(each);
                (cost.saturating_add(1), a.clone())
            }
            "lists.range" => {
                let len = a.num;
                (
                    1u64.saturating_add(len),
                    Abs::list(len, len.saturating_mul(9), Abs::leaf(0, len)),
                )
            }
            "optional.of" | "optional.ofNonZeroValue" | "value" => (1, a.clone()),
            "optional.none" => (1, Abs::bottom()),
            "or" | "orValue" => (1, join(a, b, 0)),
            _ => {
                // Nothing else is declared: calls to anything else fail.
                let traversed = p.iter().fold(0u64, |s, x| s.saturating_add(tr(x.weight)));
                (1u64.saturating_add(traversed), self.top())
            }
        }
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

fn literal<'a>(l: &LiteralValue) -> Abs<'a> {
    match l {
        LiteralValue::String(s) => Abs::leaf(s.inner().len() as u64, 0),
        LiteralValue::Bytes(b) => Abs::leaf(b.inner().len() as u64, 0),
        LiteralValue::Int(i) => Abs::leaf(0, i.inner().unsigned_abs()),
        LiteralValue::UInt(u) => Abs::leaf(0, *u.inner()),
        LiteralValue::Double(_) | LiteralValue::Boolean(_) | LiteralValue::Null => Abs::leaf(0, 0),
    }
}
