//! Virtual media through Ironic, as metal3 attaches a DataImage: `POST /v1/nodes/{node}/vmedia`
//! with the ISO as a CD (API 1.89), `DELETE` with `device_types=cdrom`, and `GET` for what the
//! BMC shows (API 1.93). Only these requests use the newer API version, so an older Ironic
//! still serves everything else; on one without them, virtual media is refused with the reason.
//!
//! Ironic attaches and detaches in the background: the request returns at once, and a failure
//! lands in the node's `last_error` ("Could not attach device ..."). So each call reads first
//! and acts at most once: what the BMC shows is done; a request still on its way is waited for;
//! a failure after our request is the error.
//!
//! Ironic fetches the image and publishes it on its own web server (its `http_url`, metal3's
//! httpd), so the BMC shows Ironic's copy, named after the node, not the URL asked for (the
//! API's `image_download_source: http` is not passed on by Ironic's conductor API). A CD
//! inserted after our attach request is therefore ours; one inserted before, whose image is
//! not the URL, is taken out first.

use ferrometal_bmc::{MediaStatus, Protocol};
use reqwest::Method;
use serde_json::{Value, json};

use super::client::ApiError;
use super::errors::{Context, Fail, Inner};
use super::node::last_error;
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, HostInfo, ProvisionerError, Step};

/// Ironic's API version that reads virtual media back (and attaches and detaches it, 1.89).
const VMEDIA_API_VERSION: &str = "1.93";

/// Devices Ironic lists are bounded, as everything a peer sends.
const MAX_DEVICES: usize = 16;

/// The CD (or DVD) drive among the devices Ironic lists: inserted and with which image.
fn cd_of(devices: &Value) -> MediaStatus {
    let cd = devices
        .as_array()
        .into_iter()
        .flatten()
        .take(MAX_DEVICES)
        .find(|d| {
            d["media_types"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "CD" || t == "DVD"))
        });
    match cd {
        Some(d) => MediaStatus {
            inserted: d["inserted"].as_bool().unwrap_or(false),
            image: d["image"]
                .as_str()
                .filter(|i| !i.is_empty())
                .map(String::from),
        },
        None => MediaStatus::default(),
    }
}

/// An error Ironic recorded for an attach or detach.
fn vmedia_error(node: &Value) -> Option<String> {
    last_error(node).filter(|e| e.contains("attach device") || e.contains("detach device"))
}

impl IronicProvisioner {
    fn vmedia_refused(&self, host: &HostInfo, why: &str) -> Fail {
        ProvisionerError::new(
            ErrorKind::Unsupported,
            format!("host {}: virtual media through Ironic: {why}", host.key),
        )
        .into()
    }

    /// What the node's CD drive holds, as Ironic reads it from the BMC.
    pub(super) async fn do_media_state(&self, host: &HostInfo) -> Inner<MediaStatus> {
        if host.bmc.protocol() != Protocol::Redfish {
            return Err(self.vmedia_refused(host, "its IPMI BMC has no virtual media"));
        }
        let path = format!("{}/vmedia", Self::path(host));
        match self
            .client
            .call_at(VMEDIA_API_VERSION, Method::GET, &path, None)
            .await
        {
            Ok(devices) => Ok(cd_of(&devices.unwrap_or_default())),
            Err(ApiError::NotFound) if self.get_node(host).await?.is_some() => Err(self
                .vmedia_refused(
                    host,
                    "this Ironic does not read virtual media back (API 1.93, Ironic 2025.1)",
                )),
            Err(e) => Err(Fail::Api(
                e,
                format!("reading virtual media of node {}", host.key),
            )),
        }
    }

    /// Asks Ironic to put `url` in the node's CD drive, or (`None`) to empty it.
    pub(super) async fn do_virtual_media(&self, host: &HostInfo, url: Option<&str>) -> Inner<()> {
        if host.bmc.protocol() != Protocol::Redfish {
            return Err(self.vmedia_refused(host, "its IPMI BMC has no virtual media"));
        }
        let path = format!("{}/vmedia", Self::path(host));
        let (method, path, body) = match url {
            Some(url) => (
                Method::POST,
                path,
                Some(json!({"device_type": "cdrom", "image_url": url})),
            ),
            None => (Method::DELETE, format!("{path}?device_types=cdrom"), None),
        };
        self.client
            .call_at(VMEDIA_API_VERSION, method, &path, body.as_ref())
            .await
            .ctx(|| {
                format!(
                    "{} virtual media of node {}",
                    if url.is_some() {
                        "attaching"
                    } else {
                        "detaching"
                    },
                    host.key
                )
            })?;
        Ok(())
    }

    /// metal3's DataImage: `url` in the CD drive (`None`: nothing), one request per call, the
    /// BMC's own view read first.
    pub(super) async fn do_data_image(&self, host: &HostInfo, url: Option<&str>) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        let media = self.do_media_state(host).await?;
        let wanted = url.map(String::from);
        let shown = match (&wanted, media.inserted) {
            (None, false) => true,
            (Some(url), true) => {
                media.image.as_ref() == Some(url) || memo.vmedia_asked.as_ref() == Some(&wanted)
            }
            _ => false,
        };
        if shown {
            return Ok(Step::Done(()));
        }
        if let Some(asked) = &memo.vmedia_asked
            && (*asked == wanted || (asked.is_none() && media.inserted))
        {
            // Ours (or the ejection before it) is on its way, unless Ironic recorded its
            // failure (it cleared `last_error` when it took the request).
            return match vmedia_error(&node) {
                Some(why) => {
                    memo.vmedia_asked = None;
                    Err(ProvisionerError::new(ErrorKind::Failed, format!("Ironic: {why}")).into())
                }
                None => self.wait("Ironic changes the virtual media"),
            };
        }
        if media.inserted {
            // Another image (or one no longer wanted) first out, as the redfish provisioner does.
            self.do_virtual_media(host, None).await?;
            memo.vmedia_asked = Some(None);
            return self.wait("Ironic ejects the virtual media");
        }
        self.do_virtual_media(host, url).await?;
        memo.vmedia_asked = Some(wanted);
        self.wait("Ironic attaches the DataImage")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cd_drive_is_read_as_ironic_lists_it() {
        let devices = json!([
            {"media_types": ["Floppy", "USBStick"], "inserted": true, "image": "http://x/f.img"},
            {"media_types": ["CD", "DVD"], "inserted": true, "image": "http://x/config.iso"},
        ]);
        assert_eq!(
            cd_of(&devices),
            MediaStatus {
                inserted: true,
                image: Some("http://x/config.iso".into())
            }
        );
        let empty = json!([{"media_types": ["CD"], "inserted": false, "image": ""}]);
        assert_eq!(cd_of(&empty), MediaStatus::default());
        assert_eq!(cd_of(&json!({"not": "a list"})), MediaStatus::default());
    }

    #[test]
    fn only_attach_and_detach_failures_count() {
        let failed = json!({"last_error": "Could not attach device cdrom to node n: 404"});
        assert!(vmedia_error(&failed).is_some());
        let other = json!({"last_error": "Failed to change power state"});
        assert!(vmedia_error(&other).is_none());
    }
}
