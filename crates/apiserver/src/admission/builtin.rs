//! Built-in kinds: their defaults (Secret stringData, Namespace status, CRD status) and a
//! decoding into their typed form, as kube-apiserver decodes into Go structs.

use base64::Engine;
use serde_json::{Value, json};

use super::validation::cause;
use crate::authz::{CLUSTER_ROLE_BINDINGS, ROLE_BINDINGS};
use crate::meta;
use crate::registry::{self, Resource};
use crate::status::ApiError;

/// Decodes a built-in object into its k8s-openapi type, like kube-apiserver decoding into Go
/// structs: a wrong type is a 400; an unknown field is dropped with a warning, or with strict
/// field validation is a 400.
/// Returns the warnings for the dropped unknown fields.
pub fn check_builtin_types(
    res: &Resource,
    obj: &mut Value,
    strict: bool,
) -> Result<Vec<String>, ApiError> {
    use k8s_openapi::api;
    fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(
        obj: &Value,
    ) -> Result<Value, String> {
        let t: T = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        serde_json::to_value(&t).map_err(|e| e.to_string())
    }
    if !res.builtin || res.ephemeral {
        return Ok(Vec::new());
    }
    let decoded = match (res.group.as_str(), res.kind.as_str()) {
        ("", "ConfigMap") => typed::<api::core::v1::ConfigMap>(obj),
        ("", "Secret") => typed::<api::core::v1::Secret>(obj),
        ("", "Namespace") => typed::<api::core::v1::Namespace>(obj),
        // events.k8s.io Events are checked in their stored (core) form.
        (_, "Event") => typed::<api::core::v1::Event>(obj),
        ("coordination.k8s.io", "Lease") => typed::<api::coordination::v1::Lease>(obj),
        ("", "ServiceAccount") => typed::<api::core::v1::ServiceAccount>(obj),
        ("rbac.authorization.k8s.io", "Role") => typed::<api::rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "ClusterRole") => typed::<api::rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => typed::<api::rbac::v1::RoleBinding>(obj),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            typed::<api::rbac::v1::ClusterRoleBinding>(obj)
        }
        _ => return Ok(Vec::new()),
    };
    let what = format!(
        "{kind} in version \"{v}\" cannot be handled as a {kind}",
        kind = res.kind,
        v = res.version
    );
    let decoded = decoded.map_err(|e| ApiError::bad_request(format!("{what}: {e}")))?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &decoded, "", &mut unknown);
    if strict && !unknown.is_empty() {
        let list = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(ApiError::bad_request(format!(
            "{what}: strict decoding error: {list}"
        )));
    }
    if !unknown.is_empty() {
        drop_unknown(obj, &decoded);
    }
    Ok(unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect())
}

/// Fields of `sent` that the typed round trip dropped. Nulls and empty values are not
/// reported: the typed form may legitimately omit them.
fn unknown_fields(sent: &Value, decoded: &Value, path: &str, out: &mut Vec<String>) {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    match (sent, decoded) {
        (Value::Object(s), Value::Object(d)) => {
            for (k, sv) in s {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match d.get(k) {
                    Some(dv) => unknown_fields(sv, dv, &p, out),
                    None if !empty(sv) => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(s), Value::Array(d)) if s.len() == d.len() => {
            for (i, (sv, dv)) in s.iter().zip(d).enumerate() {
                unknown_fields(sv, dv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Removes from `sent` the fields the typed round trip dropped (see [`unknown_fields`]).
fn drop_unknown(sent: &mut Value, decoded: &Value) {
    match (sent, decoded) {
        (Value::Object(s), Value::Object(d)) => {
            s.retain(|k, _| d.contains_key(k));
            for (k, sv) in s.iter_mut() {
                if let Some(dv) = d.get(k) {
                    drop_unknown(sv, dv);
                }
            }
        }
        (Value::Array(s), Value::Array(d)) if s.len() == d.len() => {
            for (sv, dv) in s.iter_mut().zip(d) {
                drop_unknown(sv, dv);
            }
        }
        _ => {}
    }
}

/// Built-in kinds' defaulting and checks.
pub fn builtin_prepare(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    if !res.builtin {
        return Ok(());
    }
    match res.key.as_str() {
        "secrets" => {
            let name = meta::name_of(obj).to_string();
            if let Some(sd) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
                && let Some(sd) = sd.as_object()
            {
                if !obj.get("data").is_some_and(Value::is_object) {
                    obj["data"] = json!({});
                }
                for (k, v) in sd {
                    let s = v.as_str().unwrap_or_default();
                    obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
                }
            }
            if let Some(data) = obj.get("data").and_then(Value::as_object) {
                for (k, v) in data {
                    let ok = v.as_str().is_some_and(|s| {
                        base64::engine::general_purpose::STANDARD.decode(s).is_ok()
                    });
                    if !ok {
                        return Err(ApiError::invalid(
                            &res.target(&name),
                            vec![cause(
                                &format!("data[{k}]"),
                                "FieldValueInvalid",
                                "Invalid value: must be base64-encoded bytes",
                            )],
                        ));
                    }
                }
            }
            // kube-apiserver defaults an empty type, which a JSON null or "" decodes to.
            if obj.get("type").is_none_or(|t| t.is_null() || t == "") {
                obj["type"] = json!("Opaque");
            }
        }
        registry::NAMESPACE_KEY => {
            let terminating = obj.pointer("/metadata/deletionTimestamp").is_some();
            obj["status"] = json!({"phase": if terminating { "Terminating" } else { "Active" }});
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                let name = obj_name_from(m);
                let labels = m.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        registry::CRD_KEY => {
            let name = meta::name_of(obj).to_string();
            if let Err(causes) =
                registry::crd_resources(obj, ferrometal_crdschema::CostLimits::Enforce)
            {
                return Err(ApiError::invalid(&res.target(&name), causes));
            }
            let now = meta::now();
            let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
            let mut accepted = names.clone();
            if accepted.get("singular").is_none()
                && let Some(k) = accepted.get("kind").and_then(Value::as_str)
            {
                accepted["singular"] = json!(k.to_lowercase());
            }
            if accepted.get("listKind").is_none()
                && let Some(k) = accepted.get("kind").and_then(Value::as_str)
            {
                accepted["listKind"] = json!(format!("{k}List"));
            }
            let stored: Vec<Value> = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect();
            let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
            obj["status"] = json!({
                "conditions": [
                    cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                    cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                ],
                "acceptedNames": accepted,
                "storedVersions": stored,
            });
        }
        _ => {}
    }
    Ok(())
}

/// Built-in kinds' fields that may not change on update, as kube-apiserver's
/// `ValidateRoleBindingUpdate` and `ValidateSecretUpdate`: a binding that pointed at another
/// role would silently move its subjects' permissions; Secret consumers key off its type.
pub fn check_builtin_update(res: &Resource, old: &Value, new: &Value) -> Result<(), ApiError> {
    if !res.builtin {
        return Ok(());
    }
    let bad = match res.key.as_str() {
        ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS => {
            let role_ref = |o: &Value| {
                ["apiGroup", "kind", "name"].map(|k| {
                    o.pointer(&format!("/roleRef/{k}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                })
            };
            let [group, kind, name] = role_ref(new);
            (role_ref(old) != role_ref(new)).then(|| {
                cause(
                    "roleRef",
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: rbac.RoleRef{{APIGroup:{group:?}, Kind:{kind:?}, Name:{name:?}}}: cannot change roleRef"
                    ),
                )
            })
        }
        "secrets" => (old.get("type") != new.get("type")).then(|| {
            let t = new.get("type").and_then(Value::as_str).unwrap_or_default();
            cause(
                "type",
                "FieldValueInvalid",
                format!("Invalid value: {t:?}: field is immutable"),
            )
        }),
        _ => None,
    };
    match bad {
        Some(c) => Err(ApiError::invalid(&res.target(meta::name_of(new)), vec![c])),
        None => Ok(()),
    }
}

/// Conditions whose status did not change keep their lastTransitionTime, so rewriting an
/// unchanged CRD is a no-op.
pub fn keep_transition_times(old: &Value, new: &mut Value) {
    let Some(old_conds) = old.pointer("/status/conditions").and_then(Value::as_array) else {
        return;
    };
    let Some(conds) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in conds {
        if let Some(prev) = old_conds
            .iter()
            .find(|o| o.get("type") == c.get("type") && o.get("status") == c.get("status"))
            && let Some(t) = prev.get("lastTransitionTime")
        {
            c["lastTransitionTime"] = t.clone();
        }
    }
}

fn obj_name_from(m: &serde_json::Map<String, Value>) -> String {
    m.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
