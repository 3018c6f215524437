//! `x-kubernetes-validations`: CEL rules compiled with the schema and
//! evaluated against each value at the node that declares them.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::{Key, Map, OptionalValue};
use cel::{Context, Env, Program};
use serde_json::Value;

use crate::cost::{self, Sizes, Stats};
use crate::error::{FieldError, Reason};
use crate::limits::{PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET};
use crate::node::{Additional, Node, Rule, Type};
use crate::path::Path;
use crate::regexes::{LiteralError, Literals, Meter, Table};
use crate::value::{correlate, json_eq, type_matches};
use crate::wording::{fmt_value, quote};

/// The environment every rule is compiled and run in: the standard library
/// (with `matches`, `startsWith`, ...) plus the string and list extensions
/// Kubernetes also offers.
///
/// Built once and shared: it is the same for every schema and never changed
/// after it is built, and building it (a few hundred overloads) cost more
/// than compiling a small schema's rules.
pub(crate) fn env() -> Arc<Env> {
    static ENV: std::sync::OnceLock<Arc<Env>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Neither extension clashes with the standard library; if a future cel
        // release made them, rules using them would fail to compile instead.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        Arc::new(env)
    })
    .clone()
}

/// Longest rule or message expression accepted, in bytes; cel-go allows
/// 100k code points, far beyond any real rule.
const MAX_SOURCE_LEN: usize = 100_000;

/// Deepest expression accepted, cel-go's default parser recursion limit.
/// It bounds the interpreter's recursion when the rule runs.
const MAX_EXPR_DEPTH: usize = 250;

fn parse(env: &Env, src: &str) -> Result<Program, String> {
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
fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
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
fn literal_patterns<'e>(e: &'e IdedExpr, out: &mut Vec<&'e str>) {
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

/// The name `matches` calls are renamed to, so that they reach
/// [`k8s::matches`] (which compiles each pattern once) instead of cel's own
/// (which compiles it on every call). Users cannot spell it.
const MATCHES: &str = "@matches";

/// `program`'s expression as it is run: `matches` renamed to [`MATCHES`].
fn runnable(program: &Program) -> IdedExpr {
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

/// Where a rule is declared.
pub(crate) struct RuleAt<'a> {
    pub at_root: bool,
    /// Whether old values can be paired with new ones here (see compile).
    pub correlatable: bool,
    /// The rule's own path, `...x-kubernetes-validations[i]`.
    pub path: String,
    /// The path of the schema node declaring it.
    pub node_path: &'a str,
}

pub(crate) fn compile_rule(
    env: &Env,
    v: &Value,
    node: &Node,
    at: &RuleAt,
    literals: &mut Literals,
) -> Result<Rule, Vec<FieldError>> {
    let path = at.path.as_str();
    let at_root = at.at_root;
    let mut errs = Vec::new();
    let Some(obj) = v.as_object() else {
        return Err(vec![FieldError::new(
            path,
            Reason::FieldValueTypeInvalid,
            "Invalid value: must be an object",
        )]);
    };
    let string_field = |errs: &mut Vec<FieldError>, key: &str| -> Option<String> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                errs.push(FieldError::new(
                    format!("{path}.{key}"),
                    Reason::FieldValueTypeInvalid,
                    format!("Invalid value: {}: must be a string", fmt_value(other)),
                ));
                None
            }
        }
    };
    let source = string_field(&mut errs, "rule").unwrap_or_default();
    let message = string_field(&mut errs, "message");
    let message_expression_src = string_field(&mut errs, "messageExpression");
    let field_path_src = string_field(&mut errs, "fieldPath");
    let reason_src = string_field(&mut errs, "reason");
    let optional_old_self = obj
        .get("optionalOldSelf")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let rule_path = format!("{path}.rule");
    let program = if source.trim().is_empty() {
        errs.push(FieldError::new(
            rule_path,
            Reason::FieldValueRequired,
            "Required value",
        ));
        None
    } else {
        match parse(env, &source) {
            Ok(p) => Some(p),
            Err(e) => {
                errs.push(FieldError::new(
                    rule_path,
                    Reason::FieldValueInvalid,
                    format!(
                        "Invalid value: {}: compilation failed: {}",
                        quote(&source),
                        e.trim()
                    ),
                ));
                None
            }
        }
    };

    if let Some(m) = &message
        && m.trim().is_empty()
    {
        errs.push(FieldError::new(
            format!("{path}.message"),
            Reason::FieldValueInvalid,
            format!(
                "Invalid value: {}: message must be non-empty if specified",
                quote(m)
            ),
        ));
    }
    if message.as_ref().is_some_and(|m| m.contains('\n')) {
        errs.push(FieldError::new(
            format!("{path}.message"),
            Reason::FieldValueInvalid,
            "Invalid value: message must not contain line breaks",
        ));
    }

    let message_expression = match &message_expression_src {
        None => None,
        Some(src) if src.trim().is_empty() => {
            errs.push(FieldError::new(
                format!("{path}.messageExpression"),
                Reason::FieldValueRequired,
                "Required value: messageExpression must be non-empty if specified",
            ));
            None
        }
        Some(src) => match parse(env, src) {
            Ok(p) => Some(p),
            Err(e) => {
                errs.push(FieldError::new(
                    format!("{path}.messageExpression"),
                    Reason::FieldValueInvalid,
                    format!(
                        "Invalid value: {}: messageExpression compilation failed: {}",
                        quote(src),
                        e.trim()
                    ),
                ));
                None
            }
        },
    };

    let reason = match reason_src.as_deref() {
        None => Reason::FieldValueInvalid,
        Some(r) => match Reason::from_rule_reason(r) {
            Some(r) => r,
            None => {
                errs.push(FieldError::new(
                    format!("{path}.reason"),
                    Reason::FieldValueNotSupported,
                    format!(
                        "Unsupported value: {}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                        quote(r)
                    ),
                ));
                Reason::FieldValueInvalid
            }
        },
    };

    let field_path = match &field_path_src {
        None => Vec::new(),
        Some(fp) => match parse_field_path(fp, node) {
            Ok(p) => p,
            Err(detail) => {
                errs.push(FieldError::new(
                    format!("{path}.fieldPath"),
                    Reason::FieldValueInvalid,
                    format!("Invalid value: {}: {detail}", quote(fp)),
                ));
                Vec::new()
            }
        },
    };

    if let Some(p) = &program {
        let checker = FieldCheck {
            node,
            at_root,
            optional_old_self,
        };
        let mut undefined = Vec::new();
        checker.resolve(p.expression(), &mut Vec::new(), &mut undefined);
        if let Some(field) = undefined.first() {
            errs.push(FieldError::new(
                format!("{path}.rule"),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: compilation failed: undefined field '{field}'",
                    quote(&source)
                ),
            ));
        }
    }

    let transition = program.as_ref().is_some_and(|p| {
        p.references().has_variable("oldSelf")
            || message_expression
                .as_ref()
                .is_some_and(|m| m.references().has_variable("oldSelf"))
    });
    if transition && !at.correlatable {
        errs.push(FieldError::new(
            format!("{path}.rule"),
            Reason::FieldValueInvalid,
            format!(
                "Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {}",
                quote(&source),
                at.node_path
            ),
        ));
    }
    if optional_old_self && !transition {
        errs.push(FieldError::new(
            format!("{path}.optionalOldSelf"),
            Reason::FieldValueForbidden,
            "Forbidden: may not be set on a rule that does not reference oldSelf",
        ));
    }

    // Literal patterns are compiled now, once, and refused if invalid or
    // too costly to compile, as kube-apiserver compiles them with the rule.
    let compiled = [
        ("rule", "compilation failed", &source, program.as_ref()),
        (
            "messageExpression",
            "messageExpression compilation failed",
            message_expression_src.as_ref().unwrap_or(&source),
            message_expression.as_ref(),
        ),
    ];
    for (key, failed, src, p) in compiled {
        let Some(p) = p else { continue };
        let mut patterns = Vec::new();
        literal_patterns(p.expression(), &mut patterns);
        for pattern in patterns {
            match literals.add(pattern) {
                Ok(()) => {}
                // A stored CRD keeps loading; the rule fails as it runs.
                Err(LiteralError::Invalid(_)) if !literals.enforce => {}
                Err(LiteralError::Invalid(msg)) => errs.push(FieldError::new(
                    format!("{path}.{key}"),
                    Reason::FieldValueInvalid,
                    format!(
                        "Invalid value: {}: {failed}: {}",
                        quote(src),
                        msg.replace('\n', " ")
                    ),
                )),
                Err(LiteralError::TooComplex(msg)) => errs.push(FieldError::new(
                    format!("{path}.{key}"),
                    Reason::FieldValueForbidden,
                    format!("Forbidden: {msg}"),
                )),
            }
        }
    }

    match program {
        Some(program) if errs.is_empty() => Ok(Rule {
            source,
            expr: runnable(&program),
            message,
            message_expression: message_expression
                .as_ref()
                .zip(message_expression_src)
                .map(|(p, src)| (src, runnable(p))),
            field_path,
            reason,
            optional_old_self,
            transition,
        }),
        _ => Err(errs),
    }
}

/// A light stand-in for CEL's type-checker: selecting a field that the
/// schema does not declare on a closed object fails at compile time, as
/// kube-apiserver reports `undefined field 'x'`.
struct FieldCheck<'a> {
    node: &'a Node,
    at_root: bool,
    optional_old_self: bool,
}

/// A resolved schema node, and whether it is the object's root.
type Resolved<'a> = Option<(&'a Node, bool)>;

impl<'a> FieldCheck<'a> {
    fn resolve(
        &self,
        e: &IdedExpr,
        scope: &mut Vec<(String, Resolved<'a>)>,
        undefined: &mut Vec<String>,
    ) -> Resolved<'a> {
        match &e.expr {
            Expr::Ident(name) => {
                if let Some((_, r)) = scope.iter().rev().find(|(n, _)| n == name) {
                    return *r;
                }
                match name.as_str() {
                    "self" => Some((self.node, self.at_root)),
                    "oldSelf" if !self.optional_old_self => Some((self.node, self.at_root)),
                    _ => None,
                }
            }
            Expr::Select(sel) => {
                let (parent, is_root) = self.resolve(&sel.operand, scope, undefined)?;
                let implicit = (is_root || parent.embedded)
                    && matches!(sel.field.as_str(), "apiVersion" | "kind" | "metadata");
                if implicit {
                    return None;
                }
                let closed = parent.ty == Some(Type::Object)
                    && !parent.preserve_unknown
                    && matches!(
                        parent.additional,
                        Additional::Unspecified | Additional::Allowed(false)
                    );
                if closed && !parent.properties.contains_key(&sel.field) {
                    undefined.push(sel.field.clone());
                    return None;
                }
                parent.child(&sel.field).map(|c| (c, false))
            }
            Expr::Call(call) => {
                if let Some(t) = &call.target {
                    self.resolve(t, scope, undefined);
                }
                let args: Vec<Resolved<'a>> = call
                    .args
                    .iter()
                    .map(|a| self.resolve(a, scope, undefined))
                    .collect();
                if call.func_name == "_[_]"
                    && let Some(Some((container, _))) = args.first()
                {
                    return match (&container.items, &container.additional) {
                        (Some(items), _) => Some((items, false)),
                        (None, Additional::Schema(a)) => Some((a, false)),
                        _ => None,
                    };
                }
                None
            }
            Expr::Comprehension(c) => {
                let range = self.resolve(&c.iter_range, scope, undefined);
                self.resolve(&c.accu_init, scope, undefined);
                // Over a list, the variable is an element; over a map, a key.
                let element = range.and_then(|(n, _)| n.items.as_deref().map(|i| (i, false)));
                let depth = scope.len();
                scope.push((c.iter_var.clone(), element));
                if let Some(v2) = &c.iter_var2 {
                    scope.push((v2.clone(), None));
                }
                scope.push((c.accu_var.clone(), None));
                self.resolve(&c.loop_cond, scope, undefined);
                self.resolve(&c.loop_step, scope, undefined);
                self.resolve(&c.result, scope, undefined);
                scope.truncate(depth);
                None
            }
            Expr::List(l) => {
                for el in &l.elements {
                    self.resolve(el, scope, undefined);
                }
                None
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        self.resolve(&me.key, scope, undefined);
                        self.resolve(&me.value, scope, undefined);
                    }
                }
                None
            }
            _ => None,
        }
    }
}

/// Parses a rule's `fieldPath` (`.spec.bmc`, `['name with dots']`) into
/// field names, each of which must exist in the schema below `node`.
fn parse_field_path(fp: &str, node: &Node) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = fp;
    let mut cur = Some(node);
    while !rest.is_empty() {
        let name;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            name = r[..end].to_string();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let Some(end) = r.find("']") else {
                return Err("fieldPath must be a valid path: unterminated bracket".into());
            };
            name = r[..end].to_string();
            rest = &r[end + 2..];
        } else {
            return Err("fieldPath must be a valid path: expected '.' or '['".into());
        }
        if name.is_empty() {
            return Err("fieldPath must be a valid path: empty field name".into());
        }
        let next = cur.and_then(|n| {
            if n.preserve_unknown && n.child(&name).is_none() {
                None
            } else {
                n.child(&name)
            }
        });
        if next.is_none() && !cur.is_some_and(|n| n.preserve_unknown) {
            return Err(format!(
                "fieldPath must be a valid path: does not refer to a valid field ({name})"
            ));
        }
        cur = next;
        out.push(name);
    }
    Ok(out)
}

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
    let values: Vec<&Value> = std::iter::once(obj).chain(old).collect();
    let meter = Arc::new(Mutex::new(Meter::new(Arc::clone(literals))));
    let mut walker = Walker {
        ctx: root_context(env, &meter),
        meter,
        literals,
        stats: Stats::collect(n, &values),
        costs: HashMap::new(),
        remaining: RUNTIME_CEL_COST_BUDGET,
        stopped: false,
        errs: Vec::new(),
    };
    walker.walk(n, obj, old, &Path::default(), 0);
    walker.errs
}

const MAX_DEPTH: usize = 256;

/// One validation's walk over the object, with its cost budget.
struct Walker<'a> {
    ctx: Context<'static, 'static>,
    meter: Arc<Mutex<Meter>>,
    literals: &'a Table,
    /// The largest values the object holds at each node, for estimates.
    stats: Stats,
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

fn lock(meter: &Mutex<Meter>) -> MutexGuard<'_, Meter> {
    meter
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Walker<'_> {
    fn walk(&mut self, n: &Node, v: &Value, old: Option<&Value>, path: &Path, depth: usize) {
        // Values of the wrong type were reported by OpenAPI validation
        // already; rules written for the declared type would only add noise.
        if self.stopped || depth > MAX_DEPTH || !type_matches(n, v) || v.is_null() {
            return;
        }
        if !n.rules.is_empty() {
            let root = depth == 0;
            let self_val = to_cel(v, Some(n), 0, root);
            let old_val = old
                .filter(|o| type_matches(n, o) && !o.is_null())
                .map(|o| to_cel(o, Some(n), 0, root));
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
                self.eval_rule(n, rule, root, &self_val, old_val.as_ref(), path);
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
                        self.walk(child, val, old_child, &path.field(name), depth + 1);
                    } else if let Additional::Schema(a) = &n.additional {
                        self.walk(a, val, old_child, &path.key(name), depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item) = &n.items else { return };
                let old_items = old.and_then(Value::as_array);
                for (i, val) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|olds| correlate(n, val, olds));
                    self.walk(item, val, old_item, &path.index(i), depth + 1);
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
        let sizes = Sizes::Runtime(&self.stats);
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
        self_val: &cel::Value,
        old_val: Option<&cel::Value>,
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
        let result = run(&self.ctx, program, self_val, old_val, rule);
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
        self_val: &cel::Value,
        old_val: Option<&cel::Value>,
        path: &Path,
    ) {
        if rule.transition && old_val.is_none() && !rule.optional_old_self {
            return;
        }
        let type_name = node_type_name(n);
        let (rule_cost, message_cost) = self.cost_of(n, rule, root);
        let result = match self.metered(rule_cost, &rule.expr, self_val, old_val, rule) {
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
                let mut field = path.clone();
                for f in &rule.field_path {
                    field = field.field(f);
                }
                let mut detail = None;
                if let Some((src, m)) = &rule.message_expression {
                    match self.metered(message_cost, m, self_val, old_val, rule) {
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
                    field.render(),
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

fn run(
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

/// JSON to CEL, guided by the schema as Kubernetes types it: integers
/// stay ints, `number` fields are always doubles (so `1` and `1.5` compare
/// alike), objects become maps, and strings with format `date-time`/`date`,
/// `duration` or `byte` become timestamps, durations and bytes.
/// At the root, `metadata` shows only `name` and `generateName`.
pub(crate) fn to_cel(v: &Value, n: Option<&Node>, depth: usize, root: bool) -> cel::Value {
    if depth > MAX_DEPTH {
        return cel::Value::Null;
    }
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(num) => {
            let want_float = n.is_some_and(|n| n.ty == Some(Type::Number));
            if !want_float && let Some(i) = num.as_i64() {
                cel::Value::Int(i)
            } else if !want_float && let Some(u) = num.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(num.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => {
            let format = n
                .filter(|n| n.ty == Some(Type::String))
                .and_then(|n| n.format.as_deref());
            format
                .and_then(|f| formatted_string(f, s))
                .unwrap_or_else(|| cel::Value::String(Arc::new(s.clone())))
        }
        Value::Array(items) => {
            let item = n.and_then(|n| n.items.as_deref());
            cel::Value::List(Arc::new(
                items
                    .iter()
                    .map(|i| to_cel(i, item, depth + 1, false))
                    .collect(),
            ))
        }
        Value::Object(obj) => {
            let mut map = HashMap::with_capacity(obj.len());
            for (k, val) in obj {
                let child = n.and_then(|n| n.child(k));
                let converted = if root && k == "metadata" {
                    root_metadata(val)
                } else {
                    to_cel(val, child, depth + 1, false)
                };
                map.insert(Key::String(Arc::new(k.clone())), converted);
            }
            cel::Value::Map(Map { map: Arc::new(map) })
        }
    }
}

fn root_metadata(v: &Value) -> cel::Value {
    let mut map = HashMap::new();
    if let Some(obj) = v.as_object() {
        for k in ["name", "generateName"] {
            if let Some(Value::String(s)) = obj.get(k) {
                map.insert(
                    Key::String(Arc::new(k.to_string())),
                    cel::Value::String(Arc::new(s.clone())),
                );
            }
        }
    }
    cel::Value::Map(Map { map: Arc::new(map) })
}

/// A string in the CEL type its format implies; `None` keeps it a string
/// (also when it does not parse, which OpenAPI validation reports).
fn formatted_string(format: &str, s: &str) -> Option<cel::Value> {
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(cel::Value::Timestamp),
        "date" => {
            let day = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
            let utc = chrono::FixedOffset::east_opt(0)?;
            let midnight = day.and_hms_opt(0, 0, 0)?.and_local_timezone(utc).single()?;
            Some(cel::Value::Timestamp(midnight))
        }
        "duration" => crate::formats::parse_duration(s)
            .map(|ns| cel::Value::Duration(chrono::Duration::nanoseconds(ns))),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .ok()
                .map(|b| cel::Value::Bytes(Arc::new(b)))
        }
        _ => None,
    }
}

/// The context every rule of one validation runs under: the environment
/// plus the Kubernetes library functions cel's standard library lacks.
/// Its regular expression functions compile patterns through `meter`.
fn root_context(env: &Arc<Env>, meter: &Arc<Mutex<Meter>>) -> Context<'static, 'static> {
    use cel::extractors::{Arguments, This};
    let mut ctx = Context::with_env(Arc::clone(env));
    // Names already declared by the environment cannot be added; rules
    // calling them then get the environment's version instead.
    let _ = ctx.add_function("isSorted", k8s::is_sorted);
    let _ = ctx.add_function("sum", k8s::sum);
    let _ = ctx.add_function("min", k8s::min);
    let _ = ctx.add_function("max", k8s::max);
    let m = Arc::clone(meter);
    let _ = ctx.add_function(
        MATCHES,
        move |This(s): This<Arc<String>>, pattern: Arc<String>| k8s::matches(&m, &s, &pattern),
    );
    let m = Arc::clone(meter);
    let _ = ctx.add_function(
        "find",
        move |This(s): This<Arc<String>>, pattern: Arc<String>| k8s::find(&m, &s, &pattern),
    );
    let m = Arc::clone(meter);
    let _ = ctx.add_function(
        "findAll",
        move |This(s): This<Arc<String>>, pattern: Arc<String>, Arguments(args): Arguments| {
            k8s::find_all(&m, &s, &pattern, &args)
        },
    );
    let _ = ctx.add_function("isURL", k8s::is_url);
    ctx
}

/// Kubernetes' CEL list, regex and URL library functions.
mod k8s {
    use std::cmp::Ordering;
    use std::sync::{Arc, Mutex};

    use cel::extractors::{Arguments, This};
    use cel::{ExecutionError, Value};

    use crate::regexes::Meter;

    type Result<T> = std::result::Result<T, ExecutionError>;

    fn compare(name: &str, a: &Value, b: &Value) -> Result<Ordering> {
        a.partial_cmp(b).ok_or_else(|| {
            ExecutionError::function_error(name, format!("cannot compare {a:?} and {b:?}"))
        })
    }

    pub fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<bool> {
        for pair in list.windows(2) {
            if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub fn sum(This(list): This<Arc<Vec<Value>>>) -> Result<Value> {
        let mut acc = match list.first() {
            None | Some(Value::Int(_)) => Value::Int(0),
            Some(Value::UInt(_)) => Value::UInt(0),
            Some(Value::Float(_)) => Value::Float(0.0),
            Some(other) => {
                return Err(ExecutionError::function_error(
                    "sum",
                    format!("cannot sum {other:?}"),
                ));
            }
        };
        for v in list.iter() {
            acc = match (&acc, v) {
                (Value::Int(a), Value::Int(b)) => Value::Int(
                    a.checked_add(*b)
                        .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
                ),
                (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                    a.checked_add(*b)
                        .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
                ),
                (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
                _ => {
                    return Err(ExecutionError::function_error(
                        "sum",
                        "list elements must all be of one numeric type",
                    ));
                }
            };
        }
        Ok(acc)
    }

    fn extreme(name: &str, list: &[Value], keep: Ordering) -> Result<Value> {
        let Some(first) = list.first() else {
            return Err(ExecutionError::function_error(
                name,
                format!("{name} called on empty list"),
            ));
        };
        let mut best = first;
        for v in &list[1..] {
            if compare(name, v, best)? == keep {
                best = v;
            }
        }
        Ok(best.clone())
    }

    /// `list.min()`; called as a function, `min(a, b, ...)` or `min(list)`.
    /// As a method, `This` is the list and there are no arguments; as a
    /// function, `This` is the first argument, also found in `args`.
    pub fn min(This(this): This<Value>, Arguments(args): Arguments) -> Result<Value> {
        let items = if args.is_empty() {
            flatten_args(std::slice::from_ref(&this))
        } else {
            flatten_args(&args)
        };
        extreme("min", &items, Ordering::Less)
    }

    pub fn max(This(this): This<Value>, Arguments(args): Arguments) -> Result<Value> {
        let items = if args.is_empty() {
            flatten_args(std::slice::from_ref(&this))
        } else {
            flatten_args(&args)
        };
        extreme("max", &items, Ordering::Greater)
    }

    fn flatten_args(args: &[Value]) -> Vec<Value> {
        match args {
            [Value::List(list)] => list.to_vec(),
            other => other.to_vec(),
        }
    }

    fn regex(
        meter: &Mutex<Meter>,
        name: &str,
        s: &str,
        pattern: &str,
    ) -> Result<Arc<regex::Regex>> {
        super::lock(meter).regex(name, pattern, s.len())
    }

    /// `s.matches(pattern)`, as cel's, but compiling each pattern once.
    pub fn matches(meter: &Mutex<Meter>, s: &str, pattern: &str) -> Result<bool> {
        Ok(regex(meter, "matches", s, pattern)?.is_match(s))
    }

    /// The first match of a regex, or the empty string.
    pub fn find(meter: &Mutex<Meter>, s: &str, pattern: &str) -> Result<Value> {
        let re = regex(meter, "find", s, pattern)?;
        Ok(Value::String(Arc::new(
            re.find(s)
                .map(|m| m.as_str().to_string())
                .unwrap_or_default(),
        )))
    }

    /// All matches of a regex, at most `limit` of them if given (negative: all).
    pub fn find_all(meter: &Mutex<Meter>, s: &str, pattern: &str, args: &[Value]) -> Result<Value> {
        let re = regex(meter, "findAll", s, pattern)?;
        let limit = match args.get(1) {
            Some(Value::Int(n)) if *n >= 0 => usize::try_from(*n).unwrap_or(usize::MAX),
            _ => usize::MAX,
        };
        Ok(Value::List(Arc::new(
            re.find_iter(s)
                .take(limit)
                .map(|m| Value::String(Arc::new(m.as_str().to_string())))
                .collect(),
        )))
    }

    pub fn is_url(This(s): This<Arc<String>>) -> bool {
        crate::formats::is_uri(&s)
    }
}
