//! metal3's `BMCEventSubscription` (metal3.io/v1alpha1), field for field with
//! baremetal-operator: a Redfish EventService subscription on a host's BMC.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::Condition;

/// Sends the BMC's events for `hostName` to `destination`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "BMCEventSubscription",
    plural = "bmceventsubscriptions",
    shortname = "bes",
    shortname = "bmcevent",
    category = "metal3",
    namespaced,
    status = "BMCEventSubscriptionStatus",
    printcolumn = r#"{"name":"Error","type":"string","description":"The most recent error message","jsonPath":".status.error"}"#,
    printcolumn = r#"{"name":"Age","type":"date","description":"Time duration since creation of BMCEventSubscription","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BMCEventSubscriptionSpec {
    /// The BareMetalHost, in this namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub host_name: String,
    /// The webhook URL the BMC posts events to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub destination: String,
    /// Passed with every event, as the subscriber chose.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub context: String,
    /// A Secret whose keys and values are sent as HTTP headers with each event.
    #[serde(
        default,
        rename = "httpHeadersRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_headers_ref: Option<SecretReference>,
}

/// `corev1.SecretReference`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct SecretReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63))]
    pub namespace: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BMCEventSubscriptionStatus {
    #[serde(
        default,
        rename = "subscriptionID",
        skip_serializing_if = "String::is_empty"
    )]
    pub subscription_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// ferrometal's conditions (an addition to metal3's status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
