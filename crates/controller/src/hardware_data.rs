//! The HardwareData object that carries a host's inspection result, and the copy of it a claim
//! gets in its own namespace.

use ferrometal_api::{BareMetalHost, HardwareData, HardwareDataSpec, HardwareDetails, HostClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};

pub const FIELD_MANAGER: &str = "ferrometal-controller";

/// The HardwareData for `host` (same name and namespace, owned by the host).
pub fn build(host: &BareMetalHost, details: &HardwareDetails) -> HardwareData {
    let mut hd = HardwareData::new(
        &host.name_any(),
        HardwareDataSpec {
            hardware: Some(details.clone()),
        },
    );
    hd.metadata.namespace = host.namespace();
    hd.metadata.owner_references = Some(vec![OwnerReference {
        api_version: BareMetalHost::api_version(&()).into(),
        kind: BareMetalHost::kind(&()).into(),
        name: host.name_any(),
        uid: host.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    hd
}

/// Creates or updates it with server-side apply.
pub async fn apply(
    client: &kube::Client,
    host: &BareMetalHost,
    details: &HardwareDetails,
) -> Result<(), kube::Error> {
    let api: Api<HardwareData> = Api::namespaced(client.clone(), host.namespace_or_default());
    let hd = build(host, details);
    api.patch(
        &host.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&hd),
    )
    .await?;
    Ok(())
}

/// Writes the claim's copy of inspection data into its namespace, named after the claim and
/// owned by it (server-side apply: created or replaced).
pub async fn write_hardware_copy(
    client: &kube::Client,
    claim: &HostClaim,
    spec: &HardwareDataSpec,
) -> Result<(), kube::Error> {
    let ns = claim.namespace().unwrap_or_default();
    let mut copy = HardwareData::new(&claim.name_any(), spec.clone());
    copy.metadata.namespace = Some(ns.clone());
    copy.metadata.owner_references = Some(vec![OwnerReference {
        api_version: HostClaim::api_version(&()).into(),
        kind: HostClaim::kind(&()).into(),
        name: claim.name_any(),
        uid: claim.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    Api::<HardwareData>::namespaced(client.clone(), &ns)
        .patch(
            &claim.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&copy),
        )
        .await?;
    Ok(())
}
