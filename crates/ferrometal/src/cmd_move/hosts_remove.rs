//! The host move's last phase, at the source: every host the target holds is detached (see
//! `hosts_detach`), then deleted with its HardwareData and the Secrets no remaining host refers
//! to, finalizers removed first, `--concurrency` hosts at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use anyhow::{Context as _, bail};
use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, HardwareData};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::common::{Cluster, CrashHook, MOVE_PAUSE, progress};
use super::host_parts::{bmc_address, hosts_api, secret_refs};
use super::hosts_item::{Item, alive};
use super::objects::{Key, delete_without_finalizers, show};
use super::phase::{self, Outcome};

/// Who refers to each Secret at the source; a Secret is deleted with the last host leaving.
type Users = BTreeMap<Key, BTreeSet<Key>>;

pub(super) async fn remove(
    items: &mut [Item],
    from: &Cluster,
    to: &Cluster,
    limit: usize,
    crash: &Option<CrashHook>,
) {
    let leaving: Vec<(Key, String)> = items
        .iter()
        .filter(|i| i.alive())
        .map(|i| (i.key.clone(), i.pause.clone()))
        .collect();
    super::hosts_detach::detach(&leaving, from, to, limit).await;
    let mut users = Users::new();
    let everyone = match Api::<BareMetalHost>::all(from.client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            // Without the full list no Secret can be known to be unused: keep them all.
            progress(
                "warning",
                "secrets",
                &format!("listing hosts at the source: {e}; Secrets stay at the source"),
            );
            Vec::new()
        }
    };
    let listed = !everyone.is_empty();
    for h in &everyone {
        let key = (h.namespace().unwrap_or_default(), h.name_any());
        for s in secret_refs(h) {
            users.entry(s).or_default().insert(key.clone());
        }
    }
    let users = Mutex::new(users);
    let users = &users;
    phase::run("remove", alive(items), limit, crash, |item| async move {
        match remove_one(item, from, to, listed, users).await {
            Ok(labels) => Outcome::Done(labels),
            Err(e) => item.fail("remove", e),
        }
    })
    .await;
}

/// Deletes one host at the source, once the target holds it. Returns the labels the phase
/// counts.
async fn remove_one(
    item: &Item,
    from: &Cluster,
    to: &Cluster,
    listed: bool,
    users: &Mutex<Users>,
) -> anyhow::Result<Vec<String>> {
    let (ns, name) = &item.key;
    let api = hosts_api(from, ns);
    let Some(host) = api
        .get_opt(name)
        .await
        .context("reading the host at the source")?
    else {
        return Ok(vec!["already gone".into()]);
    };
    let detaching = host.annotations().contains_key(ann::DETACHED);
    if !host.annotations().contains_key(ann::PAUSED) && !detaching {
        bail!("the host is no longer paused at the source; left there");
    }
    // Never delete what the target does not hold.
    let target = hosts_api(to, ns)
        .get_opt(name)
        .await
        .context("reading the host at the target")?;
    if target.as_ref().map(bmc_address) != Some(bmc_address(&host)) {
        bail!("the host is not at the target; left at the source");
    }
    // Detached above: paused again, so that nothing at the source acts on it any more, and its
    // finalizers removed, so that nothing acts on its deletion either; one write for both (the
    // source's own writes are what the removal waits on).
    let mut meta = serde_json::Map::new();
    if !host.annotations().contains_key(ann::PAUSED) {
        meta.insert("annotations".into(), json!({ann::PAUSED: MOVE_PAUSE}));
    }
    if !host.finalizers().is_empty() {
        meta.insert("finalizers".into(), Value::Null);
    }
    if !meta.is_empty() {
        let patch = json!({ "metadata": meta });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("pausing the detached host at the source")?;
    }
    let mut labels = vec!["deleted".to_string()];
    // Secrets before the host: if this stops midway, the host is still here to be removed again.
    for key in secret_refs(&host) {
        // The last host to leave that refers to the Secret deletes it, whichever finishes first.
        let others = users
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key)
            .map(|u| {
                u.remove(&item.key);
                u.len()
            });
        if !listed || others.unwrap_or(0) > 0 {
            continue;
        }
        let secrets = Api::<Secret>::namespaced(from.client.clone(), &key.0);
        match secrets.delete(&key.1, &DeleteParams::default()).await {
            Ok(_) => labels.push("Secret{s} deleted".into()),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("deleting Secret {}", show(&key))),
        }
    }
    if delete_without_finalizers(
        &Api::<HardwareData>::namespaced(from.client.clone(), ns),
        name,
    )
    .await
    .context("deleting the HardwareData at the source")?
    {
        labels.push("with HardwareData".into());
    }
    delete_without_finalizers(&api, name)
        .await
        .context("deleting the host at the source")?;
    Ok(labels)
}
