//! Object-level steps both moves share: copying a Secret, deleting without finalizers.

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::common::Cluster;

/// (namespace, name)
pub(crate) type Key = (String, String);

pub(crate) fn show(key: &Key) -> String {
    format!("{}/{}", key.0, key.1)
}

/// The Secret as it should be at the target: data, type and the user's metadata only.
fn clean_secret(src: &Secret) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: src.metadata.name.clone(),
            namespace: src.metadata.namespace.clone(),
            labels: src.metadata.labels.clone(),
            annotations: src.metadata.annotations.clone(),
            ..Default::default()
        },
        data: src.data.clone(),
        type_: src.type_.clone(),
        immutable: src.immutable,
        ..Default::default()
    }
}

fn same_secret(a: &Secret, b: &Secret) -> bool {
    a.data.clone().unwrap_or_default() == b.data.clone().unwrap_or_default()
        && a.type_.as_deref().unwrap_or("Opaque") == b.type_.as_deref().unwrap_or("Opaque")
        && a.metadata.labels.clone().unwrap_or_default()
            == b.metadata.labels.clone().unwrap_or_default()
        && a.metadata.annotations.clone().unwrap_or_default()
            == b.metadata.annotations.clone().unwrap_or_default()
}

/// Creates or updates the Secret at the target. A Secret gone from the source but present at the
/// target was moved by an earlier, interrupted run.
pub(crate) async fn copy_secret(
    key: &Key,
    from: &Cluster,
    to: &Cluster,
) -> anyhow::Result<&'static str> {
    let (ns, name) = key;
    let source = Api::<Secret>::namespaced(from.client.clone(), ns)
        .get_opt(name)
        .await
        .with_context(|| format!("reading Secret {ns}/{name} at the source"))?;
    let api = Api::<Secret>::namespaced(to.client.clone(), ns);
    let existing = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading Secret {ns}/{name} at the target"))?;
    let Some(source) = source else {
        if existing.is_some() {
            return Ok("already moved");
        }
        bail!("Secret {ns}/{name} exists neither at the source nor at the target");
    };
    let mut want = clean_secret(&source);
    match existing {
        None => {
            match api.create(&PostParams::default(), &want).await {
                Ok(_) => {}
                // Created meanwhile: the next run compares it.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("creating Secret {ns}/{name}"));
                }
            }
            Ok("created")
        }
        Some(t) if same_secret(&t, &want) => Ok("unchanged"),
        Some(t) => {
            want.metadata.resource_version = t.metadata.resource_version.clone();
            api.replace(name, &PostParams::default(), &want)
                .await
                .with_context(|| format!("updating Secret {ns}/{name} at the target"))?;
            Ok("updated")
        }
    }
}

/// Removes the object's finalizers (so no controller acts on its deletion) and deletes it.
/// Returns whether it existed.
pub(crate) async fn delete_without_finalizers<K>(api: &Api<K>, name: &str) -> anyhow::Result<bool>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let Some(obj) = api.get_opt(name).await? else {
        return Ok(false);
    };
    if !obj.meta().finalizers.as_ref().is_none_or(Vec::is_empty) {
        let patch = json!({"metadata": {"finalizers": null}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(true),
        Err(e) => Err(e.into()),
    }
}
