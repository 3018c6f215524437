//! Patch: merge, JSON, strategic merge and server-side apply.

use std::sync::Arc;

use ferrometal_apimachinery::apply::{self, ApplyOptions};
use ferrometal_apimachinery::patch::{self, ListStrategy};
use serde_json::{Value, json};

use super::{PatchKind, Reply, WriteOpts};
use crate::admission::api_version_ok;
use crate::meta::{self, meta_mut};
use crate::registry::Resource;
use crate::state::Core;
use crate::status::ApiError;
use crate::status::Cause;

impl Core {
    /// The patched object, and whether a server-side apply created it (kube-apiserver answers
    /// that with 201 Created).
    pub async fn patch(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        name: &str,
        kind: PatchKind,
        patch: Value,
        opts: &WriteOpts,
    ) -> Result<(bytes::Bytes, bool), ApiError> {
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
            .guaranteed_update(res, ns, name, |old| {
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
                let live = crate::render::versioned(res, old);
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
                // Served as stored, the live object is the stored one parsed: not parsed again.
                let parsed = crate::render::served_as_stored(res, old).then_some(live);
                let (ops, reply) =
                    self.prepare_update(res, old, parsed, new, opts, kind == PatchKind::Apply)?;
                Ok((ops, (reply, Outcome::Updated)))
            })
            .await?;
        match outcome {
            Outcome::Updated => {
                self.after_write(res);
                Ok((reply.into_json(self, res, &results), false))
            }
            Outcome::Create(obj) => {
                // As kube-apiserver: an apply that creates the object needs `create` as well as
                // the `patch` the request was let in with.
                if let Some(user) = &opts.requester {
                    let attrs = crate::authz::RequestAttrs {
                        verb: "create".to_string(),
                        resource: Some(crate::request::ResPath {
                            group: res.group.clone(),
                            version: String::new(),
                            namespace: (!ns.is_empty()).then(|| ns.to_string()),
                            resource: res.plural.clone(),
                            name: Some(name.to_string()),
                            subresource: None,
                            watch: false,
                        }),
                        path: String::new(),
                    };
                    crate::authz::authorize(&self.policy.get(), user, &attrs)?;
                }
                let obj = self.prepare_create(res, ns, obj, opts, true)?;
                Ok((self.commit_create(res, ns, obj, opts).await?, true))
            }
        }
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
