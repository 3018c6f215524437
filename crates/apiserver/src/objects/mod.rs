//! The write verbs, one file each (create, update, patch, delete), and what they share:
//! options, replies, metadata bookkeeping (uid, generation, managedFields, finalizers), the
//! status subresource rule, and the call into admission before anything is stored.

mod create;
mod delete;
mod list;
mod patch;
mod update;

use std::sync::Arc;

use ferrometal_apimachinery::apply;
use serde_json::{Value, json};

pub use list::{delete_collection, list};

use crate::admission;
use crate::meta::{self, meta_mut, str_at};
use crate::registry::{self, Resource};
use crate::state::Core;
use crate::status::ApiError;
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
            Reply::Written | Reply::Deleted => crate::render::versioned_json(res, &results[0]),
            Reply::Current(s) => crate::render::versioned_json(res, &s),
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

/// Whether `generation` is managed for this resource.
fn has_generation(res: &Resource) -> bool {
    !res.builtin || res.is_crd()
}

/// Whether `a` and `b` differ in the part of an object whose change bumps `generation`.
fn spec_changed(res: &Resource, a: &Value, b: &Value) -> bool {
    !equal_except(a, b, |k| {
        k == "metadata" || (res.status_subresource && k == "status")
    })
}

/// Equality ignoring bookkeeping that alone must not cause a write. Compared in place: these
/// run on every update, and copies of both objects cost more than the comparison.
fn same_object(a: &Value, b: &Value) -> bool {
    equal_except(a, b, |k| k == "metadata")
        && match (a.get("metadata"), b.get("metadata")) {
            (Some(ma), Some(mb)) => {
                equal_except(ma, mb, |k| k == "resourceVersion" || k == "managedFields")
            }
            (ma, mb) => ma == mb,
        }
}

/// Equality of two values, leaving out the top-level keys `skip` names when both are objects
/// (serde_json's maps iterate in key order, so the rest compare pairwise).
fn equal_except(a: &Value, b: &Value, skip: impl Fn(&str) -> bool) -> bool {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            let (ka, kb) = (
                ma.iter().filter(|(k, _)| !skip(k)),
                mb.iter().filter(|(k, _)| !skip(k)),
            );
            ka.eq(kb)
        }
        _ => a == b,
    }
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
    // A panic in field bookkeeping must not take down a write: the object is then written
    // with the managedFields it came with. Bookkeeping changes nothing else in it, so only
    // those are kept aside, not a copy of the whole object.
    let sent = new.pointer("/metadata/managedFields").cloned();
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        apply::record_update(old, new, &manager, now, &av, sub.as_deref());
    }))
    .is_ok();
    if !ok && let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        match sent {
            Some(mf) => m.insert("managedFields".into(), mf),
            None => m.remove("managedFields"),
        };
    }
}

impl Core {
    /// A guaranteed update: `decide` first runs against the latest version of the object with
    /// no store lock held (admission and CEL may take a while); the result is committed only if
    /// that version is still the latest. If another write got there first, `decide` runs again
    /// under the writer lock, which always makes progress: it holds up other writers, never
    /// readers or watches (see `store::View`).
    async fn guaranteed_update<T>(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        mut decide: impl FnMut(Option<&Arc<Stored>>) -> Result<(Vec<Op>, T), ApiError>,
    ) -> Result<(Vec<Arc<Stored>>, T), ApiError> {
        let store_ns = if res.namespaced { ns } else { "" };
        let old = self.store.latest(&res.key, store_ns, name).await;
        let seen = old.as_ref().map(|o| o.rev);
        let mut decided = Some(decide(old.as_ref())?);
        let (results, out) = self
            .store
            .write(|s| {
                if s.get(&res.key, store_ns, name).map(|o| o.rev) != seen {
                    return Ok((Vec::new(), None));
                }
                let (ops, out) = decided.take().expect("decided once");
                Ok::<_, ApiError>((ops, Some(out)))
            })
            .await?;
        if let Some(out) = out {
            return Ok((results, out));
        }
        self.store
            .write(|s| decide(s.get(&res.key, store_ns, name).as_ref()))
            .await
    }

    /// Admission checks that depend on the writer (see admission.rs).
    fn admit(
        &self,
        res: &Resource,
        ns: &str,
        obj: &Value,
        opts: &WriteOpts,
    ) -> Result<(), ApiError> {
        match &opts.requester {
            Some(user) => admission::check_rbac(&self.policy.get(), user, res, ns, obj),
            None => Ok(()),
        }
    }

    fn run_validators(
        &self,
        res: &Resource,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let causes: Vec<_> = self
            .validators
            .iter()
            .filter(|v| v.group == res.group && v.resource == res.plural)
            .flat_map(|v| (v.check)(obj, old))
            .map(|(field, message)| admission::cause(&field, "FieldValueInvalid", message))
            .collect();
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid(&res.target(meta::name_of(obj)), causes))
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
        admission::api_version_ok(res, &mut obj)?;
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
                            vec![admission::cause(
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
        admission::check_metadata(res, ns, &mut obj)?;
        // With a status subresource, status is written only through it.
        if res.status_subresource
            && !res.builtin
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        admission::builtin_prepare(res, &mut obj)?;
        for w in admission::check_builtin_types(res, &mut obj, opts.strict)? {
            opts.warn(w);
        }
        self.admit(res, ns, &obj, opts)?;
        if !res.builtin {
            admission::validate_cr(res, &mut obj, None, opts.strict)?;
            self.run_validators(res, &obj, None)?;
        }
        if !applied {
            record_update(res, None, &mut obj, opts, &now);
        }
        Ok(obj)
    }

    /// Turns a candidate full object (from PUT or a patch) into the ops of an update of `old`;
    /// `parsed` is `old` as stored, parsed, when the caller has it (a patch parses it first).
    fn prepare_update(
        &self,
        res: &Resource,
        old: &Arc<Stored>,
        parsed: Option<Value>,
        mut new: Value,
        opts: &WriteOpts,
        applied: bool,
    ) -> Result<(Vec<Op>, Reply), ApiError> {
        let old_value = parsed.unwrap_or_else(|| old.value());
        let name = meta::name_of(&old_value).to_string();
        let ns = str_at(&old_value, "/metadata/namespace")
            .unwrap_or_default()
            .to_string();
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        admission::api_version_ok(res, &mut new)?;
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
        admission::check_metadata(res, &ns, &mut new)?;
        admission::builtin_prepare(res, &mut new)?;
        for w in admission::check_builtin_types(res, &mut new, opts.strict)? {
            opts.warn(w);
        }
        self.admit(res, &ns, &new, opts)?;
        admission::check_builtin_update(res, &old_value, &new)?;
        if res.is_crd() {
            admission::keep_transition_times(&old_value, &mut new);
        }
        if !res.builtin {
            admission::validate_cr(res, &mut new, Some(&old_value), opts.strict)?;
            if opts.subresource.is_none() {
                self.run_validators(res, &new, Some(&old_value))?;
            }
        }
        if has_generation(res) && spec_changed(res, &new, &old_value) {
            let g = old_value
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        if same_object(&new, &old_value) && !applied {
            return Ok((Vec::new(), Reply::Current(old.clone())));
        }
        if !applied {
            record_update(res, Some(&old_value), &mut new, opts, &meta::now());
        }
        if same_object(&new, &old_value)
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
