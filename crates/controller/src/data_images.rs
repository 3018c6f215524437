//! DataImages, as metal3 has them: named after a provisioned host, an ISO the host controller
//! attaches as virtual media at the host's next boot and records in `status.attachedImage`.
//! This controller ties each one to its host (owner reference, finalizer
//! `dataimage.metal3.io`), lets it go once nothing is attached (or its host is gone or
//! detached), and says in condition `ferrometal.io/HostFound` when no host has its name.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::media::DataImage;
use ferrometal_api::{BareMetalHost, Condition};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::conditions::{self, set_condition};
use crate::error::{Error, ignore_not_found};
use crate::host_bmc;
use crate::merge_patch::patch_metadata;
use crate::shared_watch::{Watched, applied, changed_or_gone};

pub const FINALIZER: &str = "dataimage.metal3.io";
/// ferrometal's condition: whether a host of the DataImage's name exists in its namespace.
pub const HOST_FOUND: &str = "ferrometal.io/HostFound";

pub struct DataImageContext {
    pub client: kube::Client,
    /// The hosts this process runs.
    pub hosts: Store<BareMetalHost>,
}

/// What to change on the object: its metadata (finalizers, owner) and its condition.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    pub finalizers: Option<Vec<String>>,
    pub owner: bool,
    pub host_found: Option<bool>,
}

/// The pure decision, from the DataImage and its host.
pub fn decide(di: &DataImage, host: Option<&BareMetalHost>) -> Changes {
    let mut c = Changes::default();
    let finalizers = di.finalizers().to_vec();
    let has_finalizer = finalizers.iter().any(|f| f == FINALIZER);
    let deleting = di.metadata.deletion_timestamp.is_some();
    let without = || {
        finalizers
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect()
    };
    let found = |di: &DataImage| {
        di.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == HOST_FOUND))
            .map(|c| c.status == "True")
    };
    let Some(host) = host else {
        if has_finalizer {
            c.finalizers = Some(without());
        }
        if !deleting && found(di) != Some(false) {
            c.host_found = Some(false);
        }
        return c;
    };
    if found(di) != Some(true) && !deleting {
        c.host_found = Some(true);
    }
    let detached = host.annotations().contains_key(ann::DETACHED);
    let attached = di
        .status
        .as_ref()
        .is_some_and(|s| s.attached_image.is_some());
    if deleting {
        if has_finalizer && (detached || !attached) {
            c.finalizers = Some(without());
        }
        return c;
    }
    if !has_finalizer {
        let mut f = finalizers.clone();
        f.push(FINALIZER.to_string());
        c.finalizers = Some(f);
    }
    let uid = host.metadata.uid.clone();
    c.owner = !di
        .owner_references()
        .iter()
        .any(|o| Some(&o.uid) == uid.as_ref());
    c
}

async fn reconcile(di: Arc<DataImage>, ctx: Arc<DataImageContext>) -> Result<Action, Error> {
    let ns = di.namespace().unwrap_or_default();
    let name = di.name_any();
    let host = ctx.hosts.get(&ObjectRef::new(&name).within(&ns));
    let changes = decide(&di, host.as_deref());
    let api: Api<DataImage> = Api::namespaced(ctx.client.clone(), &ns);
    if changes.finalizers.is_some() || changes.owner {
        let mut meta = serde_json::Map::new();
        if let Some(f) = &changes.finalizers {
            meta.insert("finalizers".into(), json!(f));
        }
        if let (true, Some(host)) = (changes.owner, host.as_deref()) {
            let mut owners = di.owner_references().to_vec();
            owners.extend(host.controller_owner_ref(&()).map(|mut o| {
                // metal3 sets the host as the owner, not as a controller that must delete it.
                o.controller = None;
                o.block_owner_deletion = None;
                o
            }));
            meta.insert("ownerReferences".into(), json!(owners));
        }
        if patch_metadata(&api, &di, meta).await?.is_none() {
            return Ok(Action::await_change());
        }
    }
    if let Some(found) = changes.host_found {
        let mut conds: Vec<Condition> = di
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let (status, reason, message) = if found {
            ("True", "HostFound", String::new())
        } else {
            (
                "False",
                "NoHost",
                format!(
                    "no BareMetalHost named {name} in namespace {ns}: nothing is attached until \
                     one exists"
                ),
            )
        };
        set_condition(
            &mut conds,
            HOST_FOUND,
            status,
            reason,
            &message,
            &conditions::now(),
            di.metadata.generation,
        );
        ignore_not_found(
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "conditions": conds } })),
            )
            .await,
        )?;
    }
    Ok(Action::await_change())
}

fn error_policy(_di: Arc<DataImage>, error: &Error, _ctx: Arc<DataImageContext>) -> Action {
    tracing::debug!(%error, "data image");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the DataImage controller until `shutdown` resolves; a change to a host wakes its
/// DataImage.
pub async fn run(
    ctx: Arc<DataImageContext>,
    hosts: Watched<BareMetalHost>,
    images: Watched<DataImage>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::for_shared_stream(applied(images.events), images.store)
        .watches_shared_stream(
            changed_or_gone(hosts.events, host_bmc::read_trigger),
            host_bmc::named_after,
        )
        .with_config(Config::default().concurrency(4))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::media::{AttachedImageReference, DataImageSpec, DataImageStatus};

    fn di(finalizer: bool, deleting: bool, attached: bool) -> DataImage {
        let mut d = DataImage::new(
            "h",
            DataImageSpec {
                url: "http://x/a.iso".into(),
            },
        );
        d.metadata.namespace = Some("ns".into());
        if finalizer {
            d.metadata.finalizers = Some(vec![FINALIZER.into()]);
        }
        if deleting {
            d.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-11-28T00:00:00Z".parse().unwrap(),
                ));
        }
        if attached {
            d.status = Some(DataImageStatus {
                attached_image: Some(AttachedImageReference {
                    url: "http://x/a.iso".into(),
                }),
                ..Default::default()
            });
        }
        d
    }

    fn host(detached: bool) -> BareMetalHost {
        let mut h = BareMetalHost::new("h", Default::default());
        h.metadata.namespace = Some("ns".into());
        h.metadata.uid = Some("u1".into());
        if detached {
            h.metadata.annotations = Some([(ann::DETACHED.to_string(), String::new())].into());
        }
        h
    }

    #[test]
    fn a_data_image_is_held_while_attached_and_let_go_after() {
        let h = host(false);
        let c = decide(&di(false, false, false), Some(&h));
        assert_eq!(c.finalizers, Some(vec![FINALIZER.to_string()]));
        assert!(c.owner);
        assert_eq!(c.host_found, Some(true));
        // Deleting while attached: held until the host detaches it.
        assert_eq!(decide(&di(true, true, true), Some(&h)).finalizers, None);
        assert_eq!(
            decide(&di(true, true, false), Some(&h)).finalizers,
            Some(vec![])
        );
        // A detached host is not touched: the DataImage goes at once.
        assert_eq!(
            decide(&di(true, true, true), Some(&host(true))).finalizers,
            Some(vec![])
        );
        // No host: let go, and said so.
        let c = decide(&di(true, false, false), None);
        assert_eq!(c.finalizers, Some(vec![]));
        assert_eq!(c.host_found, Some(false));
    }
}
