//! What the host move checks before it changes anything, and what it carries besides hosts:
//! hosts a HostClaim holds are refused (moving one breaks its claim: the claim stays at the
//! source with no host, a remote claim's mirror loses its host, and the host at the target
//! names a claim that is not there); the target is reached or named as unreachable; the
//! HostDeployPolicies of the moved namespaces are copied, so the target lends as the source did.

use std::collections::BTreeSet;

use anyhow::{Context as _, anyhow};
use ferrometal_api::claim::{HOSTCLAIM_KIND, HostDeployPolicy};
use ferrometal_api::{BareMetalHost, HardwareData};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

use super::common::{Cluster, progress};

/// `HostClaim NS/NAME` when a HostClaim holds the host (its consumerRef names one).
pub(super) fn claim_holder(host: &BareMetalHost) -> Option<String> {
    let c = host.spec.consumer_ref.as_ref()?;
    if c.kind.as_deref() != Some(HOSTCLAIM_KIND) {
        return None;
    }
    let ns = c
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| host.namespace())
        .unwrap_or_default();
    Some(format!(
        "{HOSTCLAIM_KIND} {ns}/{}",
        c.name.as_deref().unwrap_or("")
    ))
}

/// What to do about claimed hosts, for the refusal and the dry run.
pub(super) const CLAIMED_HINT: &str = "delete the claim first (its host is deprovisioned and \
    released), or move the claims instead with --claims; hosts stay where their claims are";

/// Prints each claimed host and returns an error naming them, or Ok when none is claimed.
pub(super) fn refuse_claimed(hosts: &[BareMetalHost]) -> anyhow::Result<()> {
    let claimed: Vec<String> = hosts
        .iter()
        .filter_map(|h| {
            claim_holder(h).map(|c| {
                format!(
                    "{}/{} is held by {c}",
                    h.namespace().unwrap_or_default(),
                    h.name_any()
                )
            })
        })
        .collect();
    if claimed.is_empty() {
        return Ok(());
    }
    for c in &claimed {
        progress("refused", c, "");
    }
    Err(anyhow!(
        "{} of {} hosts are held by HostClaims and a move would break their claims; nothing \
         was changed: {CLAIMED_HINT}",
        claimed.len(),
        hosts.len()
    ))
}

/// The target must be reachable and serve BareMetalHosts and HardwareData (metal3's CRDs or
/// ferrometal serve). A connection failure is named as such, not as missing CRDs.
pub(super) async fn preflight(to: &Cluster) -> anyhow::Result<()> {
    let one = ListParams::default().limit(1);
    if let Err(e) = Api::<BareMetalHost>::all(to.client.clone())
        .list(&one)
        .await
    {
        return Err(match e {
            kube::Error::Api(a) if a.code == 404 => anyhow!(
                "--to: {} serves no BareMetalHosts (metal3.io/v1alpha1); install the CRDs first \
                 (ferrometal crds | kubectl apply -f -)",
                to.url
            ),
            kube::Error::Api(a) => anyhow!(
                "--to: {} refused to list BareMetalHosts: {} ({})",
                to.url,
                a.message,
                a.code
            ),
            other => unreachable_error(to, &other),
        });
    }
    Api::<HardwareData>::all(to.client.clone())
        .list(&one)
        .await
        .with_context(|| {
            format!(
                "--to: {} serves no HardwareData (metal3.io/v1alpha1)",
                to.url
            )
        })?;
    Ok(())
}

/// `--to: cannot reach URL: connection refused (...)`: the cause first, the detail after.
fn unreachable_error(cluster: &Cluster, e: &kube::Error) -> anyhow::Error {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut cause = "";
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            cause = match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    "connection refused (is its API server running?)"
                }
                std::io::ErrorKind::TimedOut => "connection timed out",
                _ => "",
            };
        }
        source = s.source();
    }
    if cause.is_empty() {
        anyhow!("{}: cannot reach {}: {e}", cluster.flag, cluster.url)
    } else {
        anyhow!("{}: cannot reach {}: {cause}", cluster.flag, cluster.url)
    }
}

/// The HostDeployPolicies of `namespaces` at the source.
pub(super) async fn policies(
    from: &Cluster,
    namespaces: &BTreeSet<String>,
) -> anyhow::Result<Vec<HostDeployPolicy>> {
    let mut out = Vec::new();
    for ns in namespaces {
        let list = Api::<HostDeployPolicy>::namespaced(from.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .with_context(|| format!("--from: listing HostDeployPolicies in {ns}"))?;
        out.extend(list.items);
    }
    Ok(out)
}

/// Creates each policy at the target, or brings its spec up to date. The source keeps its
/// copy: it lends nothing once its hosts are gone.
pub(super) async fn copy_policies(
    policies: &[HostDeployPolicy],
    to: &Cluster,
) -> anyhow::Result<()> {
    for p in policies {
        let ns = p.namespace().unwrap_or_default();
        let name = p.name_any();
        let api = Api::<HostDeployPolicy>::namespaced(to.client.clone(), &ns);
        let mut want = HostDeployPolicy::new(&name, p.spec.clone());
        want.metadata.namespace = Some(ns.clone());
        want.metadata.labels = p.metadata.labels.clone();
        want.metadata.annotations = p.metadata.annotations.clone();
        let what = match api.get_opt(&name).await.context("--to: reading a policy")? {
            None => {
                api.create(&PostParams::default(), &want)
                    .await
                    .with_context(|| format!("--to: creating HostDeployPolicy {ns}/{name}"))?;
                "created"
            }
            Some(t) if t.spec == want.spec => "unchanged",
            Some(t) => {
                want.metadata.resource_version = t.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &want)
                    .await
                    .with_context(|| format!("--to: updating HostDeployPolicy {ns}/{name}"))?;
                "updated"
            }
        };
        progress("copied", &format!("HostDeployPolicy {ns}/{name}"), what);
    }
    Ok(())
}
