//! The claim's data Secrets copied next to its host (and deleted when no longer used), and its
//! host's HardwareData copied into the claim's namespace.

use std::collections::BTreeMap;

use ferrometal_api::{BareMetalHost, HostClaim, NamespacedRef};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::context::ClaimContext;
use super::decide::{COPY_LABEL, COPY_NAME_LABEL, DataSync};
use crate::error::{Error, conflict, not_found};
use crate::forwarding::DataKind;
use crate::hardware_data::{FIELD_MANAGER, write_hardware_copy};

/// Copies the claim's data Secrets into the host's namespace as `<host>-userdata` etc.
pub(super) async fn copy_data(
    claim: &HostClaim,
    host: &BareMetalHost,
    ctx: &ClaimContext,
) -> Result<DataSync, Error> {
    let claim_ns = claim.namespace().unwrap_or_default();
    let host_ns = host.namespace().unwrap_or_default();
    let mut out = DataSync::default();
    for kind in DataKind::ALL {
        let Some((src_ns, src_name)) = kind.source(claim) else {
            continue;
        };
        if src_ns != claim_ns {
            // The controller can read every Secret; a claim must never make it copy one from
            // another namespace (say, BMC credentials) onto a tenant's disk.
            out.failed = Some((
                kind,
                format!(
                    "spec.{}.namespace {src_ns:?} must be the claim's namespace {claim_ns:?}",
                    kind.field()
                ),
            ));
            break;
        }
        let found = Api::<Secret>::namespaced(ctx.client.clone(), &claim_ns)
            .get_opt(&src_name)
            .await?;
        let Some(source) = found else {
            out.failed = Some((
                kind,
                format!("spec.{}: Secret {src_name:?} not found", kind.field()),
            ));
            break;
        };
        let copy_name = kind.copy_name(&host.name_any());
        let copies: Api<Secret> = Api::namespaced(ctx.client.clone(), &host_ns);
        let existing = copies.get_opt(&copy_name).await?;
        if let Some(e) = &existing
            && !is_copy_of(e, claim)
        {
            out.failed = Some((
                kind,
                format!(
                    "spec.{}: the host's {} Secret is not managed by this claim",
                    kind.field(),
                    kind.field()
                ),
            ));
            break;
        }
        let same = existing.as_ref().is_some_and(|e| {
            e.data == source.data && e.string_data.is_none() && e.type_ == source.type_
        });
        if !same {
            let mut labels = BTreeMap::new();
            labels.insert(COPY_LABEL.to_string(), claim_ns.clone());
            labels.insert(COPY_NAME_LABEL.to_string(), claim.name_any());
            let copy = json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": copy_name, "namespace": host_ns, "labels": labels},
                "type": source.type_,
                "data": source.data.clone().unwrap_or_default(),
            });
            copies
                .patch(
                    &copy_name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&copy),
                )
                .await?;
        }
        out.copied.push(kind);
    }
    Ok(out)
}

fn is_copy_of(secret: &Secret, claim: &HostClaim) -> bool {
    let l = secret.labels();
    l.get(COPY_LABEL) == claim.namespace().as_ref()
        && l.get(COPY_NAME_LABEL) == Some(&claim.name_any())
}

/// Deletes this claim's copies the host no longer uses (all of them when `keep` is empty).
pub(super) async fn delete_copies(
    claim: &HostClaim,
    host_ns: &str,
    host_name: &str,
    keep: &[DataKind],
    ctx: &ClaimContext,
) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), host_ns);
    for kind in DataKind::ALL {
        if keep.contains(&kind) {
            continue;
        }
        let name = kind.copy_name(host_name);
        if let Some(s) = api.get_opt(&name).await?
            && is_copy_of(&s, claim)
        {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: s.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if not_found(&e) || conflict(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

pub(super) async fn delete_stale_copies(
    claim: &HostClaim,
    host: &BareMetalHost,
    data: &DataSync,
    ctx: &ClaimContext,
) -> Result<(), Error> {
    if data.failed.is_some() {
        return Ok(());
    }
    // Only kinds neither copied now nor still referenced by the host can go.
    let referenced: Vec<DataKind> = DataKind::ALL
        .into_iter()
        .filter(|k| {
            data.copied.contains(k)
                || match k {
                    DataKind::UserData => host.spec.user_data.is_some(),
                    DataKind::NetworkData => host.spec.network_data.is_some(),
                    DataKind::MetaData => host.spec.meta_data.is_some(),
                }
        })
        .collect();
    if referenced.len() == DataKind::ALL.len() {
        return Ok(());
    }
    delete_copies(
        claim,
        &host.namespace().unwrap_or_default(),
        &host.name_any(),
        &referenced,
        ctx,
    )
    .await
}

/// Copies the host's HardwareData into the claim's namespace, named after the claim and owned
/// by it, so the tenant reads inspection data without access to the hosts' namespace.
pub(super) async fn copy_hardware_data(
    claim: &HostClaim,
    host: &BareMetalHost,
    ctx: &ClaimContext,
) -> Result<Option<NamespacedRef>, Error> {
    let claim_ns = claim.namespace().unwrap_or_default();
    let source = ctx
        .hardware
        .get(&ObjectRef::new(&host.name_any()).within(&host.namespace().unwrap_or_default()));
    let Some(source) = source else {
        return Ok(claim.status.as_ref().and_then(|s| s.hardware_data.clone()));
    };
    let existing = ctx
        .hardware
        .get(&ObjectRef::new(&claim.name_any()).within(&claim_ns));
    if existing.as_ref().map(|e| &e.spec) != Some(&source.spec) {
        write_hardware_copy(&ctx.client, claim, &source.spec).await?;
    }
    Ok(Some(NamespacedRef {
        namespace: claim_ns,
        name: claim.name_any(),
    }))
}
