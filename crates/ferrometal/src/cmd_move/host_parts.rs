//! What the host move reads of a host, shared by the move itself, its dry run and the detach step.

use std::collections::BTreeSet;

use ferrometal_api::BareMetalHost;
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
