//! Compiling one schema node, one function per keyword group, in the
//! order kube-apiserver reports their errors.

use regex::Regex;
use serde_json::{Map, Value};

use super::checks::check_map_keys;
use super::context::{Ctx, Place, get_bool, get_f64, get_string, get_u64};
use crate::error::Reason;
use crate::node::{Additional, ListType, Node, Type};
use crate::rules;
use crate::wording::{fmt_value, quote};

/// Deeper schemas than this are refused rather than risking the stack.
const MAX_DEPTH: usize = 64;

/// `correlatable` tells whether values at this node can be paired with
/// their old values on update (not below atomic lists), which transition
/// rules need.
pub(super) fn compile_node(
    ctx: &mut Ctx,
    v: &Value,
    path: &str,
    place: Place,
    depth: usize,
    correlatable: bool,
) -> Option<Node> {
    if depth > MAX_DEPTH {
        ctx.err(
            path.to_string(),
            Reason::FieldValueForbidden,
            format!("Forbidden: schema nesting deeper than {MAX_DEPTH} levels"),
        );
        return None;
    }
    let Some(obj) = v.as_object() else {
        ctx.err(
            path.to_string(),
            Reason::FieldValueTypeInvalid,
            format!("Invalid value: {}: must be an object", fmt_value(v)),
        );
        return None;
    };
    let mut n = Node::default();
    check_unsupported_keys(ctx, obj, path, place);
    compile_flags(ctx, obj, path, &mut n);
    compile_type(ctx, obj, path, place, &mut n);
    compile_bounds(ctx, obj, path, &mut n);
    compile_required(ctx, obj, path, &mut n);
    compile_enum_and_default(ctx, obj, path, &mut n);
    compile_object(ctx, obj, path, place, depth, correlatable, &mut n);
    compile_list(ctx, obj, path, place, depth, correlatable, &mut n);
    compile_junctors(ctx, obj, path, depth, correlatable, &mut n);
    compile_list_map_keys(ctx, obj, path, &mut n);
    compile_rules(ctx, obj, path, place, correlatable, &mut n);

    n.rules_below = n.properties.values().any(Node::has_rules)
        || n.items.as_ref().is_some_and(|i| i.has_rules())
        || matches!(&n.additional, Additional::Schema(a) if a.has_rules());
    Some(n)
}

/// Keywords structural schemas forbid, and values they forbid here.
fn check_unsupported_keys(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, place: Place) {
    let at = |k: &str| format!("{path}.{k}");
    for key in [
        "$ref",
        "definitions",
        "id",
        "additionalItems",
        "patternProperties",
        "dependencies",
        "$schema",
    ] {
        if obj.contains_key(key) {
            ctx.err(
                at(key),
                Reason::FieldValueForbidden,
                "Forbidden: must not be specified",
            );
        }
    }

    if obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        ctx.err(
            at("x-kubernetes-preserve-unknown-fields"),
            Reason::FieldValueInvalid,
            "Invalid value: false: must be true or undefined",
        );
    }
    if place == Place::Root && obj.contains_key("default") {
        ctx.err(
            at("default"),
            Reason::FieldValueForbidden,
            "Forbidden: must not be used at the root",
        );
    }
}

/// The boolean keywords.
fn compile_flags(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, n: &mut Node) {
    n.int_or_string = get_bool(ctx, obj, "x-kubernetes-int-or-string", path);
    n.preserve_unknown = get_bool(ctx, obj, "x-kubernetes-preserve-unknown-fields", path);
    n.embedded = get_bool(ctx, obj, "x-kubernetes-embedded-resource", path);
    n.nullable = get_bool(ctx, obj, "nullable", path);
    n.unique_items = get_bool(ctx, obj, "uniqueItems", path);
    n.exclusive_minimum = get_bool(ctx, obj, "exclusiveMinimum", path);
    n.exclusive_maximum = get_bool(ctx, obj, "exclusiveMaximum", path);
}

/// `type`, and what a node's place and flags require of it.
fn compile_type(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, place: Place, n: &mut Node) {
    let at = |k: &str| format!("{path}.{k}");
    match obj.get("type") {
        None => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(Value::String(s)) => match Type::parse(s) {
            Some(t) => n.ty = Some(t),
            None => ctx.err(
                at("type"),
                Reason::FieldValueNotSupported,
                format!(
                    "Unsupported value: {}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
                    quote(s)
                ),
            ),
        },
        Some(other) => ctx.err(
            at("type"),
            Reason::FieldValueTypeInvalid,
            format!("Invalid value: {}: must be a string", fmt_value(other)),
        ),
    }

    if place == Place::Junctor {
        for key in [
            "type",
            "default",
            "nullable",
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-embedded-resource",
            "x-kubernetes-int-or-string",
            "x-kubernetes-validations",
            "x-kubernetes-list-type",
            "x-kubernetes-list-map-keys",
            "additionalProperties",
        ] {
            if obj.contains_key(key) {
                ctx.err(
                    at(key),
                    Reason::FieldValueForbidden,
                    "Forbidden: must not be used inside of logical junctors",
                );
            }
        }
    } else if n.ty.is_none() && !n.int_or_string && !n.preserve_unknown {
        let detail = match place {
            Place::Root => "must not be empty at the root",
            Place::Items => "must not be empty for specified array items",
            _ => "must not be empty for specified object fields",
        };
        ctx.err(
            at("type"),
            Reason::FieldValueRequired,
            format!("Required value: {detail}"),
        );
    }
    if n.int_or_string && n.ty.is_some() {
        ctx.err(
            at("type"),
            Reason::FieldValueForbidden,
            "Forbidden: must be empty if x-kubernetes-int-or-string is true",
        );
    }
    if n.embedded && n.ty != Some(Type::Object) {
        ctx.err(
            at("type"),
            Reason::FieldValueInvalid,
            "Invalid value: must be object if x-kubernetes-embedded-resource is true",
        );
    }
}

/// `format`, and the bounds on numbers, lengths, counts and patterns.
fn compile_bounds(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, n: &mut Node) {
    let at = |k: &str| format!("{path}.{k}");
    n.format = get_string(ctx, obj, "format", path);
    n.minimum = get_f64(ctx, obj, "minimum", path);
    n.maximum = get_f64(ctx, obj, "maximum", path);
    n.multiple_of = get_f64(ctx, obj, "multipleOf", path);
    if n.multiple_of.is_some_and(|m| m <= 0.0) {
        ctx.err(
            at("multipleOf"),
            Reason::FieldValueInvalid,
            "Invalid value: must be greater than zero",
        );
        n.multiple_of = None;
    }
    n.min_length = get_u64(ctx, obj, "minLength", path);
    n.max_length = get_u64(ctx, obj, "maxLength", path);
    n.min_items = get_u64(ctx, obj, "minItems", path);
    n.max_items = get_u64(ctx, obj, "maxItems", path);
    n.min_properties = get_u64(ctx, obj, "minProperties", path);
    n.max_properties = get_u64(ctx, obj, "maxProperties", path);

    if let Some(p) = get_string(ctx, obj, "pattern", path) {
        match Regex::new(&p) {
            Ok(re) => n.pattern = Some((p, re)),
            Err(e) => ctx.err(
                at("pattern"),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: must be a valid regular expression, but isn't: {e}",
                    quote(&p)
                ),
            ),
        }
    }
}

/// `required`.
fn compile_required(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, n: &mut Node) {
    let at = |k: &str| format!("{path}.{k}");
    match obj.get("required") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, r) in items.iter().enumerate() {
                match r.as_str() {
                    Some(s) => n.required.push(s.to_string()),
                    None => ctx.err(
                        format!("{path}.required[{i}]"),
                        Reason::FieldValueTypeInvalid,
                        format!("Invalid value: {}: must be a string", fmt_value(r)),
                    ),
                }
            }
        }
        Some(other) => ctx.err(
            at("required"),
            Reason::FieldValueTypeInvalid,
            format!("Invalid value: {}: must be a list", fmt_value(other)),
        ),
    }
}

/// `enum` and `default`.
fn compile_enum_and_default(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, n: &mut Node) {
    let at = |k: &str| format!("{path}.{k}");
    match obj.get("enum") {
        None => {}
        Some(Value::Array(items)) => n.enum_values = Some(items.clone()),
        Some(other) => ctx.err(
            at("enum"),
            Reason::FieldValueTypeInvalid,
            format!("Invalid value: {}: must be a list", fmt_value(other)),
        ),
    }

    if let Some(d) = obj.get("default") {
        n.default = Some(d.clone());
    }
}

/// `properties` and `additionalProperties`, compiled recursively.
fn compile_object(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    path: &str,
    place: Place,
    depth: usize,
    correlatable: bool,
    n: &mut Node,
) {
    let at = |k: &str| format!("{path}.{k}");
    let child_place = if place == Place::Junctor {
        Place::Junctor
    } else {
        Place::Property
    };
    match obj.get("properties") {
        None => {}
        Some(Value::Object(props)) => {
            for (name, ps) in props {
                let p = format!("{path}.properties[{name}]");
                if let Some(c) = compile_node(ctx, ps, &p, child_place, depth + 1, correlatable) {
                    n.properties.insert(name.clone(), c);
                }
            }
        }
        Some(other) => ctx.err(
            at("properties"),
            Reason::FieldValueTypeInvalid,
            format!("Invalid value: {}: must be an object", fmt_value(other)),
        ),
    }

    match obj.get("additionalProperties") {
        None => {}
        Some(Value::Bool(b)) => n.additional = Additional::Allowed(*b),
        Some(s) => {
            let p = at("additionalProperties");
            let inner = if place == Place::Junctor {
                Place::Junctor
            } else {
                Place::Additional
            };
            if let Some(c) = compile_node(ctx, s, &p, inner, depth + 1, correlatable) {
                n.additional = Additional::Schema(Box::new(c));
            }
        }
    }
    if !n.properties.is_empty() && !matches!(n.additional, Additional::Unspecified) {
        ctx.err(
            at("additionalProperties"),
            Reason::FieldValueForbidden,
            "Forbidden: additionalProperties and properties are mutual exclusive",
        );
    }
    if n.preserve_unknown && matches!(n.additional, Additional::Allowed(false)) {
        ctx.err(
            at("additionalProperties"),
            Reason::FieldValueForbidden,
            "Forbidden: must not be false if x-kubernetes-preserve-unknown-fields is true",
        );
    }
}

/// `x-kubernetes-list-type` and `items`, compiled recursively.
fn compile_list(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    path: &str,
    place: Place,
    depth: usize,
    correlatable: bool,
    n: &mut Node,
) {
    let at = |k: &str| format!("{path}.{k}");
    match get_string(ctx, obj, "x-kubernetes-list-type", path).as_deref() {
        None => {}
        Some("atomic") => n.list_type = Some(ListType::Atomic),
        Some("set") => n.list_type = Some(ListType::Set),
        Some("map") => n.list_type = Some(ListType::Map),
        Some(other) => ctx.err(
            at("x-kubernetes-list-type"),
            Reason::FieldValueNotSupported,
            format!(
                "Unsupported value: {}: supported values: \"atomic\", \"map\", \"set\"",
                quote(other)
            ),
        ),
    }
    if n.list_type.is_some() && n.ty != Some(Type::Array) {
        ctx.err(
            at("x-kubernetes-list-type"),
            Reason::FieldValueInvalid,
            "Invalid value: must only be used if type is array",
        );
    }
    if let Some(items) = obj.get("items") {
        let p = at("items");
        if items.is_array() {
            ctx.err(
                p,
                Reason::FieldValueForbidden,
                "Forbidden: items must be a schema object and not an array",
            );
        } else {
            let inner = if place == Place::Junctor {
                Place::Junctor
            } else {
                Place::Items
            };
            let keyed = matches!(n.list_type, Some(ListType::Map | ListType::Set));
            n.items =
                compile_node(ctx, items, &p, inner, depth + 1, correlatable && keyed).map(Box::new);
        }
    } else if n.ty == Some(Type::Array) {
        ctx.err(
            at("items"),
            Reason::FieldValueRequired,
            "Required value: must be specified",
        );
    }
}

/// `allOf`, `anyOf`, `oneOf` and `not`, compiled recursively.
fn compile_junctors(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    path: &str,
    depth: usize,
    correlatable: bool,
    n: &mut Node,
) {
    let at = |k: &str| format!("{path}.{k}");
    for (key, list) in [
        ("allOf", &mut n.all_of),
        ("anyOf", &mut n.any_of),
        ("oneOf", &mut n.one_of),
    ] {
        match obj.get(key) {
            None => {}
            Some(Value::Array(items)) => {
                for (i, s) in items.iter().enumerate() {
                    let p = format!("{path}.{key}[{i}]");
                    if let Some(c) =
                        compile_node(ctx, s, &p, Place::Junctor, depth + 1, correlatable)
                    {
                        list.push(c);
                    }
                }
            }
            Some(other) => ctx.err(
                at(key),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a list", fmt_value(other)),
            ),
        }
    }
    if let Some(s) = obj.get("not") {
        n.not =
            compile_node(ctx, s, &at("not"), Place::Junctor, depth + 1, correlatable).map(Box::new);
    }
}

/// `x-kubernetes-list-map-keys`, and the keys a map list needs.
fn compile_list_map_keys(ctx: &mut Ctx, obj: &Map<String, Value>, path: &str, n: &mut Node) {
    let at = |k: &str| format!("{path}.{k}");
    if let Some(keys) = obj.get("x-kubernetes-list-map-keys") {
        let kp = at("x-kubernetes-list-map-keys");
        match keys.as_array() {
            Some(ks) => {
                for (i, k) in ks.iter().enumerate() {
                    match k.as_str() {
                        Some(s) => n.list_map_keys.push(s.to_string()),
                        None => ctx.err(
                            format!("{kp}[{i}]"),
                            Reason::FieldValueTypeInvalid,
                            format!("Invalid value: {}: must be a string", fmt_value(k)),
                        ),
                    }
                }
            }
            None => ctx.err(
                kp.clone(),
                Reason::FieldValueTypeInvalid,
                "Invalid value: must be a list",
            ),
        }
        if n.list_type != Some(ListType::Map) {
            ctx.err(
                kp,
                Reason::FieldValueForbidden,
                "Forbidden: must only be used if x-kubernetes-list-type is map",
            );
        }
    }
    if n.list_type == Some(ListType::Map) {
        check_map_keys(ctx, n, path);
    }
}

/// `x-kubernetes-validations`: the node's CEL rules.
fn compile_rules(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    path: &str,
    place: Place,
    correlatable: bool,
    n: &mut Node,
) {
    let at = |k: &str| format!("{path}.{k}");
    if let Some(rules_v) = obj.get("x-kubernetes-validations") {
        let rp = at("x-kubernetes-validations");
        match rules_v.as_array() {
            Some(list) => {
                for (i, r) in list.iter().enumerate() {
                    let rule_at = rules::RuleAt {
                        at_root: place == Place::Root,
                        correlatable,
                        path: format!("{rp}[{i}]"),
                        node_path: path,
                    };
                    match rules::compile_rule(ctx.env, r, n, &rule_at, &mut ctx.literals) {
                        Ok(rule) => n.rules.push(rule),
                        Err(mut e) => ctx.errs.append(&mut e),
                    }
                }
            }
            None => ctx.err(
                rp,
                Reason::FieldValueTypeInvalid,
                "Invalid value: must be a list",
            ),
        }
    }
    n.rule_reads = rules::rule_reads(&n.rules);
}
