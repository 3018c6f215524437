//! The object's identity and metadata, and custom resources' schemas (structural schema,
//! defaults, pruning, CEL rules).

use serde_json::{Value, json};

use crate::meta::{self, meta_mut};
use crate::registry::Resource;
use crate::status::{ApiError, Cause};

pub fn cause(field: &str, reason: &str, message: impl Into<String>) -> Cause {
    Cause {
        field: field.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

pub fn api_version_ok(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    let want = res.api_version();
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        // Other served versions of the same CRD are accepted; the object is stored as sent and
        // re-labelled on read (no conversion webhooks here).
        let group_matches = if res.group.is_empty() {
            !av.contains('/')
        } else {
            av.split('/').next() == Some(res.group.as_str())
        };
        if av != want && !group_matches {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want})"
            )));
        }
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && k != res.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            res.kind
        )));
    }
    obj["apiVersion"] = json!(want);
    obj["kind"] = json!(res.kind);
    Ok(())
}

/// kube-apiserver's TotalAnnotationSizeLimitB: every reader of an object carries its
/// annotations, so their keys and values together are bounded.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// Validates the metadata a client controls and fixes the namespace.
pub fn check_metadata(res: &Resource, ns: &str, obj: &mut Value) -> Result<(), ApiError> {
    let name = meta::name_of(obj).to_string();
    let m = meta_mut(obj);
    if res.namespaced {
        match m.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                m.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        m.remove("namespace");
    }
    let errs = if res.is_namespace() {
        meta::dns_label_errors(&name)
    } else if res.builtin && res.group == "rbac.authorization.k8s.io" {
        // RBAC names only need to be path segments (`system:basic-user`), as in Kubernetes.
        meta::path_segment_errors(&name)
    } else {
        meta::dns_subdomain_errors(&name)
    };
    if !errs.is_empty() {
        let causes = errs
            .into_iter()
            .map(|e| {
                cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    format!("Invalid value: \"{name}\": {e}"),
                )
            })
            .collect();
        return Err(ApiError::invalid(&res.target(&name), causes));
    }
    for field in ["labels", "annotations"] {
        if let Some(map) = m.get(field).and_then(Value::as_object)
            && let Some((k, _)) = map.iter().find(|(_, v)| !v.is_string())
        {
            return Err(ApiError::bad_request(format!(
                "metadata.{field}.{k}: value must be a string"
            )));
        }
    }
    let mut causes = Vec::new();
    if let Some(labels) = m.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for e in meta::qualified_name_errors(k) {
                causes.push(cause(
                    "metadata.labels",
                    "FieldValueInvalid",
                    format!("Invalid value: \"{k}\": {e}"),
                ));
            }
            let v = v.as_str().unwrap_or_default();
            for e in meta::label_value_errors(v) {
                causes.push(cause(
                    "metadata.labels",
                    "FieldValueInvalid",
                    format!("Invalid value: \"{v}\": {e}"),
                ));
            }
        }
    }
    if let Some(annotations) = m.get("annotations").and_then(Value::as_object) {
        for k in annotations.keys() {
            for e in meta::qualified_name_errors(k) {
                causes.push(cause(
                    "metadata.annotations",
                    "FieldValueInvalid",
                    format!("Invalid value: \"{k}\": {e}"),
                ));
            }
        }
        let size: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > ANNOTATIONS_MAX_BYTES {
            causes.push(cause(
                "metadata.annotations",
                "FieldValueTooLong",
                format!("Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes"),
            ));
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&res.target(&name), causes));
    }
    Ok(())
}

/// Schema defaulting, pruning and validation for custom resources.
pub fn validate_cr(
    res: &Resource,
    obj: &mut Value,
    old: Option<&Value>,
    strict: bool,
) -> Result<(), ApiError> {
    let Some(schema) = &res.schema else {
        return Ok(());
    };
    // Pruning must never drop the object's identity, whatever the schema says about it.
    let keep: Vec<(String, Value)> = ["apiVersion", "kind", "metadata"]
        .iter()
        .filter_map(|k| obj.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    schema.default(obj);
    let before = strict.then(|| obj.clone());
    schema.prune(obj);
    for (k, v) in keep {
        obj[k] = v;
    }
    if let Some(before) = before {
        let mut unknown = Vec::new();
        removed_fields(&before, obj, "", &mut unknown);
        if !unknown.is_empty() {
            let list = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {list}",
                kind = res.kind,
                v = res.version
            )));
        }
    }
    let errs = schema.validate(obj, old);
    if errs.is_empty() {
        return Ok(());
    }
    let causes = errs
        .into_iter()
        .map(|e| cause(&e.field, e.reason.as_str(), e.message))
        .collect();
    Err(ApiError::invalid(&res.target(meta::name_of(obj)), causes))
}

/// Paths present in `before` but not in `after` (what pruning dropped), as `spec.a[0].b`.
fn removed_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match a.get(k) {
                    Some(av) => removed_fields(bv, av, &p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if a.len() == b.len() => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                removed_fields(bv, av, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}
