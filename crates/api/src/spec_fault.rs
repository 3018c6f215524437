//! Which field of a BareMetalHost's spec its current error is about, when the spec as written is
//! the cause (an image format the provisioner cannot deploy, a data Secret without its key...),
//! as opposed to the BMC, the network, the credentials or the provisioner failing.
//!
//! The host controller records it in the host's [`CONDITION`] (reason: [`SpecFault::reason`],
//! message: the `errorMessage` it classifies, so a stale condition never classifies a newer
//! error). A HostClaim's controller reads it to tell the tenant, whose spec the host was given,
//! the cause in the claim's own terms; it tells the tenant nothing of any other error, and never
//! passes the host's own message on (it can name the BMC or the host's Secrets).

/// Condition on a BareMetalHost: True while `errorMessage` is caused by the spec as written.
pub const CONDITION: &str = "ferrometal.io/SpecError";

/// A data Secret field of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataField {
    UserData,
    NetworkData,
    MetaData,
}

impl DataField {
    pub const ALL: [DataField; 3] = [
        DataField::UserData,
        DataField::NetworkData,
        DataField::MetaData,
    ];

    /// The field's name in the spec (the host's and the claim's alike).
    pub fn field(self) -> &'static str {
        match self {
            DataField::UserData => "userData",
            DataField::NetworkData => "networkData",
            DataField::MetaData => "metaData",
        }
    }

    /// From the field's name in the spec.
    pub fn from_field(field: &str) -> Option<DataField> {
        DataField::ALL.into_iter().find(|f| f.field() == field)
    }
}

/// What in the spec an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecFault {
    /// `spec.image.url` is empty.
    ImageUrlEmpty,
    /// The BMC refused `spec.image.url` as virtual media (a client error answering the insert).
    ImageUrlRefused,
    /// The provisioner cannot deploy an image of `spec.image.format` (the redfish provisioner
    /// boots live-iso images only; the ironic provisioner writes disk images only with an
    /// agent ramdisk configured).
    ImageFormatNotSupported,
    /// `spec.image.checksum` is empty for an image that needs one.
    ImageChecksumMissing,
    /// The provisioner cannot run `spec.customDeploy`.
    CustomDeployNotSupported,
    /// The Secret a data field names does not exist.
    DataSecretMissing(DataField),
    /// The Secret a data field names has neither that field's key nor `value`.
    DataSecretKeyMissing(DataField),
    /// Provisioning `spec.image` failed as often as allowed; it is tried again once it changes.
    RetryLimitReached,
}

impl SpecFault {
    pub const ALL: [SpecFault; 12] = [
        SpecFault::ImageUrlEmpty,
        SpecFault::ImageUrlRefused,
        SpecFault::ImageFormatNotSupported,
        SpecFault::ImageChecksumMissing,
        SpecFault::CustomDeployNotSupported,
        SpecFault::DataSecretMissing(DataField::UserData),
        SpecFault::DataSecretMissing(DataField::NetworkData),
        SpecFault::DataSecretMissing(DataField::MetaData),
        SpecFault::DataSecretKeyMissing(DataField::UserData),
        SpecFault::DataSecretKeyMissing(DataField::NetworkData),
        SpecFault::DataSecretKeyMissing(DataField::MetaData),
        SpecFault::RetryLimitReached,
    ];

    /// The condition reason (CamelCase, as Kubernetes reasons are).
    pub fn reason(self) -> &'static str {
        use DataField as D;
        match self {
            SpecFault::ImageUrlEmpty => "ImageURLEmpty",
            SpecFault::ImageUrlRefused => "ImageURLRefused",
            SpecFault::ImageFormatNotSupported => "ImageFormatNotSupported",
            SpecFault::ImageChecksumMissing => "ImageChecksumMissing",
            SpecFault::CustomDeployNotSupported => "CustomDeployNotSupported",
            SpecFault::DataSecretMissing(D::UserData) => "UserDataSecretMissing",
            SpecFault::DataSecretMissing(D::NetworkData) => "NetworkDataSecretMissing",
            SpecFault::DataSecretMissing(D::MetaData) => "MetaDataSecretMissing",
            SpecFault::DataSecretKeyMissing(D::UserData) => "UserDataSecretKeyMissing",
            SpecFault::DataSecretKeyMissing(D::NetworkData) => "NetworkDataSecretKeyMissing",
            SpecFault::DataSecretKeyMissing(D::MetaData) => "MetaDataSecretKeyMissing",
            SpecFault::RetryLimitReached => "ProvisioningRetryLimitReached",
        }
    }

    pub fn from_reason(reason: &str) -> Option<SpecFault> {
        SpecFault::ALL.into_iter().find(|f| f.reason() == reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_distinct_and_read_back() {
        let mut seen = std::collections::BTreeSet::new();
        for f in SpecFault::ALL {
            assert!(seen.insert(f.reason()), "{f:?}");
            assert_eq!(SpecFault::from_reason(f.reason()), Some(f));
        }
        assert_eq!(SpecFault::from_reason("NotSupported"), None);
        for d in DataField::ALL {
            assert_eq!(DataField::from_field(d.field()), Some(d));
        }
    }
}
