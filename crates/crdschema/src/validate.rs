//! OpenAPI value validation, worded as kube-apiserver words the go-openapi
//! errors it converts into field errors.

use serde_json::Value;

use crate::error::{FieldError, Reason};
use crate::formats;
use crate::node::{Additional, ListType, Node, Type};
use crate::path::Path;
use crate::value::{correlate, json_eq, json_type, type_matches};
use crate::wording::{fmt_num, fmt_value, quote};

const MAX_DEPTH: usize = 256;

/// On update, `old` enables ratcheting as kube-apiserver does: a value
/// equal to the old value at the same (correlatable) path is not
/// re-validated, so objects stored under an older, looser schema can still
/// be updated without first fixing fields the update does not touch.
pub(crate) fn validate_root(n: &Node, v: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let at = At {
        depth: 0,
        root: true,
        old,
    };
    validate_at(n, v, &Path::default(), errs, at);
}

/// Where a value sits: its depth, whether it is the object's top level
/// (whose `metadata` the server validates as ObjectMeta, so the schema's
/// view of it is skipped), and the old value at the same path.
#[derive(Clone, Copy)]
struct At<'o> {
    depth: usize,
    root: bool,
    old: Option<&'o Value>,
}

impl<'o> At<'o> {
    fn child(self, old: Option<&'o Value>) -> At<'o> {
        At {
            depth: self.depth + 1,
            root: false,
            old,
        }
    }
}

pub(crate) fn validate_value(n: &Node, v: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let at = At {
        depth: 0,
        root: false,
        old: None,
    };
    validate_at(n, v, path, errs, at);
}

fn invalid(path: &Path, v: &Value, detail: String) -> FieldError {
    FieldError::new(
        path.render_openapi(),
        Reason::FieldValueInvalid,
        format!("Invalid value: {}: {detail}", fmt_value(v)),
    )
}

fn validate_at(n: &Node, v: &Value, path: &Path, errs: &mut Vec<FieldError>, at: At) {
    if at.depth > MAX_DEPTH || at.old.is_some_and(|o| json_eq(o, v)) {
        return;
    }
    let p = path.openapi();
    if !type_matches(n, v) {
        let want = if n.int_or_string {
            "integer,string"
        } else {
            n.ty.map(Type::as_str).unwrap_or("")
        };
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueTypeInvalid,
            format!(
                "Invalid value: {}: {p} in body must be of type {want}: {}",
                fmt_value(v),
                quote(json_type(v))
            ),
        ));
        return;
    }
    if v.is_null() {
        return;
    }

    if let Some(values) = &n.enum_values
        && !values.iter().any(|e| json_eq(e, v))
    {
        let supported: Vec<String> = values
            .iter()
            .map(|e| match e {
                Value::String(s) => quote(s),
                other => quote(&other.to_string()),
            })
            .collect();
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueNotSupported,
            format!(
                "Unsupported value: {}: supported values: {}",
                fmt_value(v),
                supported.join(", ")
            ),
        ));
    }

    match v {
        Value::String(s) => validate_string(n, s, v, path, errs),
        Value::Number(num) => validate_number(n, num, v, path, errs),
        Value::Array(items) => validate_array(n, items, path, errs, at),
        Value::Object(obj) => validate_object(n, obj, path, errs, at),
        _ => {}
    }

    validate_junctors(n, v, path, errs, at);
}

fn validate_string(n: &Node, s: &str, v: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let p = path.openapi();
    if let Some(format) = &n.format
        && !formats::check_string(format, s)
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueTypeInvalid,
            format!(
                "Invalid value: {}: {p} in body must be of type {format}: {}",
                quote(s),
                quote(s)
            ),
        ));
    }
    let len = s.chars().count() as u64;
    if let Some(max) = n.max_length
        && len > max
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueTooLong,
            format!("Too long: may not be longer than {max}"),
        ));
    }
    if let Some(min) = n.min_length
        && len < min
    {
        errs.push(invalid(
            path,
            v,
            format!("{p} in body should be at least {min} chars long"),
        ));
    }
    if let Some((src, re)) = &n.pattern
        && !re.is_match(s)
    {
        errs.push(invalid(
            path,
            v,
            format!("{p} in body should match '{src}'"),
        ));
    }
}

fn validate_number(
    n: &Node,
    num: &serde_json::Number,
    v: &Value,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let p = path.openapi();
    let Some(x) = num.as_f64() else {
        return;
    };
    if n.ty == Some(Type::Integer)
        && let Some(f) = &n.format
        && !formats::check_integer(f, num)
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueTypeInvalid,
            format!(
                "Invalid value: {}: {p} in body must be of type {f}: {}",
                fmt_value(v),
                quote(&num.to_string())
            ),
        ));
    }
    if let Some(max) = n.maximum {
        if n.exclusive_maximum && x >= max {
            errs.push(invalid(
                path,
                v,
                format!("{p} in body should be less than {}", fmt_num(max)),
            ));
        } else if x > max {
            errs.push(invalid(
                path,
                v,
                format!(
                    "{p} in body should be less than or equal to {}",
                    fmt_num(max)
                ),
            ));
        }
    }
    if let Some(min) = n.minimum {
        if n.exclusive_minimum && x <= min {
            errs.push(invalid(
                path,
                v,
                format!("{p} in body should be greater than {}", fmt_num(min)),
            ));
        } else if x < min {
            errs.push(invalid(
                path,
                v,
                format!(
                    "{p} in body should be greater than or equal to {}",
                    fmt_num(min)
                ),
            ));
        }
    }
    if let Some(m) = n.multiple_of {
        let ok = match (num.as_i64(), m.fract() == 0.0 && m.abs() < 9.0e15) {
            (Some(i), true) => i % (m as i64) == 0,
            _ => {
                let q = x / m;
                q.is_finite() && (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
            }
        };
        if !ok {
            errs.push(invalid(
                path,
                v,
                format!("{p} in body should be a multiple of {}", fmt_num(m)),
            ));
        }
    }
}

fn validate_array(n: &Node, items: &[Value], path: &Path, errs: &mut Vec<FieldError>, at: At) {
    let p = &path.openapi();
    let olds = at.old.and_then(Value::as_array);
    let len = items.len() as u64;
    if let Some(max) = n.max_items
        && len > max
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueTooMany,
            format!("Too many: {len}: must have at most {max} items"),
        ));
    }
    if let Some(min) = n.min_items
        && len < min
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueInvalid,
            format!("Invalid value: {len}: {p} in body should have at least {min} items"),
        ));
    }
    if let Some(item) = &n.items {
        for (i, val) in items.iter().enumerate() {
            let old = olds.and_then(|o| correlate(n, val, o));
            validate_at(item, val, &path.index(i), errs, at.child(old));
        }
    }
    // set lists and uniqueItems: each repeated element is reported once, at
    // its own index, as kube-apiserver's list-type validation does.
    if n.unique_items || n.list_type == Some(ListType::Set) {
        for (i, val) in items.iter().enumerate() {
            if items[..i].iter().any(|prev| json_eq(prev, val)) {
                errs.push(FieldError::new(
                    path.index(i).render(),
                    Reason::FieldValueDuplicate,
                    format!("Duplicate value: {}", fmt_value(val)),
                ));
            }
        }
    }
    if n.list_type == Some(ListType::Map) && !n.list_map_keys.is_empty() {
        let key_of = |val: &Value| -> Option<serde_json::Map<String, Value>> {
            let obj = val.as_object()?;
            let mut key = serde_json::Map::new();
            for k in &n.list_map_keys {
                // A missing key takes the key property's default, if any.
                let kv = obj.get(k).cloned().or_else(|| {
                    n.items
                        .as_ref()
                        .and_then(|it| it.properties.get(k))
                        .and_then(|kn| kn.default.clone())
                });
                key.insert(k.clone(), kv.unwrap_or(Value::Null));
            }
            Some(key)
        };
        let keys: Vec<_> = items.iter().map(key_of).collect();
        for (i, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            if keys[..i]
                .iter()
                .flatten()
                .any(|prev| json_eq(&Value::Object(prev.clone()), &Value::Object(key.clone())))
            {
                errs.push(FieldError::new(
                    path.index(i).render(),
                    Reason::FieldValueDuplicate,
                    format!("Duplicate value: {}", Value::Object(key.clone())),
                ));
            }
        }
    }
}

fn validate_object(
    n: &Node,
    obj: &serde_json::Map<String, Value>,
    path: &Path,
    errs: &mut Vec<FieldError>,
    at: At,
) {
    let p = &path.openapi();
    let root = at.root;
    let count = obj.len() as u64;
    if let Some(max) = n.max_properties
        && count > max
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueTooMany,
            format!("Too many: {count}: must have at most {max} items"),
        ));
    }
    if let Some(min) = n.min_properties
        && count < min
    {
        errs.push(FieldError::new(
            p.to_string(),
            Reason::FieldValueInvalid,
            format!("Invalid value: {count}: {p} in body should have at least {min} properties"),
        ));
    }
    for r in &n.required {
        let skipped = root && r == "metadata";
        if !skipped && !obj.contains_key(r) {
            errs.push(FieldError::new(
                path.field(r).render_openapi(),
                Reason::FieldValueRequired,
                "Required value",
            ));
        }
    }
    for (name, val) in obj {
        if root && name == "metadata" {
            continue;
        }
        if let Some(child) = n.properties.get(name) {
            let old = at.old.and_then(|o| o.get(name));
            validate_at(child, val, &path.field(name), errs, at.child(old));
        } else {
            match &n.additional {
                Additional::Schema(a) => {
                    let old = at.old.and_then(|o| o.get(name));
                    validate_at(a, val, &path.key(name), errs, at.child(old))
                }
                Additional::Allowed(false) if !n.preserve_unknown => {
                    errs.push(FieldError::new(
                        path.field(name).render_openapi(),
                        Reason::FieldValueForbidden,
                        format!(
                            "Forbidden: {} in body is a forbidden property",
                            path.field(name).render_openapi()
                        ),
                    ));
                }
                _ => {}
            }
        }
    }
    if n.embedded {
        for field in ["apiVersion", "kind"] {
            if obj
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::new(
                    path.field(field).render(),
                    Reason::FieldValueRequired,
                    "Required value: must not be empty",
                ));
            }
        }
        if let Some(meta) = obj.get("metadata")
            && !n.properties.contains_key("metadata")
            && !meta.is_object()
        {
            errs.push(FieldError::new(
                path.field("metadata").render(),
                Reason::FieldValueTypeInvalid,
                format!("Invalid value: {}: must be an object", fmt_value(meta)),
            ));
        }
    }
}

fn validate_junctors(n: &Node, v: &Value, path: &Path, errs: &mut Vec<FieldError>, at: At) {
    let p = path.openapi();
    // The subschemas see the same value, with the same old value.
    let sub = At {
        depth: at.depth + 1,
        root: false,
        old: at.old,
    };
    let run = |s: &Node| {
        let mut e = Vec::new();
        validate_at(s, v, path, &mut e, sub);
        e
    };
    if !n.all_of.is_empty() {
        let mut failed = false;
        for s in &n.all_of {
            let mut e = run(s);
            failed |= !e.is_empty();
            errs.append(&mut e);
        }
        if failed {
            errs.push(invalid(
                path,
                v,
                format!("{p} in body must validate all the schemas (allOf)"),
            ));
        }
    }
    if !n.any_of.is_empty() {
        let results: Vec<_> = n.any_of.iter().map(run).collect();
        if results.iter().all(|e| !e.is_empty()) {
            errs.push(invalid(
                path,
                v,
                format!("{p} in body must validate at least one schema (anyOf)"),
            ));
            if let Some(best) = results.into_iter().min_by_key(Vec::len) {
                errs.extend(best);
            }
        }
    }
    if !n.one_of.is_empty() {
        let results: Vec<_> = n.one_of.iter().map(run).collect();
        let passed = results.iter().filter(|e| e.is_empty()).count();
        if passed != 1 {
            errs.push(invalid(
                path,
                v,
                format!("{p} in body must validate one and only one schema (oneOf)"),
            ));
            if passed == 0
                && let Some(best) = results.into_iter().min_by_key(Vec::len)
            {
                errs.extend(best);
            }
        }
    }
    if let Some(not) = &n.not
        && run(not).is_empty()
    {
        errs.push(invalid(
            path,
            v,
            format!("{p} in body must not validate the schema (not)"),
        ));
    }
}
