//! Object semantics shared by every verb that writes: metadata bookkeeping, status subresource
//! rules, generation, finalizers, validation, and the built-in kinds' special cases.

use std::sync::Arc;

use base64::Engine;
use ferrometal_apimachinery::apply::{self, ApplyOptions};
use ferrometal_apimachinery::patch::{self, ListStrategy};
use serde_json::{Value, json};

use crate::meta::{self, meta_mut, str_at};
use crate::registry::{self, Resource};
use crate::server::Core;
use crate::status::{ApiError, Cause};
use crate::store::{Op, Stored, View};

/// Per-request write options.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub manager: String,
    pub dry_run: bool,
    pub force: bool,
    /// `Some("status")` for the status subresource.
    pub subresource: Option<String>,
    /// `fieldValidation=Strict`: fields the schema does not know are an error instead of being
    /// dropped with a warning.
    pub strict: bool,
    /// Warnings for the response's `Warning` headers (dropped unknown fields), filled in by
    /// the write.
    pub warnings: Arc<std::sync::Mutex<Vec<String>>>,
    /// Who writes, for admission checks that depend on it (RBAC escalation); `None` for the
    /// server's own writes.
    pub requester: Option<Arc<ferrometal_apimachinery::rbac::UserInfo>>,
}

impl WriteOpts {
    fn warn(&self, w: String) {
        let mut all = self.warnings.lock().expect("warnings lock");
        // Bounded like everything else a request can make the server keep.
        if all.len() < 100 {
            all.push(w);
        }
    }

    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().expect("warnings lock"))
    }
}

/// What a write answers with.
pub enum Reply {
    /// The object written by the first op.
    Written,
    /// Like `Written`, and the write completed a deletion (the last finalizer went), which
    /// the garbage collector may be waiting for.
    Deleted,
    /// Nothing changed; the current object.
    Current(Arc<Stored>),
    /// Dry run: the object that would have been stored.
    Dry(Value),
}

impl Reply {
    fn into_json(self, core: &Core, res: &Resource, results: &[Arc<Stored>]) -> bytes::Bytes {
        if matches!(self, Reply::Deleted) {
            core.gc.notify_one();
        }
        match self {
            Reply::Written | Reply::Deleted => crate::handlers::versioned_json(res, &results[0]),
            Reply::Current(s) => crate::handlers::versioned_json(res, &s),
            Reply::Dry(v) => {
                let v = crate::convert::from_storage(res, &v);
                serde_json::to_vec(&v).expect("serializes").into()
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
pub struct DeleteOpts {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub propagation: Option<String>,
    pub dry_run: bool,
}

fn cause(field: &str, reason: &str, message: impl Into<String>) -> Cause {
    Cause {
        field: field.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

fn api_version_ok(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
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

/// Validates the metadata a client controls and fixes the namespace.
fn check_metadata(res: &Resource, ns: &str, obj: &mut Value) -> Result<(), ApiError> {
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
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&res.target(&name), causes));
    }
    Ok(())
}

/// Schema defaulting, pruning and validation for custom resources.
fn validate_cr(
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

/// Decodes a built-in object into its k8s-openapi type, like kube-apiserver decoding into Go
/// structs: a wrong type is a 400; an unknown field is dropped with a warning, or with strict
/// field validation is a 400.
fn check_builtin_types(res: &Resource, obj: &mut Value, opts: &WriteOpts) -> Result<(), ApiError> {
    let strict = opts.strict;
    use k8s_openapi::api;
    fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(
        obj: &Value,
    ) -> Result<Value, String> {
        let t: T = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        serde_json::to_value(&t).map_err(|e| e.to_string())
    }
    if !res.builtin || res.ephemeral {
        return Ok(());
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
        _ => return Ok(()),
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
    for f in &unknown {
        opts.warn(format!("unknown field \"{f}\""));
    }
    drop_unknown(obj, &decoded);
    Ok(())
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
fn builtin_prepare(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
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
            if obj.get("type").is_none() {
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
            if let Err(causes) = registry::crd_resources(obj) {
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

/// Conditions whose status did not change keep their lastTransitionTime, so rewriting an
/// unchanged CRD is a no-op.
fn keep_transition_times(old: &Value, new: &mut Value) {
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

/// Whether `generation` is managed for this resource.
fn has_generation(res: &Resource) -> bool {
    !res.builtin || res.is_crd()
}

/// The part of an object whose change bumps `generation`.
fn spec_part(res: &Resource, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
        if res.status_subresource {
            o.remove("status");
        }
    }
    v
}

/// Equality ignoring bookkeeping that alone must not cause a write.
fn same_object(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    strip(a) == strip(b)
}

fn finalizers(obj: &Value) -> usize {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

fn record_update(
    res: &Resource,
    old: Option<&Value>,
    new: &mut Value,
    opts: &WriteOpts,
    now: &str,
) {
    if opts.manager.is_empty() {
        return;
    }
    let av = res.api_version();
    let manager = opts.manager.clone();
    let sub = opts.subresource.clone();
    let old = old.cloned();
    // A panic in field bookkeeping must not take down a write.
    let mut candidate = new.clone();
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        apply::record_update(
            old.as_ref(),
            &mut candidate,
            &manager,
            now,
            &av,
            sub.as_deref(),
        );
    }))
    .is_ok();
    if ok {
        *new = candidate;
    }
}

impl Core {
    /// Admission checks that depend on the writer (see admission.rs).
    fn admit(
        &self,
        res: &Resource,
        ns: &str,
        obj: &Value,
        opts: &WriteOpts,
    ) -> Result<(), ApiError> {
        match &opts.requester {
            Some(user) => crate::admission::check(&self.policy.get(), user, res, ns, obj),
            None => Ok(()),
        }
    }

    fn check_namespace(&self, s: &View, res: &Resource, ns: &str) -> Result<(), ApiError> {
        if res.namespaced && s.get(registry::NAMESPACE_KEY, "", ns).is_none() {
            return Err(
                ApiError::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
                    .with_name_kind(ns, "", "namespaces"),
            );
        }
        Ok(())
    }

    /// Everything a create does before the store: identity, defaults, validation.
    fn prepare_create(
        &self,
        res: &Resource,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
        applied: bool,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        api_version_ok(res, &mut obj)?;
        crate::convert::to_storage(res, &mut obj);
        let now = meta::now();
        {
            let m = meta_mut(&mut obj);
            let has_name = m
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !has_name {
                match m.get("generateName").and_then(Value::as_str) {
                    Some(g) if !g.is_empty() => {
                        let name = format!("{g}{}", meta::random_suffix());
                        m.insert("name".into(), json!(name));
                    }
                    _ => {
                        return Err(ApiError::invalid(
                            &res.target(""),
                            vec![cause(
                                "metadata.name",
                                "FieldValueRequired",
                                "Required value: name or generateName is required",
                            )],
                        ));
                    }
                }
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now));
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            m.remove("selfLink");
            if has_generation(res) {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        check_metadata(res, ns, &mut obj)?;
        // With a status subresource, status is written only through it.
        if res.status_subresource
            && !res.builtin
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        builtin_prepare(res, &mut obj)?;
        check_builtin_types(res, &mut obj, opts)?;
        self.admit(res, ns, &obj, opts)?;
        if !res.builtin {
            validate_cr(res, &mut obj, None, opts.strict)?;
        }
        if !applied {
            record_update(res, None, &mut obj, opts, &now);
        }
        Ok(obj)
    }

    pub async fn create(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let obj = self.prepare_create(res, ns, obj, opts, false)?;
        self.commit_create(res, ns, obj, opts).await
    }

    async fn commit_create(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let name = meta::name_of(&obj).to_string();
        let store_ns = if res.namespaced { ns } else { "" };
        let dry = opts.dry_run;
        let (results, reply) = self
            .store
            .write(|s| {
                self.check_namespace(s, res, ns)?;
                if s.get(&res.key, store_ns, &name).is_some() {
                    return Err(ApiError::already_exists(&res.target(&name)));
                }
                if dry {
                    return Ok((Vec::new(), Reply::Dry(obj)));
                }
                Ok((
                    vec![Op::Put {
                        resource: res.key.clone(),
                        namespace: store_ns.into(),
                        name: name.clone(),
                        value: obj,
                    }],
                    Reply::Written,
                ))
            })
            .await?;
        self.after_write(res);
        Ok(reply.into_json(self, res, &results))
    }

    /// Turns a candidate full object (from PUT or a patch) into the ops of an update of `old`.
    fn prepare_update(
        &self,
        res: &Resource,
        old: &Arc<Stored>,
        mut new: Value,
        opts: &WriteOpts,
        applied: bool,
    ) -> Result<(Vec<Op>, Reply), ApiError> {
        let old_value = old.value();
        let name = meta::name_of(&old_value).to_string();
        let ns = str_at(&old_value, "/metadata/namespace")
            .unwrap_or_default()
            .to_string();
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        api_version_ok(res, &mut new)?;
        crate::convert::to_storage(res, &mut new);
        let new_name = meta::name_of(&new);
        if !new_name.is_empty() && new_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({new_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(rv) = str_at(&new, "/metadata/resourceVersion")
            && !rv.is_empty()
            && rv != old.rev.to_string()
        {
            return Err(ApiError::conflict(&res.target(&name)));
        }
        let status_write = opts.subresource.as_deref() == Some("status");
        if status_write {
            // Status writes change only status (labels, annotations and finalizers are kept
            // as they are, like the real server's status strategy).
            let mut merged = old_value.clone();
            match new.get("status") {
                Some(st) => merged["status"] = st.clone(),
                None => {
                    if let Some(o) = merged.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            if let Some(mf) = new.pointer("/metadata/managedFields") {
                meta_mut(&mut merged).insert("managedFields".into(), mf.clone());
            }
            new = merged;
        } else if res.status_subresource {
            match old_value.get("status") {
                Some(st) => new["status"] = st.clone(),
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        // Identity and server-owned metadata come from the stored object.
        {
            let old_meta = old_value.get("metadata").cloned().unwrap_or(json!({}));
            let m = meta_mut(&mut new);
            m.insert("name".into(), json!(name));
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_meta.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            m.remove("resourceVersion");
            if !res.namespaced {
                m.remove("namespace");
            }
        }
        check_metadata(res, &ns, &mut new)?;
        builtin_prepare(res, &mut new)?;
        check_builtin_types(res, &mut new, opts)?;
        self.admit(res, &ns, &new, opts)?;
        if res.is_crd() {
            keep_transition_times(&old_value, &mut new);
        }
        if !res.builtin {
            validate_cr(res, &mut new, Some(&old_value), opts.strict)?;
        }
        if has_generation(res) && spec_part(res, &new) != spec_part(res, &old_value) {
            let g = old_value
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let mut old_cmp = old_value.clone();
        if let Some(m) = old_cmp.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        if same_object(&new, &old_cmp) && !applied {
            return Ok((Vec::new(), Reply::Current(old.clone())));
        }
        if !applied {
            record_update(res, Some(&old_value), &mut new, opts, &meta::now());
        }
        if same_object(&new, &old_cmp)
            && new.pointer("/metadata/managedFields")
                == old_value.pointer("/metadata/managedFields")
        {
            return Ok((Vec::new(), Reply::Current(old.clone())));
        }
        let store_ns = if res.namespaced { ns.as_str() } else { "" };
        if opts.dry_run {
            meta_mut(&mut new).insert("resourceVersion".into(), json!(old.rev.to_string()));
            return Ok((Vec::new(), Reply::Dry(new)));
        }
        // Removing the last finalizer of an object being deleted completes the deletion.
        if new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new) == 0 {
            let mut ops = vec![Op::Put {
                resource: res.key.clone(),
                namespace: store_ns.into(),
                name: name.clone(),
                value: new,
            }];
            ops.push(Op::Delete {
                resource: res.key.clone(),
                namespace: store_ns.into(),
                name,
            });
            return Ok((ops, Reply::Deleted));
        }
        Ok((
            vec![Op::Put {
                resource: res.key.clone(),
                namespace: store_ns.into(),
                name,
                value: new,
            }],
            Reply::Written,
        ))
    }

    pub async fn update(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        name: &str,
        new: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let store_ns = if res.namespaced { ns } else { "" };
        let (results, reply) = self
            .store
            .write(|s| {
                let Some(old) = s.get(&res.key, store_ns, name) else {
                    return Err(ApiError::not_found(&res.target(name)));
                };
                self.prepare_update(res, old, new, opts, false)
            })
            .await?;
        self.after_write(res);
        Ok(reply.into_json(self, res, &results))
    }

    pub async fn patch(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        name: &str,
        kind: PatchKind,
        patch: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let store_ns = if res.namespaced { ns } else { "" };
        if kind == PatchKind::Strategic && !res.builtin {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json",
            ));
        }
        if kind == PatchKind::Apply && opts.manager.is_empty() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        enum Outcome {
            Updated,
            Create(Value),
        }
        let (results, (reply, outcome)) = self
            .store
            .write(|s| {
                let old = s.get(&res.key, store_ns, name);
                let now = meta::now();
                let av = res.api_version();
                let Some(old) = old else {
                    if kind != PatchKind::Apply || opts.subresource.is_some() {
                        return Err(ApiError::not_found(&res.target(name)));
                    }
                    let mut applied = patch.clone();
                    let created = apply_patch(res, None, &mut applied, opts, &now, &av, name)?;
                    return Ok((Vec::new(), (Reply::Written, Outcome::Create(created))));
                };
                // Patches apply to the object as this version serves it.
                let live = crate::handlers::versioned(res, old);
                let mut new = live.clone();
                match kind {
                    PatchKind::Merge => {
                        if !patch.is_object() {
                            return Err(ApiError::bad_request("merge patch must be a JSON object"));
                        }
                        patch::merge_patch(&mut new, &patch);
                    }
                    PatchKind::Json => json_patch_compat(&mut new, &patch)?,
                    PatchKind::Strategic => {
                        let k = res.kind.clone();
                        patch::strategic_merge_patch(&mut new, &patch, &|path: &str| -> Option<
                            ListStrategy,
                        > {
                            patch::builtin_list_strategy(&k, path)
                        })
                        .map_err(|e| ApiError::bad_request(e.to_string()))?;
                    }
                    PatchKind::Apply => {
                        let mut applied = patch.clone();
                        new = apply_patch(res, Some(&live), &mut applied, opts, &now, &av, name)?;
                    }
                }
                // A resourceVersion carried by the patch is a precondition.
                if let Some(rv) = patch
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    && kind != PatchKind::Apply
                    && rv != old.rev.to_string()
                {
                    return Err(ApiError::conflict(&res.target(name)));
                }
                if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                let (ops, reply) =
                    self.prepare_update(res, old, new, opts, kind == PatchKind::Apply)?;
                Ok((ops, (reply, Outcome::Updated)))
            })
            .await?;
        match outcome {
            Outcome::Updated => {
                self.after_write(res);
                Ok(reply.into_json(self, res, &results))
            }
            Outcome::Create(obj) => {
                let obj = self.prepare_create(res, ns, obj, opts, true)?;
                self.commit_create(res, ns, obj, opts).await
            }
        }
    }

    pub async fn delete(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let store_ns = if res.namespaced { ns } else { "" };
        let (results, reply) = self
            .store
            .write(|s| {
                let Some(old) = s.get(&res.key, store_ns, name) else {
                    return Err(ApiError::not_found(&res.target(name)));
                };
                let uid: &str = &old.uid;
                let old_meta = old.meta();
                if let Some(want) = &opts.uid
                    && want != uid
                {
                    return Err(ApiError::conflict_msg(
                        &res.target(name),
                        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                    ));
                }
                if let Some(want) = &opts.resource_version
                    && *want != old.rev.to_string()
                {
                    return Err(ApiError::conflict_msg(
                        &res.target(name),
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                            old.rev
                        ),
                    ));
                }
                if res.is_namespace() && (name == "default" || name == "kube-system") {
                    return Err(ApiError::forbidden(format!(
                        "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                    )));
                }
                let mut ops = Vec::new();
                let mut reply = Reply::Written;
                if opts.propagation.as_deref() == Some("Orphan") {
                    ops.extend(orphan_dependents(s, uid));
                }
                // Foreground: the owner stays (with a finalizer the collector removes) until
                // its dependents are gone.
                let foreground = opts.propagation.as_deref() == Some("Foreground")
                    && s.all().filter(|(_, o)| o.has_owners).any(|(_, o)| {
                        o.meta()
                            .pointer("/metadata/ownerReferences")
                            .and_then(Value::as_array)
                            .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
                    });
                let pending = foreground
                    || finalizers(&old_meta) > 0
                    || self.has_contents(s, res, &old_meta);
                if pending {
                    if old.deleting {
                        reply = Reply::Current(old.clone());
                    } else {
                        let mut v = old.value();
                        let m = meta_mut(&mut v);
                        if foreground {
                            let list = m.entry("finalizers").or_insert_with(|| json!([]));
                            if let Some(list) = list.as_array_mut() {
                                list.push(json!(crate::gc::FOREGROUND));
                            }
                        }
                        let m = meta_mut(&mut v);
                        m.insert("deletionTimestamp".into(), json!(meta::now()));
                        m.insert("deletionGracePeriodSeconds".into(), json!(0));
                        if res.is_namespace() {
                            v["status"] = json!({"phase": "Terminating"});
                        }
                        ops.insert(
                            0,
                            Op::Put {
                                resource: res.key.clone(),
                                namespace: store_ns.into(),
                                name: name.into(),
                                value: v,
                            },
                        );
                    }
                } else {
                    ops.insert(
                        0,
                        Op::Delete {
                            resource: res.key.clone(),
                            namespace: store_ns.into(),
                            name: name.into(),
                        },
                    );
                }
                if opts.dry_run {
                    return Ok((Vec::new(), Reply::Current(old.clone())));
                }
                Ok((ops, reply))
            })
            .await?;
        self.after_write(res);
        // Contents of namespaces and CRDs, and dependents by ownerReferences, go in the background.
        self.gc.notify_one();
        Ok(reply.into_json(self, res, &results))
    }

    /// Namespaces and CRDs are only removed once what they contain is gone.
    fn has_contents(&self, s: &View, res: &Resource, obj: &Value) -> bool {
        if res.is_namespace() {
            let ns = meta::name_of(obj);
            let snap = self.registry.snapshot();
            let mut keys: Vec<&str> = snap
                .resources
                .iter()
                .filter(|r| r.namespaced)
                .map(|r| r.key.as_str())
                .collect();
            keys.dedup();
            keys.iter().any(|k| s.count(k, Some(ns)) > 0)
        } else if res.is_crd() {
            s.count(meta::name_of(obj), None) > 0
        } else {
            false
        }
    }

    /// Called after every successful write: keeps the registry in step with stored CRDs.
    pub(crate) fn after_write(&self, res: &Resource) {
        if res.is_crd() {
            self.rebuild_registry();
        }
        if res.builtin && crate::authz::is_rbac_key(&res.key) {
            self.policy.rebuild(&self.store);
        }
    }

    pub(crate) fn rebuild_registry(&self) {
        let crds: Vec<Value> = self.store.read(|s| {
            s.list(registry::CRD_KEY, None, None)
                .map(|o| o.value())
                .collect()
        });
        self.registry.rebuild(crds.iter());
    }
}

/// Runs server-side apply; conflicts become a 409 like kube-apiserver's.
fn apply_patch(
    res: &Resource,
    live: Option<&Value>,
    applied: &mut Value,
    opts: &WriteOpts,
    now: &str,
    av: &str,
    name: &str,
) -> Result<Value, ApiError> {
    if !applied.is_object() {
        return Err(ApiError::bad_request("apply patch must be an object"));
    }
    if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
        return Err(ApiError::bad_request(
            "apiVersion and kind must be set in an apply patch",
        ));
    }
    api_version_ok(res, applied)?;
    let an = meta::name_of(applied);
    if !an.is_empty() && an != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({an}) does not match the name on the URL ({name})"
        )));
    }
    meta_mut(applied).insert("name".into(), json!(name));
    let aopts = ApplyOptions {
        manager: &opts.manager,
        force: opts.force,
        now,
        api_version: av,
        subresource: opts.subresource.as_deref(),
    };
    apply::apply(live, applied, &aopts).map_err(|conflicts| {
        let n = conflicts.len();
        let causes: Vec<Cause> = conflicts
            .iter()
            .map(|c| Cause {
                field: c.field.clone(),
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with \"{}\"", c.manager),
            })
            .collect();
        let list = causes
            .iter()
            .map(|c| format!("- {}: {}", c.message, c.field))
            .collect::<Vec<_>>()
            .join("\n");
        let mut e = ApiError::new(
            409,
            "Conflict",
            format!(
                "Apply failed with {n} conflict{}: {}",
                if n == 1 { "" } else { "s" },
                if n == 1 {
                    format!("{}: {}", causes[0].message, causes[0].field)
                } else {
                    format!("\n{list}")
                }
            ),
        );
        e.causes = causes;
        e
    })
}

const MAX_JSON_PATCH_OPS: usize = 10_000;
const MAX_JSON_PATCH_COPIED: usize = crate::store::MAX_OBJECT_BYTES;

/// Applies a JSON patch op by op. A `test` for `null` at a path that does not exist passes, as
/// on kube-apiserver; kube-rs's finalizer helper relies on that for objects without finalizers.
fn json_patch_compat(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Some(ops) = patch.as_array() else {
        return Err(ApiError::bad_request(
            "a JSON patch must be an array of operations",
        ));
    };
    // kube-apiserver's bounds: a count of operations, and the bytes `copy` may duplicate (each
    // copy can double the object, so without a bound a small patch builds a huge object).
    if ops.len() > MAX_JSON_PATCH_OPS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPS}, got {}",
                ops.len()
            ),
        ));
    }
    let mut copied = 0usize;
    for op in ops {
        if op.get("op").and_then(Value::as_str) == Some("copy") {
            let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
            if let Some(v) = target.pointer(from) {
                copied += serde_json::to_vec(v).map_or(0, |b| b.len());
            }
            if copied > MAX_JSON_PATCH_COPIED {
                return Err(ApiError::new(
                    413,
                    "RequestEntityTooLarge",
                    format!("the JSON patch copies more than {MAX_JSON_PATCH_COPIED} bytes"),
                ));
            }
        }
        let is_null_test = op.get("op").and_then(Value::as_str) == Some("test")
            && op.get("value").is_none_or(Value::is_null);
        if is_null_test {
            let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
            if target.pointer(path).is_none_or(Value::is_null) {
                continue;
            }
        }
        patch::json_patch(target, &Value::Array(vec![op.clone()]))
            .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
    }
    Ok(())
}

/// Ops removing ownerReferences to `uid` from every dependent (propagationPolicy=Orphan).
fn orphan_dependents(s: &View, uid: &str) -> Vec<Op> {
    let mut ops = Vec::new();
    for (key, obj) in s.all().filter(|(_, o)| o.has_owners) {
        let meta = obj.meta();
        let Some(refs) = meta
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
        else {
            continue;
        };
        if !refs
            .iter()
            .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
        {
            continue;
        }
        let kept: Vec<Value> = refs
            .iter()
            .filter(|r| r.get("uid").and_then(Value::as_str) != Some(uid))
            .cloned()
            .collect();
        let mut v = obj.value();
        let m = meta_mut(&mut v);
        if kept.is_empty() {
            m.remove("ownerReferences");
        } else {
            m.insert("ownerReferences".into(), Value::Array(kept));
        }
        ops.push(Op::Put {
            resource: key.to_string(),
            namespace: str_at(&meta, "/metadata/namespace")
                .unwrap_or_default()
                .into(),
            name: meta::name_of(&meta).into(),
            value: v,
        });
    }
    ops
}
