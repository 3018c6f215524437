//! Compiling one `x-kubernetes-validations` entry into a [`Rule`]: its
//! fields checked, its expressions parsed, the fields it selects checked
//! against the schema, and its literal patterns compiled.

use cel::Env;
use serde_json::Value;

use super::field_check::{FieldCheck, parse_field_path};
use super::parse::{literal_patterns, parse, runnable};
use crate::error::{FieldError, Reason};
use crate::node::{Node, Rule};
use crate::regexes::{LiteralError, Literals};
use crate::wording::{fmt_value, quote};

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
