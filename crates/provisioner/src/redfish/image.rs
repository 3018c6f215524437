//! Which deployments the redfish backend can do: live-iso images, booted from Redfish virtual
//! media.

use ferrometal_api::ImageFormat;
use ferrometal_bmc::Protocol;

use super::provisioner::unsupported;
use crate::{Deployment, ErrorKind, HostInfo, ProvisionerError, Result};

/// Checks that the redfish backend can deploy this, and returns the image URL to boot.
pub fn live_iso_url<'a>(host: &HostInfo, deployment: &'a Deployment) -> Result<&'a str> {
    let Some(image) = &deployment.image else {
        return Err(match &deployment.custom_deploy {
            Some(custom) => unsupported(format!(
                "custom deploy method {:?} needs the ironic provisioner; the redfish provisioner boots live-iso images only",
                custom.method
            )),
            None => ProvisionerError::new(ErrorKind::InvalidInput, "no image to provision"),
        });
    };
    if host.bmc.protocol() == Protocol::Ipmi {
        return Err(unsupported(format!(
            "BMC {} speaks IPMI, which has no virtual media: image provisioning needs a Redfish BMC or the ironic provisioner",
            host.bmc.authority()
        )));
    }
    if !image.is_live_iso() {
        let format = match image.format {
            Some(ImageFormat::Raw) => "raw",
            Some(ImageFormat::Qcow2) => "qcow2",
            Some(ImageFormat::Vdi) => "vdi",
            Some(ImageFormat::Vmdk) => "vmdk",
            Some(ImageFormat::LiveIso) => "live-iso",
            None => "(unset)",
        };
        return Err(unsupported(format!(
            "image format {format} needs the ironic provisioner; the redfish provisioner boots live-iso images only"
        )));
    }
    if image.url.trim().is_empty() {
        return Err(ProvisionerError::new(
            ErrorKind::InvalidInput,
            "image.url is empty",
        ));
    }
    Ok(&image.url)
}
