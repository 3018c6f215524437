//! Background garbage collection: dependents whose owners are all gone (by
//! `ownerReferences` uid) or being deleted in the foreground, the `foregroundDeletion`
//! finalizer once an owner has no dependents left, and the contents of terminating namespaces
//! and CRDs, after which those are removed too.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::meta::str_at;
use crate::objects::{DeleteOpts, PatchKind, WriteOpts};
use crate::registry::{self, Snapshot};
use crate::state::Core;
use crate::store::Stored;

/// A sweep also runs this often without being poked, to catch anything missed. (Events are
/// not the collector's: the store bounds them by count and age.)
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Between two sweeps the collector rests at least this long, and at least four times as long
/// as the last sweep took (at most [`REST_MAX`]): every DELETE pokes it, and a sweep walks the
/// whole store, so a burst of deletes (a namespace emptied, `ferrometal move` removing a fleet)
/// would otherwise keep a core sweeping once per delete. Pokes that arrive while it rests are
/// folded into the next sweep; a lone delete after a quiet spell is swept at once.
const REST_MIN: Duration = Duration::from_millis(100);
const REST_MAX: Duration = Duration::from_secs(1);

fn rest_after(sweep_took: Duration) -> Duration {
    (sweep_took * 4).clamp(REST_MIN, REST_MAX)
}

pub async fn run(core: Arc<Core>) {
    let mut shutdown = core.shutdown.clone();
    loop {
        let started = Instant::now();
        sweep(&core).await;
        let next_allowed = tokio::time::Instant::now() + rest_after(started.elapsed());
        tokio::select! {
            () = core.gc.notified() => {}
            () = tokio::time::sleep(SWEEP_EVERY) => {}
            _ = shutdown.changed() => return,
        }
        tokio::select! {
            () = tokio::time::sleep_until(next_allowed) => {}
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

enum Action {
    Delete,
    /// Drop the `foregroundDeletion` finalizer, keeping these.
    Release(Vec<Value>),
}

fn owner_uids(v: &Value) -> impl Iterator<Item = &str> {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
}

fn collect(core: &Core, snap: &Snapshot) -> Vec<(Key, Action)> {
    core.store.read(|s| {
        // Only objects with owners or being deleted are parsed; the rest are checked through
        // the fields the store keeps unpacked.
        let uids: HashSet<&str> = s.all().map(|(_, o)| &*o.uid).collect();
        let deleting: Vec<(&str, &Arc<Stored>, Value)> = s
            .all()
            .filter(|(_, o)| o.deleting)
            .map(|(r, o)| (r, o, o.meta()))
            .collect();
        // Owners deleted in the foreground count as gone for their dependents.
        let foreground: HashSet<&str> = deleting
            .iter()
            .filter(|(_, _, m)| {
                m.pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| f.iter().any(|x| x == crate::meta::FOREGROUND))
            })
            .map(|(_, o, _)| &*o.uid)
            .collect();
        let terminating = |key: &str| -> HashSet<String> {
            deleting
                .iter()
                .filter(|(r, _, _)| *r == key)
                .map(|(_, _, m)| crate::meta::name_of(m).to_string())
                .collect()
        };
        let terminating_ns = terminating(registry::NAMESPACE_KEY);
        let terminating_crds = terminating(registry::CRD_KEY);
        let mut out = Vec::new();
        // Objects in terminating namespaces or of terminating CRDs.
        let contained = |resource: &str, v: &Value| {
            let ns = str_at(v, "/metadata/namespace").unwrap_or_default();
            terminating_ns.contains(ns) || terminating_crds.contains(resource)
        };
        let any_terminating = !terminating_ns.is_empty() || !terminating_crds.is_empty();
        if any_terminating {
            for (resource, o) in s.all().filter(|(_, o)| !o.deleting && !o.has_owners) {
                let v = o.meta();
                if contained(resource, &v) && snap.by_key(resource).is_some() {
                    out.push((key_of(resource, &v), Action::Delete));
                }
            }
        }
        // The owned objects (a host's HardwareData and firmware objects: thousands) are
        // parsed one at a time and dropped, not held together: a sweep every 30 s would
        // otherwise hold every owned object's metadata at once.
        let mut owners_with_dependents: HashSet<String> = HashSet::new();
        let mut note_owners = |v: &Value| {
            // Only owners deleted in the foreground ask whether they still have dependents.
            for uid in owner_uids(v).filter(|u| foreground.contains(u)) {
                owners_with_dependents.insert(uid.to_string());
            }
        };
        for (resource, o) in s.all().filter(|(_, o)| o.has_owners && !o.deleting) {
            let v = o.meta();
            note_owners(&v);
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
                                    .is_none_or(|u| !uids.contains(u) || foreground.contains(u))
                        })
                });
            if (orphaned || contained(resource, &v)) && snap.by_key(resource).is_some() {
                out.push((key_of(resource, &v), Action::Delete));
            }
        }
        for (_, o, v) in &deleting {
            if o.has_owners {
                note_owners(v);
            }
        }
        for (resource, o, v) in &deleting {
            // Already being deleted; waiting for its finalizers. Terminating namespaces
            // and CRDs are retried so they go once empty.
            if *resource == registry::NAMESPACE_KEY || *resource == registry::CRD_KEY {
                out.push((key_of(resource, v), Action::Delete));
            }
            if foreground.contains(&*o.uid) && !owners_with_dependents.contains(&*o.uid) {
                let rest = v
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .map(|f| {
                        f.iter()
                            .filter(|x| *x != crate::meta::FOREGROUND)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                out.push((key_of(resource, v), Action::Release(rest)));
            }
        }
        // Contents first, containers last.
        out.sort_by_key(|((r, _, _), _)| r == registry::NAMESPACE_KEY || r == registry::CRD_KEY);
        out
    })
}

async fn sweep(core: &Core) {
    // Deleting owners can orphan further dependents; a few rounds settle chains.
    for _ in 0..8 {
        let snap = core.registry.snapshot();
        let victims = collect(core, &snap);
        let mut progressed = false;
        for ((resource, ns, name), action) in victims {
            let Some(res) = snap.by_key(&resource).cloned() else {
                continue;
            };
            let before = core.store.revision();
            let result = match action {
                Action::Delete => core.delete(&res, &ns, &name, &DeleteOpts::default()).await,
                Action::Release(rest) => {
                    let opts = WriteOpts {
                        manager: "garbage-collector".into(),
                        ..Default::default()
                    };
                    let patch = serde_json::json!({"metadata": {"finalizers": rest}});
                    core.patch(&res, &ns, &name, PatchKind::Merge, patch, &opts)
                        .await
                        .map(|(out, _)| out)
                }
            };
            match result {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_is_bounded_and_grows_with_the_sweep() {
        assert_eq!(rest_after(Duration::ZERO), REST_MIN);
        assert_eq!(
            rest_after(Duration::from_millis(50)),
            Duration::from_millis(200)
        );
        assert_eq!(rest_after(Duration::from_secs(3)), REST_MAX);
    }
}
