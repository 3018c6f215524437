//! What a claim's tenant is told of its host's error. An error the host controller marked as
//! caused by the spec the claim passed on (its image, custom deploy or a data Secret it named)
//! is told in the claim's own terms; any other error only as "the host reports an error".
//!
//! The tenant's text is built from the claim's spec and the host's classification
//! ([`spec_fault`]) alone, never from the host's `errorMessage`: that message is for the
//! infrastructure team and can name the BMC's address and answers, the host's namespace and
//! the host-side copies of the data Secrets.

use ferrometal_api::claim::conditions as c;
use ferrometal_api::spec_fault::{DataField, SpecFault};
use ferrometal_api::{BareMetalHost, Condition, HostClaim, Image, ImageFormat};

use crate::conditions::{new as condition, spec_fault};

/// The claim's image as it is passed on to the host: registry credentials never reach it.
pub fn passed_on_image(claim: &HostClaim) -> Option<Image> {
    claim.spec.image.clone().map(|mut i| {
        i.oci_auth_secret_name = None;
        i
    })
}

/// The claim's Provisioned condition for a host in error.
pub fn provisioned_on_error(claim: &HostClaim, host: &BareMetalHost) -> Condition {
    let status = host.status.clone().unwrap_or_default();
    let generic = || {
        let kind = status.error_type.map_or("error", |t| t.as_str());
        condition(
            c::PROVISIONED,
            false,
            "HostError",
            format!("the host reports a {kind} (the infrastructure team is told)"),
        )
    };
    // An error about a spec the host no longer has (the claim changed, the host has not
    // acted on it yet) is not the claim's.
    let in_step = host.spec.image == passed_on_image(claim)
        && host.spec.custom_deploy == claim.spec.custom_deploy;
    if !in_step {
        return generic();
    }
    match spec_fault(&status).and_then(|f| Some((f, tell(claim, f, &status)?))) {
        Some((fault, message)) => condition(c::PROVISIONED, false, fault.reason(), message),
        None => generic(),
    }
}

/// The fault in the claim's terms; `None` when the claim has nothing it could be about.
fn tell(
    claim: &HostClaim,
    fault: SpecFault,
    status: &ferrometal_api::BareMetalHostStatus,
) -> Option<String> {
    let image = claim.spec.image.as_ref();
    Some(match fault {
        SpecFault::ImageFormatNotSupported => format!(
            "spec.image.format {} cannot be deployed on this host, which boots live-iso images only: give a live-iso image (spec.image.format: live-iso)",
            format_name(image?)
        ),
        SpecFault::CustomDeployNotSupported => format!(
            "spec.customDeploy.method {:?} cannot be run on this host, which boots live-iso images only: give a live-iso image in spec.image instead",
            claim.spec.custom_deploy.as_ref()?.method
        ),
        SpecFault::ImageUrlEmpty => {
            image?;
            "spec.image.url is empty".to_string()
        }
        SpecFault::ImageUrlRefused => format!(
            "the host refused spec.image.url {:?}: it must be an http(s) URL of a live ISO that the host can fetch",
            image?.url
        ),
        SpecFault::ImageChecksumMissing => format!(
            "spec.image.checksum is empty: a {} image needs one (only live-iso images may omit it)",
            format_name(image?)
        ),
        SpecFault::DataSecretMissing(field) => format!(
            "spec.{}: the host did not find its copy of Secret {:?}; it is copied again",
            field.field(),
            data_secret(claim, field)?
        ),
        SpecFault::DataSecretKeyMissing(field) => format!(
            "spec.{0}: Secret {1:?} has no {0:?} or \"value\" key",
            field.field(),
            data_secret(claim, field)?
        ),
        SpecFault::RetryLimitReached => {
            image?;
            format!(
                "provisioning spec.image failed {} times, the most allowed; change spec.image to try again (the infrastructure team is told)",
                status.provisioning_fail_count
            )
        }
    })
}

/// The name of the Secret the claim itself gave for a data field (the host has a copy under
/// another name, in another namespace; neither is the tenant's to know).
fn data_secret(claim: &HostClaim, field: DataField) -> Option<&str> {
    let r = match field {
        DataField::UserData => claim.spec.user_data.as_ref(),
        DataField::NetworkData => claim.spec.network_data.as_ref(),
        DataField::MetaData => claim.spec.meta_data.as_ref(),
    }?;
    r.name.as_deref().filter(|n| !n.is_empty())
}

fn format_name(image: &Image) -> &'static str {
    match image.format {
        Some(ImageFormat::Raw) => "raw",
        Some(ImageFormat::Qcow2) => "qcow2",
        Some(ImageFormat::Vdi) => "vdi",
        Some(ImageFormat::Vmdk) => "vmdk",
        Some(ImageFormat::LiveIso) => "live-iso",
        None => "(unset)",
    }
}
