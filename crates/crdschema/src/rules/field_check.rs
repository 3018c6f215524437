//! What compiling a rule checks of the schema fields it names: fields its
//! expression selects, and its `fieldPath`.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::node::{Additional, Node, Type};

/// A light stand-in for CEL's type-checker: selecting a field that the
/// schema does not declare on a closed object fails at compile time, as
/// kube-apiserver reports `undefined field 'x'`.
pub(super) struct FieldCheck<'a> {
    pub node: &'a Node,
    pub at_root: bool,
    pub optional_old_self: bool,
}

/// A resolved schema node, and whether it is the object's root.
type Resolved<'a> = Option<(&'a Node, bool)>;

impl<'a> FieldCheck<'a> {
    pub(super) fn resolve(
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
pub(super) fn parse_field_path(fp: &str, node: &Node) -> Result<Vec<String>, String> {
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
