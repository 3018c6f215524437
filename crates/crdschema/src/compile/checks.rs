//! Checks that look across keywords or nodes: the root's `metadata`, the
//! keys of map lists, and defaults.

use serde_json::Value;

use super::context::Ctx;
use crate::error::Reason;
use crate::node::{Additional, Node, ROOT_PATH, Type};
use crate::path::Path;
use crate::transform;
use crate::validate::validate_value;
use crate::wording::{fmt_value, quote};

/// kube-apiserver allows only `name` and `generateName` to be specified
/// under the root's `metadata`; the rest of ObjectMeta is its own business.
pub(super) fn check_root_metadata(ctx: &mut Ctx, schema: &Value) {
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

pub(super) fn check_map_keys(ctx: &mut Ctx, n: &Node, path: &str) {
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
            Some(p) if matches!(p.ty, Some(Type::Object | Type::Array)) => ctx.err(
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
pub(super) fn check_defaults(ctx: &mut Ctx, n: &Node, path: &str) {
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
