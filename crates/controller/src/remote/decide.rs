//! What the mirror of a remote claim should be, and what the claim's status says. Pure: the
//! reconciler reads both clusters, calls these, and writes what they return.

use std::collections::BTreeMap;

use ferrometal_api::annotations as ann;
use ferrometal_api::claim::conditions as c;
use ferrometal_api::claim::{REMOTE_FORWARDED, REMOTE_ID, REMOTE_MIRROR_LABEL, REMOTE_REBOOT_KEYS};
use ferrometal_api::{HostClaim, HostClaimStatus, NamespacedRef};
use k8s_openapi::api::core::v1::SecretReference;
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use crate::conditions::new as cond;
use crate::forwarding::{DataKind, Markers, forward_annotations, forward_token};

/// The claim's identity shared with its mirror: set once, carried by `ferrometal move`.
pub fn remote_id(claim: &HostClaim) -> Option<&String> {
    claim.annotations().get(REMOTE_ID)
}

/// The name of the mirror's copy of one data Secret, in the remote namespace.
pub fn data_copy_name(claim: &str, kind: DataKind) -> String {
    kind.copy_name(claim)
}

/// The mirror's spec: the claim's, with its data Secrets renamed to their copies.
pub fn mirror_spec(claim: &HostClaim) -> Value {
    let mut spec = claim.spec.clone();
    let name = claim.name_any();
    for kind in DataKind::ALL {
        let slot = match kind {
            DataKind::UserData => &mut spec.user_data,
            DataKind::NetworkData => &mut spec.network_data,
            DataKind::MetaData => &mut spec.meta_data,
        };
        if kind.source(claim).is_some() {
            *slot = Some(SecretReference {
                name: Some(data_copy_name(&name, kind)),
                namespace: None,
            });
        } else {
            *slot = None;
        }
    }
    serde_json::to_value(spec).unwrap_or_default()
}

/// A JSON merge patch turning `old` into `new` (`None`: equal).
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            for (k, v) in n {
                match o.get(k) {
                    Some(ov) if ov == v => {}
                    Some(ov @ Value::Object(_)) if v.is_object() => {
                        if let Some(d) = merge_diff(ov, v) {
                            out.insert(k.clone(), d);
                        }
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}

/// What to write to the remote cluster for a claim.
#[derive(Debug, Default, PartialEq)]
pub struct MirrorSync {
    /// The mirror to create (when there is none).
    pub create: Option<Value>,
    /// A merge patch for the existing mirror.
    pub patch: Option<Value>,
    /// One-shot annotations passed on (or already passed on) to remove from the claim.
    pub remove_from_claim: Vec<String>,
}

/// The mirror as the claim wants it: spec, pause, keyed reboots, and the one-shot annotations
/// (passed once per claim version, whatever crashes in between).
pub fn mirror_sync(
    claim: &HostClaim,
    mirror: Option<&HostClaim>,
    remote_namespace: &str,
) -> MirrorSync {
    let mut out = MirrorSync::default();
    let claim_ann = claim.annotations();
    let empty = BTreeMap::new();
    let mirror_ann = mirror.map(|m| m.annotations()).unwrap_or(&empty);
    let mut annotations = Map::new();
    let id = remote_id(claim).cloned().unwrap_or_default();
    if mirror_ann.get(REMOTE_ID) != Some(&id) {
        annotations.insert(REMOTE_ID.into(), id.into());
    }
    match (claim_ann.get(ann::PAUSED), mirror_ann.get(ann::PAUSED)) {
        (Some(v), m) if m != Some(v) => {
            annotations.insert(ann::PAUSED.into(), v.clone().into());
        }
        (None, Some(_)) => {
            annotations.insert(ann::PAUSED.into(), Value::Null);
        }
        _ => {}
    }
    out.remove_from_claim = forward_annotations(
        claim_ann,
        mirror_ann,
        &forward_token(claim),
        false,
        Markers {
            forwarded: REMOTE_FORWARDED,
            mirrored_reboots: REMOTE_REBOOT_KEYS,
        },
        &mut annotations,
    );
    let spec = mirror_spec(claim);
    let name = claim.name_any();
    match mirror {
        None => {
            annotations.retain(|_, v| !v.is_null());
            out.create = Some(json!({
                "apiVersion": "metal3.io/v1alpha1",
                "kind": "HostClaim",
                "metadata": {
                    "name": name,
                    "namespace": remote_namespace,
                    "labels": {REMOTE_MIRROR_LABEL: name},
                    "annotations": annotations,
                },
                "spec": spec,
            }));
        }
        Some(m) => {
            let mut patch = Map::new();
            let have = serde_json::to_value(&m.spec).unwrap_or_default();
            if let Some(d) = merge_diff(&have, &spec) {
                patch.insert("spec".into(), d);
            }
            let mut meta = Map::new();
            if !annotations.is_empty() {
                meta.insert("annotations".into(), annotations.into());
            }
            if m.labels().get(REMOTE_MIRROR_LABEL) != Some(&name) {
                meta.insert("labels".into(), json!({REMOTE_MIRROR_LABEL: name}));
            }
            if !meta.is_empty() {
                patch.insert("metadata".into(), meta.into());
            }
            if !patch.is_empty() {
                out.patch = Some(patch.into());
            }
        }
    }
    out
}

/// How the link to the remote cluster stands for this claim.
#[derive(Clone, Debug)]
pub enum Remote<'a> {
    /// Reached; the mirror as read (none while it is being created).
    Reached(Option<&'a HostClaim>),
    /// Not reached: (reason, message). The last known status is kept.
    Failed(&'static str, String),
    /// Reached, and the mirror that served the claim is gone (deleted there): the host is
    /// never silently replaced by a new mirror binding another one.
    MirrorGone(String),
}

/// Whether the claim was served through a mirror that is gone now.
pub fn mirror_gone(claim: &HostClaim, mirror: Option<&HostClaim>) -> bool {
    mirror.is_none()
        && claim
            .status
            .as_ref()
            .is_some_and(|s| s.bare_metal_host.is_some())
}

/// The claim's status: the mirror's, with the HardwareData copy in the claim's own namespace,
/// and `Synchronized` false while the remote cluster cannot be reached or the data cannot be
/// passed on.
pub fn status(
    claim: &HostClaim,
    remote: Remote<'_>,
    data_error: Option<(DataKind, String)>,
    hardware_data: Option<NamespacedRef>,
    now: &str,
) -> HostClaimStatus {
    let old = claim.status.clone().unwrap_or_default();
    let mut new = match &remote {
        Remote::Reached(Some(m)) => {
            let mut s = m.status.clone().unwrap_or_default();
            s.hardware_data = hardware_data;
            s
        }
        Remote::Reached(None) => HostClaimStatus {
            conditions: vec![cond(
                c::ASSOCIATED,
                false,
                c::NO_BARE_METAL_HOST,
                "the claim is being passed to the remote cluster",
            )],
            ..HostClaimStatus::default()
        },
        Remote::Failed(..) => old.clone(),
        Remote::MirrorGone(msg) => HostClaimStatus {
            conditions: vec![
                cond(
                    c::ASSOCIATED,
                    false,
                    c::MISSING_BARE_METAL_HOST,
                    msg.clone(),
                ),
                cond(c::READY, false, c::MISSING_BARE_METAL_HOST, msg.clone()),
            ],
            // Kept: it is what says the claim was served, so no new mirror is made.
            bare_metal_host: old.bare_metal_host.clone(),
            hardware_data: old.hardware_data.clone(),
            ..HostClaimStatus::default()
        },
    };
    let failure = match (&remote, data_error) {
        (Remote::Failed(reason, msg), _) => Some(cond(c::SYNCHRONIZED, false, reason, msg)),
        (_, Some((kind, msg))) => Some(cond(c::SYNCHRONIZED, false, kind.failure_reason(), msg)),
        _ => None,
    };
    if let Some(f) = failure {
        new.conditions.retain(|x| x.type_ != c::SYNCHRONIZED);
        new.conditions.push(f);
    }
    for cond in &mut new.conditions {
        let prev = old.conditions.iter().find(|p| p.type_ == cond.type_);
        cond.last_transition_time = match prev {
            Some(p) if p.status == cond.status => p.last_transition_time.clone(),
            _ => cond
                .last_transition_time
                .clone()
                .filter(|_| matches!(remote, Remote::Reached(Some(_))))
                .or_else(|| Some(now.to_string())),
        };
    }
    new.last_updated = old.last_updated.clone();
    if new != old {
        new.last_updated = Some(now.to_string());
    }
    new
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
