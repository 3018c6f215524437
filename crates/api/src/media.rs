//! metal3's image kinds (metal3.io/v1alpha1), field for field with baremetal-operator:
//! `DataImage` (an ISO attached to a provisioned host as virtual media) and
//! `PreprovisioningImage` (the per-host agent boot image of metal3's image-customization
//! contract).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::Condition;

/// An ISO to attach to the host of the same name as virtual media, at its next reboot.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "DataImage",
    plural = "dataimages",
    category = "metal3",
    namespaced,
    status = "DataImageStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct DataImageSpec {
    #[schemars(length(max = 4096))]
    pub url: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataImageStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_reconciled: Option<String>,
    /// The image attached now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_image: Option<AttachedImageReference>,
    /// Failed attach or detach attempts and the last one's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<DataImageError>,
    /// ferrometal's conditions (an addition to metal3's status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AttachedImageReference {
    pub url: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataImageError {
    pub count: i64,
    pub message: String,
}

/// The agent image of the host of the same name, built for its network data and architecture.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "PreprovisioningImage",
    plural = "preprovisioningimages",
    shortname = "ppimg",
    category = "metal3",
    namespaced,
    status = "PreprovisioningImageStatus",
    printcolumn = r#"{"name":"Ready","type":"string","description":"Whether the image is ready","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","description":"The reason for the image readiness status","jsonPath":".status.conditions[?(@.type=='Ready')].reason"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PreprovisioningImageSpec {
    /// A Secret in this namespace holding the network data to build into the image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub network_data_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64))]
    pub architecture: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub accept_formats: Vec<ImageFormat>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    Iso,
    Initrd,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreprovisioningImageStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub extra_kernel_params: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<ImageFormat>,
    /// The version of the network-data Secret the image was built with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<SecretStatus>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub architecture: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}
