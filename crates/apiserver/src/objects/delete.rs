//! Delete: finalizers, propagation (foreground, background, orphan) and preconditions.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{DeleteOpts, Reply, finalizers};
use crate::meta::{self, meta_mut, str_at};
use crate::registry::Resource;
use crate::state::Core;
use crate::status::ApiError;
use crate::store::{Op, Stored, View};

impl Core {
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
                    && s.with_all(|all| {
                        all.filter(|(_, o)| o.has_owners).any(|(_, o)| {
                            o.meta()
                                .pointer("/metadata/ownerReferences")
                                .and_then(Value::as_array)
                                .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
                        })
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
                                list.push(json!(crate::meta::FOREGROUND));
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
}

/// Ops removing ownerReferences to `uid` from every dependent (propagationPolicy=Orphan).
fn orphan_dependents(s: &View, uid: &str) -> Vec<Op> {
    let dependents: Vec<(String, Arc<Stored>)> = s.with_all(|all| {
        all.filter(|(_, o)| o.has_owners)
            .map(|(k, o)| (k.to_string(), o.clone()))
            .collect()
    });
    let mut ops = Vec::new();
    for (key, obj) in dependents {
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
            resource: key.clone(),
            namespace: str_at(&meta, "/metadata/namespace")
                .unwrap_or_default()
                .into(),
            name: meta::name_of(&meta).into(),
            value: v,
        });
    }
    ops
}
