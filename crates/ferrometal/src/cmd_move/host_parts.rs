//! What the host move reads of a host, shared by the move itself, its dry run and the detach step.

use std::collections::BTreeSet;

use anyhow::Context as _;
use ferrometal_api::{BareMetalHost, BareMetalHostStatus, CredentialsStatus};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use super::common::Cluster;
use super::objects::Key;

pub(super) fn hosts_api(cluster: &Cluster, ns: &str) -> Api<BareMetalHost> {
    Api::namespaced(cluster.client.clone(), ns)
}

pub(super) fn state(host: &BareMetalHost) -> String {
    host.status
        .as_ref()
        .map(|s| s.provisioning.state.to_string())
        .unwrap_or_default()
}

pub(super) fn bmc_address(host: &BareMetalHost) -> Option<&str> {
    host.spec.bmc.as_ref().map(|b| b.address.as_str())
}

/// The Secrets a host refers to: BMC credentials, user, network and meta data, and the
/// pre-provisioning network data.
pub(super) fn secret_refs(host: &BareMetalHost) -> Vec<Key> {
    let ns = host.namespace().unwrap_or_default();
    let mut out = BTreeSet::new();
    if let Some(bmc) = &host.spec.bmc
        && !bmc.credentials_name.is_empty()
    {
        out.insert((ns.clone(), bmc.credentials_name.clone()));
    }
    for r in [
        &host.spec.user_data,
        &host.spec.network_data,
        &host.spec.meta_data,
    ]
    .into_iter()
    .flatten()
    {
        if let Some(name) = r.name.as_ref().filter(|n| !n.is_empty()) {
            let rns = r.namespace.clone().filter(|n| !n.is_empty());
            out.insert((rns.unwrap_or_else(|| ns.clone()), name.clone()));
        }
    }
    if let Some(name) = host
        .spec
        .preprovisioning_network_data_name
        .as_ref()
        .filter(|n| !n.is_empty())
    {
        out.insert((ns, name.clone()));
    }
    out.into_iter().collect()
}

/// The status the copy carries to the target. The controller tells changed credentials by the
/// Secret's resourceVersion, which differs at the target although the move copied the Secret
/// unchanged: a version naming the source's current Secret is replaced by the target's, so the
/// target reports no `CredentialsChanged`. One naming an older version (a change the source had
/// not yet verified) is kept, and the target verifies it.
pub(super) async fn carried_status(
    host: &BareMetalHost,
    from: &Cluster,
    to: &Cluster,
) -> anyhow::Result<Option<BareMetalHostStatus>> {
    let Some(mut status) = host.status.clone() else {
        return Ok(None);
    };
    let Some(name) = host
        .spec
        .bmc
        .as_ref()
        .map(|b| b.credentials_name.clone())
        .filter(|n| !n.is_empty())
    else {
        return Ok(Some(status));
    };
    let ns = host.namespace().unwrap_or_default();
    let version = |c: &Cluster| {
        let api: Api<Secret> = Api::namespaced(c.client.clone(), &ns);
        let name = name.clone();
        async move {
            api.get_opt(&name)
                .await
                .map(|s| s.and_then(|s| s.metadata.resource_version))
        }
    };
    let source = version(from)
        .await
        .context("reading the credentials at the source")?;
    let target = version(to)
        .await
        .context("reading the credentials at the target")?;
    let (Some(source), Some(target)) = (source, target) else {
        return Ok(Some(status));
    };
    for c in [&mut status.good_credentials, &mut status.tried_credentials]
        .into_iter()
        .flatten()
    {
        rebase(c, &name, &source, &target);
    }
    Ok(Some(status))
}

fn rebase(c: &mut CredentialsStatus, name: &str, source: &str, target: &str) {
    let names_it = c
        .credentials
        .as_ref()
        .is_some_and(|r| r.name.as_deref() == Some(name));
    if names_it && c.credentials_version.as_deref() == Some(source) {
        c.credentials_version = Some(target.to_string());
    }
}
