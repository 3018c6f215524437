//! Turns an `openAPIV3Schema` JSON document into a [`Node`] tree, checking
//! the structural-schema rules kube-apiserver enforces on CRDs.

use regex::Regex;
use serde_json::{Map, Value};

use crate::cost::check_static;
use crate::error::{FieldError, Reason};
use crate::node::{Additional, ListType, Node, ROOT_PATH, Type};
use crate::path::Path;
use crate::regexes::{Literals, Table};
use crate::rules;
use crate::transform;
use crate::validate::validate_value;
use crate::wording::{fmt_value, quote};

/// Deeper schemas than this are refused rather than risking the stack.
const MAX_DEPTH: usize = 64;

struct Ctx<'a> {
    env: &'a cel::Env,
    errs: Vec<FieldError>,
    /// The literal patterns of the rules, compiled with them.
    literals: Literals,
}

impl Ctx<'_> {
    fn err(&mut self, field: String, reason: Reason, message: impl Into<String>) {
        self.errs.push(FieldError::new(field, reason, message));
    }
}

/// Which part of the schema a node sits in; structural rules differ.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    Property,
    Items,
    Additional,
    /// Inside allOf/anyOf/oneOf/not: value validations only.
    Junctor,
}

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

/// kube-apiserver allows only `name` and `generateName` to be specified
/// under the root's `metadata`; the rest of ObjectMeta is its own business.
fn check_root_metadata(ctx: &mut Ctx, schema: &Value) {
    let Some(meta) = schema.get("properties").and_then(|p| p.get("metadata")) else {
        return;
    };
    let path = format!("{ROOT_PATH}.properties[metadata]");
    let Some(obj) = meta.as_object() else {
        return;
    };
    let allowed_keys = ["type", "properties", "description"];
    let props_ok = obj
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
    if !props_ok || obj.keys().any(|k| !allowed_keys.contains(&k.as_str())) {
        ctx.err(
            path,
            Reason::FieldValueForbidden,
            "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
        );
    }
}

/// `correlatable` tells whether values at this node can be paired with
/// their old values on update (not below atomic lists), which transition
/// rules need.
fn compile_node(
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
    n.int_or_string = get_bool(ctx, obj, "x-kubernetes-int-or-string", path);
    n.preserve_unknown = get_bool(ctx, obj, "x-kubernetes-preserve-unknown-fields", path);
    n.embedded = get_bool(ctx, obj, "x-kubernetes-embedded-resource", path);
    n.nullable = get_bool(ctx, obj, "nullable", path);
    n.unique_items = get_bool(ctx, obj, "uniqueItems", path);
    n.exclusive_minimum = get_bool(ctx, obj, "exclusiveMinimum", path);
    n.exclusive_maximum = get_bool(ctx, obj, "exclusiveMaximum", path);

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
            let keyed = matches!(n.list_type, Some(ListType::Map) | Some(ListType::Set));
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
        check_map_keys(ctx, &n, path);
    }

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
                    match rules::compile_rule(ctx.env, r, &n, &rule_at, &mut ctx.literals) {
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

    n.rules_below = n.properties.values().any(Node::has_rules)
        || n.items.as_ref().is_some_and(|i| i.has_rules())
        || matches!(&n.additional, Additional::Schema(a) if a.has_rules());
    Some(n)
}

fn check_map_keys(ctx: &mut Ctx, n: &Node, path: &str) {
    let kp = format!("{path}.x-kubernetes-list-map-keys");
    if n.list_map_keys.is_empty() {
        ctx.err(
            kp.clone(),
            Reason::FieldValueRequired,
            "Required value: must not be empty if x-kubernetes-list-type is map",
        );
    }
    let Some(items) = &n.items else {
        return;
    };
    if items.ty != Some(Type::Object) {
        ctx.err(
            format!("{path}.items.type"),
            Reason::FieldValueInvalid,
            "Invalid value: must be object if parent array's x-kubernetes-list-type is map",
        );
        return;
    }
    for (i, k) in n.list_map_keys.iter().enumerate() {
        match items.properties.get(k) {
            None => ctx.err(
                format!("{kp}[{i}]"),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: entries must all be names of item properties",
                    quote(k)
                ),
            ),
            Some(p) if p.default.is_none() && !items.required.contains(k) => ctx.err(
                format!("{kp}[{i}]"),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: entries must all be names of item properties that are required or have a default",
                    quote(k)
                ),
            ),
            Some(p) if matches!(p.ty, Some(Type::Object) | Some(Type::Array)) => ctx.err(
                format!("{path}.items.properties[{k}].type"),
                Reason::FieldValueInvalid,
                "Invalid value: must be a scalar type if parent array's x-kubernetes-list-type is map",
            ),
            Some(_) => {}
        }
    }
}

/// Defaults must themselves be valid and free of unknown fields, as
/// kube-apiserver checks when a CRD is written.
fn check_defaults(ctx: &mut Ctx, n: &Node, path: &str) {
    if let Some(d) = &n.default {
        let dp = format!("{path}.default");
        let mut defaulted = d.clone();
        transform::default(n, &mut defaulted, 0);
        let mut pruned = defaulted.clone();
        transform::prune(n, &mut pruned, false, 0, &Path::default(), &mut Vec::new());
        if pruned != defaulted {
            ctx.err(
                dp.clone(),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: must not have unknown fields",
                    fmt_value(d)
                ),
            );
        }
        let mut errs = Vec::new();
        validate_value(n, &pruned, &Path::default(), &mut errs);
        for e in errs {
            let sub = if e.field.is_empty() {
                dp.clone()
            } else {
                format!("{dp}.{}", e.field)
            };
            ctx.err(sub, e.reason, e.message);
        }
    }
    for (name, c) in &n.properties {
        check_defaults(ctx, c, &format!("{path}.properties[{name}]"));
    }
    if let Some(items) = &n.items {
        check_defaults(ctx, items, &format!("{path}.items"));
    }
    if let Additional::Schema(a) = &n.additional {
        check_defaults(ctx, a, &format!("{path}.additionalProperties"));
    }
}

fn get_bool(ctx: &mut Ctx, obj: &Map<String, Value>, key: &str, path: &str) -> bool {
    match obj.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a boolean", fmt_value(other)),
            );
            false
        }
    }
}

fn get_string(ctx: &mut Ctx, obj: &Map<String, Value>, key: &str, path: &str) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a string", fmt_value(other)),
            );
            None
        }
    }
}

fn get_f64(ctx: &mut Ctx, obj: &Map<String, Value>, key: &str, path: &str) -> Option<f64> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be a number", fmt_value(other)),
            );
            None
        }
    }
}

fn get_u64(ctx: &mut Ctx, obj: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(other) => {
            ctx.err(
                format!("{path}.{key}"),
                Reason::FieldValueInvalid,
                format!(
                    "Invalid value: {}: must be a non-negative integer",
                    fmt_value(other)
                ),
            );
            None
        }
    }
}
