//! `ferrometal move --dry-run` for hosts: what would move, read from both clusters, changing
//! nothing anywhere.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::Context as _;
use ferrometal_api::annotations as ann;
use ferrometal_api::claim::HostDeployPolicy;
use ferrometal_api::{BareMetalHost, HardwareData};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use super::common::or_dash;
use super::common::{self, Cluster};
use super::host_parts::{bmc_address, hosts_api, secret_refs, state};
use super::hosts_guard::{CLAIMED_HINT, claim_holder};
use super::objects::show;

pub(super) async fn dry_run(
    hosts: &[BareMetalHost],
    policies: &[HostDeployPolicy],
    from: &Cluster,
    to: &Cluster,
    limit: usize,
) -> anyhow::Result<ExitCode> {
    // Both clusters' reads for `limit` hosts at a time, in the hosts' order.
    let looked: Vec<anyhow::Result<(bool, Option<BareMetalHost>)>> = futures::stream::iter(hosts)
        .map(|h| look(h, from, to))
        .buffered(limit.max(1))
        .collect()
        .await;
    let mut rows = Vec::new();
    let mut secrets = BTreeSet::new();
    let mut hardware = 0;
    let mut claimed = 0;
    for (h, looked) in hosts.iter().zip(looked) {
        let key = (h.namespace().unwrap_or_default(), h.name_any());
        let (hd, at_target) = looked?;
        hardware += usize::from(hd);
        let refs = secret_refs(h);
        let power = match h.status.as_ref().map(|s| s.powered_on) {
            Some(true) => "on",
            Some(false) => "off",
            None => "-",
        };
        let mut note = Vec::new();
        if let Some(c) = claim_holder(h) {
            claimed += 1;
            note.push(format!("held by {c}: the move would refuse it"));
        }
        if let Some(v) = h.annotations().get(ann::PAUSED) {
            note.push(format!("paused ({v})"));
        }
        if let Some(t) = &at_target {
            note.push(if bmc_address(t) == bmc_address(h) {
                "already at the target".to_string()
            } else {
                "CONFLICT: another host of that name at the target".to_string()
            });
        }
        rows.push(vec![
            key.0.clone(),
            key.1.clone(),
            or_dash(&state(h)),
            power.to_string(),
            if refs.is_empty() {
                "-".into()
            } else {
                refs.iter()
                    .map(|k| k.1.clone())
                    .collect::<Vec<_>>()
                    .join(",")
            },
            if hd { "yes" } else { "no" }.into(),
            note.join("; "),
        ]);
        secrets.extend(refs);
    }
    println!("would move from {} to {}:", from.url, to.url);
    common::table(
        &[
            "NAMESPACE",
            "HOST",
            "STATE",
            "POWER",
            "SECRETS",
            "HARDWAREDATA",
            "NOTE",
        ],
        &rows,
    );
    let found: Vec<anyhow::Result<bool>> = futures::stream::iter(&secrets)
        .map(|key| async move {
            Ok(Api::<Secret>::namespaced(from.client.clone(), &key.0)
                .get_opt(&key.1)
                .await
                .with_context(|| format!("--from: reading Secret {}", show(key)))?
                .is_some())
        })
        .buffered(limit.max(1))
        .collect()
        .await;
    let mut missing = Vec::new();
    for (key, found) in secrets.iter().zip(found) {
        if !found? {
            missing.push(show(key));
        }
    }
    if !missing.is_empty() {
        println!("missing at the source: Secret {}", missing.join(", "));
    }
    for p in policies {
        println!(
            "would copy HostDeployPolicy {}/{}",
            p.namespace().unwrap_or_default(),
            p.name_any()
        );
    }
    if claimed > 0 {
        // The move checks this before it changes anything; so does its dry run.
        println!(
            "dry run: the move would refuse: {claimed} of {} hosts are held by HostClaims \
             ({CLAIMED_HINT}); nothing was changed",
            hosts.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "dry run: {} hosts, {} Secrets, {} HardwareData, {} HostDeployPolicies would move; \
         nothing was changed",
        hosts.len(),
        secrets.len(),
        hardware,
        policies.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Whether the host has HardwareData at the source, and the host of its name at the target.
async fn look(
    h: &BareMetalHost,
    from: &Cluster,
    to: &Cluster,
) -> anyhow::Result<(bool, Option<BareMetalHost>)> {
    let key = (h.namespace().unwrap_or_default(), h.name_any());
    let hd = Api::<HardwareData>::namespaced(from.client.clone(), &key.0)
        .get_opt(&key.1)
        .await
        .with_context(|| format!("--from: reading HardwareData {}", show(&key)))?
        .is_some();
    let at_target = hosts_api(to, &key.0)
        .get_opt(&key.1)
        .await
        .with_context(|| format!("--to: reading BareMetalHost {}", show(&key)))?;
    Ok((hd, at_target))
}
