//! The PreprovisioningImage named after a host, as metal3's image-customization contract
//! has it. ferrometal writes the deploy agent's boot ISO itself, one per boot (the ramdisk with
//! that boot's configuration), so no image controller builds anything: the host controller
//! reports the boot's media in the object while the agent boots the host (the URL the BMC is
//! given, the format, the architecture and the network data Secret's version it carries) with
//! metal3's `Ready` and `Error` conditions, and says between boots that there are none.
//!
//! The object is the host's (controller reference and labels, as metal3 sets them), so it goes
//! with the host. It lives in the host's namespace, which tenants never read: whoever can read
//! it can fetch this boot's media, which is the trust already given to the host's BMC Secret.

use std::collections::HashMap;
use std::sync::Mutex;

use ferrometal_api::BareMetalHost;
use ferrometal_api::media::{
    ImageFormat, PreprovisioningImage, PreprovisioningImageSpec, PreprovisioningImageStatus,
    SecretStatus,
};
use ferrometal_provisioner::BootMedia;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};

use crate::conditions::set_condition;
use crate::error::ignore_not_found;
use crate::merge_patch::merge_diff;

pub const READY: &str = "Ready";
pub const ERROR: &str = "Error";
/// The architecture the deploy agent's ramdisk is built for.
const RAMDISK_ARCHITECTURE: &str = "x86_64";
const FIELD_MANAGER: &str = "ferrometal-controller";

/// What was last written per host, so a poll of an unchanged boot writes nothing. A host not
/// in it has not been recorded by this process.
#[derive(Default)]
pub struct Reported(Mutex<HashMap<String, Option<BootMedia>>>);

impl Reported {
    fn last(&self, key: &str) -> Option<Option<BootMedia>> {
        self.0.lock().unwrap().get(key).cloned()
    }

    fn set(&self, key: &str, media: Option<BootMedia>) {
        self.0.lock().unwrap().insert(key.to_string(), media);
    }

    /// The host is gone.
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap().remove(key);
    }
}

/// The status for `media` (`None`: no boot of the agent now), from the one stored.
pub fn decide_status(
    old: &PreprovisioningImageStatus,
    media: Option<&BootMedia>,
    network_data: Option<SecretStatus>,
    generation: Option<i64>,
    now: &str,
) -> PreprovisioningImageStatus {
    let mut status = old.clone();
    status.kernel_url.clear();
    status.extra_kernel_params.clear();
    status.architecture = RAMDISK_ARCHITECTURE.to_string();
    let (ready, reason, ready_message, error, error_message) = match media {
        Some(BootMedia::Ready(url)) => {
            status.image_url.clone_from(url);
            status.format = Some(ImageFormat::Iso);
            status.network_data = network_data;
            (
                "True",
                "ImageSuccess",
                String::new(),
                "False",
                String::new(),
            )
        }
        Some(BootMedia::Building) => {
            status.image_url.clear();
            (
                "False",
                "ImageSuccess",
                "building the deploy agent's boot ISO for this boot".to_string(),
                "False",
                String::new(),
            )
        }
        Some(BootMedia::Failed(why)) => {
            status.image_url.clear();
            (
                "False",
                "ImageBuildInvalid",
                String::new(),
                "True",
                why.clone(),
            )
        }
        None => {
            status.image_url.clear();
            status.format = None;
            status.network_data = None;
            (
                "False",
                "ImageSuccess",
                "the deploy agent is not booting this host: its boot ISO is written for each \
                 inspection, deploy or cleaning and removed when that ends"
                    .to_string(),
                "False",
                String::new(),
            )
        }
    };
    set_condition(
        &mut status.conditions,
        READY,
        ready,
        reason,
        &ready_message,
        now,
        generation,
    );
    set_condition(
        &mut status.conditions,
        ERROR,
        error,
        reason,
        &error_message,
        now,
        generation,
    );
    status
}

/// The object as metal3's host controller creates it, for this host.
fn desired(host: &BareMetalHost) -> PreprovisioningImage {
    let mut ppi = PreprovisioningImage::new(
        &host.name_any(),
        PreprovisioningImageSpec {
            network_data_name: host
                .spec
                .preprovisioning_network_data_name
                .clone()
                .unwrap_or_default(),
            architecture: host
                .spec
                .architecture
                .clone()
                .unwrap_or_else(|| RAMDISK_ARCHITECTURE.to_string()),
            accept_formats: vec![ImageFormat::Iso],
        },
    );
    ppi.metadata.namespace = host.namespace();
    ppi.metadata.labels = Some(host.labels().clone()).filter(|l| !l.is_empty());
    ppi.metadata.owner_references = host.controller_owner_ref(&()).map(|o| vec![o]);
    ppi
}

/// Records `media` for `host` in its PreprovisioningImage: created with the first boot media,
/// its status kept to what the agent's boot is. Nothing is written for an unchanged boot.
pub async fn record(
    client: &kube::Client,
    reported: &Reported,
    host: &BareMetalHost,
    key: &str,
    media: Option<BootMedia>,
    network_data: Option<SecretStatus>,
) -> Result<(), kube::Error> {
    let last = reported.last(key);
    if last.as_ref() == Some(&media) {
        return Ok(());
    }
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let api: Api<PreprovisioningImage> = Api::namespaced(client.clone(), &ns);
    // Created as metal3 creates it (a read, then a create); an existing one (made by hand
    // before, or for an older spec of the host) is brought to the host's spec. Between boots
    // an object is only updated, never created.
    let stored = match (ignore_not_found(api.get(&name).await)?, &media) {
        (None, None) => None,
        (None, Some(_)) => {
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..Default::default()
            };
            Some(api.create(&params, &desired(host)).await?)
        }
        (Some(_), Some(_)) => Some(
            api.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&desired(host)),
            )
            .await?,
        ),
        (Some(ppi), None) => Some(ppi),
    };
    if let Some(ppi) = stored {
        let old = ppi.status.clone().unwrap_or_default();
        let status = decide_status(
            &old,
            media.as_ref(),
            network_data,
            ppi.meta().generation,
            &crate::conditions::now(),
        );
        // A diff, so the fields the status omits when empty (the URL) are cleared.
        let diff = merge_diff(
            &serde_json::to_value(&ppi.status).unwrap_or_default(),
            &serde_json::to_value(&status).unwrap_or_default(),
        );
        if let Some(diff) = diff {
            ignore_not_found(
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({ "status": diff })),
                )
                .await,
            )?;
        }
    }
    reported.set(key, media);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition<'a>(s: &'a PreprovisioningImageStatus, t: &str) -> (&'a str, &'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (&c.status, &c.reason, &c.message)
    }

    #[test]
    fn each_boot_media_state_is_reported_as_metal3_reports_an_image() {
        let network = SecretStatus {
            name: "ramdisk-net".into(),
            version: "42".into(),
        };
        let ready = decide_status(
            &PreprovisioningImageStatus::default(),
            Some(&BootMedia::Ready("http://m/boot-1.iso".into())),
            Some(network.clone()),
            Some(1),
            "t0",
        );
        assert_eq!(ready.image_url, "http://m/boot-1.iso");
        assert_eq!(ready.format, Some(ImageFormat::Iso));
        assert_eq!(ready.network_data, Some(network));
        assert_eq!(ready.architecture, "x86_64");
        assert_eq!(condition(&ready, READY), ("True", "ImageSuccess", ""));
        assert_eq!(condition(&ready, ERROR).0, "False");

        let ended = decide_status(&ready, None, None, Some(1), "t1");
        assert!(ended.image_url.is_empty());
        assert_eq!(ended.format, None);
        assert_eq!(ended.network_data, None);
        let (st, _, why) = condition(&ended, READY);
        assert_eq!(st, "False");
        assert!(why.contains("not booting"), "{why}");

        let failed = decide_status(
            &ready,
            Some(&BootMedia::Failed("xorriso: no space left".into())),
            None,
            Some(1),
            "t2",
        );
        assert!(failed.image_url.is_empty());
        assert_eq!(
            condition(&failed, ERROR),
            ("True", "ImageBuildInvalid", "xorriso: no space left")
        );
        assert_eq!(condition(&failed, READY).0, "False");

        let building = decide_status(&failed, Some(&BootMedia::Building), None, Some(1), "t3");
        assert!(building.image_url.is_empty());
        assert_eq!(condition(&building, READY).0, "False");
        assert_eq!(condition(&building, ERROR).0, "False");
    }
}
