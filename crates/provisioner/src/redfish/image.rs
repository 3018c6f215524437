//! Which deployments the redfish backend can do without the deploy agent: live-iso images,
//! booted from Redfish virtual media.

use ferrometal_api::ImageFormat;
use ferrometal_api::spec_fault::SpecFault;
use ferrometal_bmc::{BmcError, Protocol};

use super::provisioner::unsupported;
use crate::{Deployment, ErrorKind, HostInfo, ProvisionerError, Result};

/// Checks that the redfish backend can deploy this, and returns the image URL to boot.
pub fn live_iso_url<'a>(host: &HostInfo, deployment: &'a Deployment) -> Result<&'a str> {
    let Some(image) = &deployment.image else {
        return Err(match &deployment.custom_deploy {
            Some(custom) => unsupported(format!(
                "custom deploy method {:?} needs the ironic provisioner; the redfish provisioner boots live-iso images only",
                custom.method
            ))
            .in_spec(SpecFault::CustomDeployNotSupported),
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
        let how = match image.format {
            Some(ImageFormat::Vdi | ImageFormat::Vmdk) => {
                "needs converting to raw or qcow2 for the deploy agent (serve --agent-ramdisk), or the ironic provisioner"
            }
            _ => "needs the deploy agent (serve --agent-ramdisk) or the ironic provisioner",
        };
        return Err(unsupported(format!(
            "image format {format} {how}; without them the redfish provisioner boots live-iso images only"
        ))
        .in_spec(SpecFault::ImageFormatNotSupported));
    }
    if image.url.trim().is_empty() {
        return Err(
            ProvisionerError::new(ErrorKind::InvalidInput, "image.url is empty")
                .in_spec(SpecFault::ImageUrlEmpty),
        );
    }
    Ok(&image.url)
}

/// A failed virtual media insert. A client error in answer (400, 422: Redfish's
/// `ActionParameterValueFormatError` and kin) is the BMC refusing the image URL itself. A 500 or
/// 502 is what BMCs (and sushy-tools) answer when the image server fails them: a failed attempt
/// of this image, counted towards the retry limit rather than retried forever as a busy BMC,
/// though it cannot be told from the BMC's own fault (so it stays the infrastructure's to read).
/// Anything else (unreachable, 503, 409, 429, 401, 404 on the action) is the BMC's or the
/// network's.
pub(super) fn insert_error(e: BmcError) -> ProvisionerError {
    let status = match &e {
        BmcError::Http { status, .. } => Some(*status),
        _ => None,
    };
    let mut err = ProvisionerError::from(e);
    match status {
        Some(400 | 422) => err.in_spec(SpecFault::ImageUrlRefused),
        Some(500 | 502) => {
            err.kind = ErrorKind::Failed;
            err
        }
        _ => err,
    }
}
