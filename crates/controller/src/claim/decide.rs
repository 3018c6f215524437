//! What a claim asks of its host, what the claim's status says, and the next release step.
//! Pure: the reconciler reads, calls these, and writes what they return.

use ferrometal_api::annotations as ann;
use ferrometal_api::claim::conditions as c;
use ferrometal_api::{
    BareMetalHost, Condition, HostClaim, NamespacedRef, OperationalStatus, ProvisioningState,
};
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use super::host_error::{passed_on_image, provisioned_on_error};
use crate::conditions::new as condition;
use crate::forwarding::{DataKind, Markers, forward_annotations, forward_token, is_paused};
use crate::merge_patch::merge_diff;

/// On the host: the claim's resourceVersion whose one-shot annotations (reboot, operation) were
/// forwarded, so a crash between forwarding and removing them from the claim never repeats them.
pub const FORWARDED: &str = "hostclaim.ferrometal.io/forwarded";
/// On the host: the keyed reboot annotations mirrored from the claim (comma-separated), so the
/// ones the tenant removes are removed, and nobody else's are touched.
pub const MIRRORED_REBOOTS: &str = "hostclaim.ferrometal.io/reboot-keys";
/// On data Secret copies: `<namespace>/<name>` of the claim they were copied for.
pub const COPY_LABEL: &str = "hostclaim.ferrometal.io/claim-namespace";
pub const COPY_NAME_LABEL: &str = "hostclaim.ferrometal.io/claim-name";

/// Whether the claim's data reached the host's namespace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataSync {
    /// Kinds whose copy is current.
    pub copied: Vec<DataKind>,
    /// The first failure: (kind, message for the tenant).
    pub failed: Option<(DataKind, String)>,
}

/// What to change on the bound host (a merge patch), and the one-shot annotations that are
/// already on the host and can now be removed from the claim.
#[derive(Debug, Default, PartialEq)]
pub struct HostSync {
    pub patch: Option<Value>,
    pub remove_from_claim: Vec<String>,
}

/// The host as the claim wants it: image, custom deploy, power, data Secrets (the copies, once
/// they are all current), pause, and the claim's reboot and operation annotations.
///
/// `forwarded` is the token this process last forwarded for the claim: the host in a cache may
/// not show it yet, and forwarding twice would reboot twice.
pub fn host_sync(
    claim: &HostClaim,
    host: &BareMetalHost,
    data: &DataSync,
    forwarded: Option<&str>,
) -> HostSync {
    let mut spec = Map::new();
    let mut annotations = Map::new();
    let mut out = HostSync::default();
    let host_ns = host.namespace().unwrap_or_default();
    let host_name = host.name_any();
    let host_ann = host.annotations();
    let claim_ann = claim.annotations();

    // Pause first: a paused claim changes nothing else on its host.
    let paused_by_claim =
        host_ann.get(ann::PAUSED).map(String::as_str) == Some(ann::PAUSED_BY_HOSTCLAIM);
    if is_paused(claim) {
        if !host_ann.contains_key(ann::PAUSED) {
            annotations.insert(ann::PAUSED.into(), ann::PAUSED_BY_HOSTCLAIM.into());
        }
    } else {
        if paused_by_claim {
            annotations.insert(ann::PAUSED.into(), Value::Null);
        }
        if host.spec.online != claim.spec.powered_on {
            spec.insert("online".into(), claim.spec.powered_on.into());
        }
        // Provisioning waits until every data Secret is copied: a host must never boot an
        // image without the user data its tenant gave it.
        if data.failed.is_none() {
            // Registry credentials are never passed on: the name would be read in the host's
            // namespace, where a tenant could name any infrastructure Secret.
            let image = passed_on_image(claim);
            let want_image = serde_json::to_value(&image).unwrap_or(Value::Null);
            let have_image = serde_json::to_value(&host.spec.image).unwrap_or(Value::Null);
            // A merge patch: fields the claim dropped (a checksum set to null) go as nulls, or
            // the host would keep them.
            if let Some(diff) = merge_diff(&have_image, &want_image) {
                spec.insert("image".into(), diff);
            }
            let want_deploy =
                serde_json::to_value(&claim.spec.custom_deploy).unwrap_or(Value::Null);
            if serde_json::to_value(&host.spec.custom_deploy).unwrap_or(Value::Null) != want_deploy
            {
                spec.insert("customDeploy".into(), want_deploy);
            }
            for kind in DataKind::ALL {
                let want = if data.copied.contains(&kind) {
                    Some((host_ns.clone(), kind.copy_name(&host_name)))
                } else {
                    None
                };
                let have = match kind {
                    DataKind::UserData => host.spec.user_data.as_ref(),
                    DataKind::NetworkData => host.spec.network_data.as_ref(),
                    DataKind::MetaData => host.spec.meta_data.as_ref(),
                }
                .and_then(|r| Some((r.namespace.clone().unwrap_or_default(), r.name.clone()?)));
                if want != have {
                    spec.insert(
                        kind.field().into(),
                        want.map_or(
                            Value::Null,
                            |(ns, name)| json!({"namespace": ns, "name": name}),
                        ),
                    );
                }
            }
        }
        // One-shot annotations once per claim version; keyed reboots as long as they are held.
        let token = forward_token(claim);
        let already = forwarded == Some(token.as_str());
        out.remove_from_claim = forward_annotations(
            claim_ann,
            host_ann,
            &token,
            already,
            Markers {
                forwarded: FORWARDED,
                mirrored_reboots: MIRRORED_REBOOTS,
            },
            &mut annotations,
        );
    }
    let mut patch = Map::new();
    if !spec.is_empty() {
        patch.insert("spec".into(), spec.into());
    }
    if !annotations.is_empty() {
        patch.insert("metadata".into(), json!({"annotations": annotations}));
    }
    if !patch.is_empty() {
        out.patch = Some(patch.into());
    }
    out
}

/// How the bound host stands, as the claim sees it.
#[derive(Clone, Copy, Debug)]
pub enum Binding<'a> {
    /// No host yet; the message says why none was bound.
    None,
    Bound(&'a BareMetalHost),
    /// The host the claim had is gone or detached (never silently replaced).
    Missing {
        detached: bool,
    },
}

/// Why the host's provisioning is or is not done, in words that name no infrastructure.
fn provisioned(claim: &HostClaim, host: &BareMetalHost) -> Condition {
    let state = host.state();
    let status = host.status.clone().unwrap_or_default();
    let wants_image = claim.spec.image.is_some() || claim.spec.custom_deploy.is_some();
    if status.error_type.is_some() {
        // The cause when the claim's own spec is it; otherwise only that there is an error.
        return provisioned_on_error(claim, host);
    }
    match state {
        ProvisioningState::Provisioned | ProvisioningState::ExternallyProvisioned
            if wants_image =>
        {
            let same = status.provisioning.image == passed_on_image(claim)
                && status.provisioning.custom_deploy == claim.spec.custom_deploy;
            if same || state == ProvisioningState::ExternallyProvisioned {
                condition(c::PROVISIONED, true, "Provisioned", "")
            } else {
                // The host follows a changed image by deprovisioning and provisioning again.
                condition(
                    c::PROVISIONED,
                    false,
                    "ImageChanged",
                    "the host still runs the previous image; it is deprovisioned and provisioned again with spec.image",
                )
            }
        }
        _ if !wants_image => condition(
            c::PROVISIONED,
            false,
            "NoImage",
            format!("no image requested; the host is {}", state_words(state)),
        ),
        _ => condition(
            c::PROVISIONED,
            false,
            "Provisioning",
            provisioning_words(state),
        ),
    }
}

/// The message while the host works towards the claim's image. The steps from available to
/// provisioned share one: a message per step would be a status write per step, and a
/// tenant learns nothing from them that the condition's reason does not say.
fn provisioning_words(state: ProvisioningState) -> String {
    match state {
        ProvisioningState::Available
        | ProvisioningState::Ready
        | ProvisioningState::Preparing
        | ProvisioningState::Provisioning => "the host is being provisioned with spec.image".into(),
        other => format!("the host is {}", state_words(other)),
    }
}

fn state_words(state: ProvisioningState) -> &'static str {
    match state {
        ProvisioningState::Provisioning => "provisioning",
        ProvisioningState::Provisioned => "provisioned",
        ProvisioningState::Deprovisioning => "deprovisioning",
        ProvisioningState::Available | ProvisioningState::Ready => "available",
        ProvisioningState::Preparing => "preparing",
        ProvisioningState::Inspecting => "inspecting",
        ProvisioningState::Registering => "registering",
        ProvisioningState::PoweringOffBeforeDelete | ProvisioningState::Deleting => "being deleted",
        _ => "not ready",
    }
}

/// The claim's status for what was observed. `no_host` explains an unbound claim;
/// `sync_error` is a failure writing to the host. Transition times are kept where the status
/// did not change.
pub struct StatusInput<'a> {
    pub claim: &'a HostClaim,
    pub binding: Binding<'a>,
    pub no_host: &'a str,
    pub data: &'a DataSync,
    pub sync_error: Option<&'a str>,
    pub deleting: Option<&'a str>,
    pub hardware_data: Option<NamespacedRef>,
    pub now: &'a str,
}

pub fn status(input: StatusInput<'_>) -> ferrometal_api::HostClaimStatus {
    let claim = input.claim;
    let old = claim.status.clone().unwrap_or_default();
    let mut conds = Vec::new();
    let mut powered_on = false;
    let mut bare_metal_host = old.bare_metal_host.clone();
    let mut servicing = false;
    match input.binding {
        Binding::None => {
            conds.push(condition(
                c::ASSOCIATED,
                false,
                c::NO_BARE_METAL_HOST,
                input.no_host,
            ));
            bare_metal_host = None;
        }
        Binding::Missing { detached } => {
            conds.push(condition(
                c::ASSOCIATED,
                false,
                c::MISSING_BARE_METAL_HOST,
                if detached {
                    "the host serving this claim was detached by the infrastructure team"
                } else {
                    "the host serving this claim was removed; delete the claim to claim another"
                },
            ));
            conds.push(condition(
                c::SYNCHRONIZED,
                false,
                c::BARE_METAL_HOST_NOT_SYNCHRONIZED,
                "no host to synchronize with",
            ));
            conds.push(condition(
                c::PROVISIONED,
                false,
                c::MISSING_BARE_METAL_HOST,
                "",
            ));
        }
        Binding::Bound(host) => {
            bare_metal_host = Some(NamespacedRef {
                namespace: host.namespace().unwrap_or_default(),
                name: host.name_any(),
            });
            conds.push(condition(
                c::ASSOCIATED,
                true,
                c::BARE_METAL_HOST_ASSOCIATED,
                "",
            ));
            let sync = if is_paused(claim) {
                condition(
                    c::SYNCHRONIZED,
                    false,
                    c::HOST_PAUSED,
                    "the claim is paused",
                )
            } else if let Some((kind, msg)) = &input.data.failed {
                condition(c::SYNCHRONIZED, false, kind.failure_reason(), msg.clone())
            } else if let Some(e) = input.sync_error {
                condition(
                    c::SYNCHRONIZED,
                    false,
                    c::BARE_METAL_HOST_NOT_SYNCHRONIZED,
                    e,
                )
            } else {
                condition(c::SYNCHRONIZED, true, c::CONFIGURATION_SYNCED, "")
            };
            conds.push(sync);
            conds.push(provisioned(claim, host));
            powered_on = host.status.as_ref().is_some_and(|s| s.powered_on);
            servicing = host
                .status
                .as_ref()
                .is_some_and(|s| s.operational_status == OperationalStatus::Servicing);
        }
    }
    if let Some(msg) = input.deleting {
        conds[0] = condition(c::ASSOCIATED, false, c::HOST_CLAIM_DELETING, msg);
    }
    finish_status(
        claim,
        conds,
        servicing,
        bare_metal_host,
        input.hardware_data,
        powered_on,
        input.now,
    )
}

/// The status from its three conditions (Associated, Synchronized, Provisioned): Ready
/// summarising them, as metal3's summary condition does, and transition times kept where a
/// condition's status did not change. Shared by every provider.
pub fn finish_status(
    claim: &HostClaim,
    mut conds: Vec<Condition>,
    servicing: bool,
    bare_metal_host: Option<NamespacedRef>,
    hardware_data: Option<NamespacedRef>,
    powered_on: bool,
    now: &str,
) -> ferrometal_api::HostClaimStatus {
    let old = claim.status.clone().unwrap_or_default();
    let first_false = conds.iter().find(|c| c.status != "True").cloned();
    let all_three = conds.len() == 3;
    conds.push(match first_false {
        Some(f) => condition(c::READY, false, &f.reason, f.message),
        None if all_three && servicing => condition(
            c::READY,
            false,
            c::SERVICING,
            "the host is servicing: firmware changes are being made across a reboot",
        ),
        None if all_three => condition(c::READY, true, "Ready", ""),
        None => condition(c::READY, false, "Unknown", ""),
    });
    for cond in &mut conds {
        let prev = old.condition(&cond.type_);
        cond.last_transition_time = match prev {
            Some(p) if p.status == cond.status => p.last_transition_time.clone(),
            _ => Some(now.to_string()),
        };
        cond.observed_generation = claim.metadata.generation;
    }
    let mut st = ferrometal_api::HostClaimStatus {
        last_updated: old.last_updated.clone(),
        conditions: conds,
        bare_metal_host,
        hardware_data,
        powered_on,
    };
    if st != old {
        st.last_updated = Some(now.to_string());
    }
    st
}

/// The next step of releasing a host from a deleted claim.
#[derive(Debug, PartialEq)]
pub enum Release {
    /// Take the workload off the host (a merge patch); deprovisioning follows.
    Deprovision(Value),
    /// Wait for the host to become available again.
    Wait(String),
    /// Free the host (a merge patch clearing consumerRef and our bookkeeping).
    Free(Value),
    /// Nothing left on the host.
    Done,
}

fn cleared_annotations(host: &BareMetalHost) -> Map<String, Value> {
    let mut a = Map::new();
    let h = host.annotations();
    if h.get(ann::PAUSED).map(String::as_str) == Some(ann::PAUSED_BY_HOSTCLAIM) {
        a.insert(ann::PAUSED.into(), Value::Null);
    }
    for key in [FORWARDED, MIRRORED_REBOOTS] {
        if h.contains_key(key) {
            a.insert(key.into(), Value::Null);
        }
    }
    if let Some(list) = h.get(MIRRORED_REBOOTS) {
        for key in list.split(',').filter(|k| !k.is_empty()) {
            if h.contains_key(key) {
                a.insert(key.into(), Value::Null);
            }
        }
    }
    a
}

pub fn release(host: &BareMetalHost) -> Release {
    let s = &host.spec;
    let detached = super::select::is_detached(host);
    let workload = s.image.is_some()
        || s.custom_deploy.is_some()
        || s.user_data.is_some()
        || s.network_data.is_some()
        || s.meta_data.is_some();
    let annotations = cleared_annotations(host);
    if workload || s.online {
        let mut patch = json!({"spec": {
            "image": null, "customDeploy": null, "userData": null,
            "networkData": null, "metaData": null, "online": false,
        }});
        // The host's pause by the claim must go, or it would never deprovision.
        if annotations.contains_key(ann::PAUSED) {
            patch["metadata"] = json!({"annotations": {ann::PAUSED: null}});
        }
        return Release::Deprovision(patch);
    }
    let state = host.state();
    let settled = matches!(
        state,
        ProvisioningState::Available
            | ProvisioningState::Ready
            | ProvisioningState::ExternallyProvisioned
            | ProvisioningState::Unmanaged
    );
    if !settled && !detached && host.metadata.deletion_timestamp.is_none() {
        return Release::Wait(format!(
            "waiting for the host to finish deprovisioning (it is {})",
            state_words(state)
        ));
    }
    if host.spec.consumer_ref.is_some() || !annotations.is_empty() {
        let mut patch = json!({"spec": {"consumerRef": null}});
        if !annotations.is_empty() {
            patch["metadata"] = json!({"annotations": annotations});
        }
        return Release::Free(patch);
    }
    Release::Done
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
