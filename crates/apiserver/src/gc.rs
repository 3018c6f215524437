//! Background garbage collection: dependents whose owners are all gone (by
//! `ownerReferences` uid), and the contents of terminating namespaces and CRDs, after which
//! those are removed too.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::meta::str_at;
use crate::objects::DeleteOpts;
use crate::registry::{self, Snapshot};
use crate::server::Core;

/// A sweep also runs this often without being poked, to catch anything missed.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

pub async fn run(core: Arc<Core>) {
    let mut shutdown = core.shutdown.clone();
    loop {
        sweep(&core).await;
        tokio::select! {
            _ = core.gc.notified() => {}
            _ = tokio::time::sleep(SWEEP_EVERY) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// (storage key, namespace, name)
type Key = (String, String, String);

fn key_of(resource: &str, v: &Value) -> Key {
    (
        resource.to_string(),
        str_at(v, "/metadata/namespace")
            .unwrap_or_default()
            .to_string(),
        crate::meta::name_of(v).to_string(),
    )
}

fn served(snap: &Snapshot, owner_ref: &Value) -> bool {
    let av = owner_ref.get("apiVersion").and_then(Value::as_str);
    let kind = owner_ref.get("kind").and_then(Value::as_str);
    snap.resources
        .iter()
        .any(|r| Some(r.kind.as_str()) == kind && Some(r.api_version().as_str()) == av)
}

fn collect(core: &Core, snap: &Snapshot) -> Vec<Key> {
    core.store.read(|s| {
        let uids: HashSet<&str> = s
            .all()
            .filter_map(|(_, o)| str_at(&o.value, "/metadata/uid"))
            .collect();
        let terminating_ns: HashSet<&str> = s
            .list(registry::NAMESPACE_KEY, None, None)
            .filter(|o| o.value.pointer("/metadata/deletionTimestamp").is_some())
            .map(|o| crate::meta::name_of(&o.value))
            .collect();
        let terminating_crds: HashSet<&str> = s
            .list(registry::CRD_KEY, None, None)
            .filter(|o| o.value.pointer("/metadata/deletionTimestamp").is_some())
            .map(|o| crate::meta::name_of(&o.value))
            .collect();
        let mut out = Vec::new();
        for (resource, o) in s.all() {
            let v = &o.value;
            if v.pointer("/metadata/deletionTimestamp").is_some() {
                // Already being deleted; waiting for its finalizers. Terminating namespaces
                // and CRDs are retried so they go once empty.
                if resource == registry::NAMESPACE_KEY || resource == registry::CRD_KEY {
                    out.push(key_of(resource, v));
                }
                continue;
            }
            let ns = str_at(v, "/metadata/namespace").unwrap_or_default();
            let in_terminating = terminating_ns.contains(ns) || terminating_crds.contains(resource);
            let orphaned = v
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    // Owners of kinds this server does not serve cannot be checked; like
                    // kube-apiserver's collector, leave their dependents alone.
                    !refs.is_empty()
                        && refs.iter().all(|r| {
                            served(snap, r)
                                && r.get("uid")
                                    .and_then(Value::as_str)
                                    .is_none_or(|u| !uids.contains(u))
                        })
                });
            if (in_terminating || orphaned) && snap.by_key(resource).is_some() {
                out.push(key_of(resource, v));
            }
        }
        // Contents first, containers last.
        out.sort_by_key(|(r, _, _)| r == registry::NAMESPACE_KEY || r == registry::CRD_KEY);
        out
    })
}

async fn sweep(core: &Core) {
    // Deleting owners can orphan further dependents; a few rounds settle chains.
    for _ in 0..8 {
        let snap = core.registry.snapshot();
        let victims = collect(core, &snap);
        let mut progressed = false;
        for (resource, ns, name) in victims {
            let Some(res) = snap.by_key(&resource).cloned() else {
                continue;
            };
            let before = core.store.revision();
            match core.delete(&res, &ns, &name, &DeleteOpts::default()).await {
                Ok(_) => {
                    if core.store.revision() != before {
                        tracing::debug!(%resource, %ns, %name, "garbage collected");
                        progressed = true;
                    }
                }
                Err(e) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(%resource, %ns, %name, error = %e, "garbage collection failed")
                }
            }
        }
        if !progressed {
            return;
        }
    }
}
