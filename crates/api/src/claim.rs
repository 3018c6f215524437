//! `HostClaim` and `HostDeployPolicy` (metal3.io/v1alpha1), wire-compatible with metal3's types.
//!
//! A HostClaim lives in a tenant's namespace and asks for one BareMetalHost by selector; the
//! host's BMC, credentials and namespace stay out of the tenant's reach. A HostDeployPolicy in a
//! hosts' namespace says which tenant namespaces may claim hosts there: no policy, no lending.

use k8s_openapi::api::core::v1::{ObjectReference as CoreObjectReference, SecretReference};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::{Condition, CustomDeploy, Image};

/// Finalizer the claim controller holds until the host is released.
pub const HOSTCLAIM_FINALIZER: &str = "metal3.io/hostclaim";
/// Label preferred by `failureDomain` (Cluster API's).
pub const FAILURE_DOMAIN_LABEL: &str = "infrastructure.cluster.x-k8s.io/failure-domain";
/// `consumerRef.kind` of a host bound to a claim.
pub const HOSTCLAIM_KIND: &str = "HostClaim";
pub const HOSTCLAIM_API_VERSION: &str = "metal3.io/v1alpha1";

/// On a HostClaim: the name of a Secret in the claim's namespace holding a kubeconfig (key
/// `kubeconfig`, or `value` as Cluster API names it) for another cluster whose hosts serve the
/// claim. The claim is then mirrored there under the same name, in the kubeconfig context's
/// namespace, and never bound to a host of this cluster.
pub const REMOTE_KUBECONFIG: &str = "ferrometal.io/remote-kubeconfig";
/// The keys a remote kubeconfig Secret may hold it under, in order of preference.
pub const REMOTE_KUBECONFIG_KEYS: [&str; 2] = ["kubeconfig", "value"];
/// On a remote claim and its mirror: the identity they share (the first claim's uid). A
/// mirror with another id is somebody else's and is never touched; `ferrometal move` carries
/// the id along, so the claim at the target adopts the mirror.
pub const REMOTE_ID: &str = "hostclaim.ferrometal.io/remote-id";
/// On a mirror: the claim's uid/resourceVersion whose one-shot annotations were passed on, so
/// a crash between passing and removing them never passes them twice.
pub const REMOTE_FORWARDED: &str = "hostclaim.ferrometal.io/remote-forwarded";
/// On a mirror: the keyed reboot annotations mirrored from the claim (comma-separated).
pub const REMOTE_REBOOT_KEYS: &str = "hostclaim.ferrometal.io/remote-reboot-keys";
/// Label on mirrors and on their data Secrets in the remote cluster: the claim's name.
pub const REMOTE_MIRROR_LABEL: &str = "hostclaim.ferrometal.io/mirror-of";

/// Whether the claim is served by another cluster's hosts (see [`REMOTE_KUBECONFIG`]).
pub fn is_remote(claim: &HostClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(REMOTE_KUBECONFIG))
}

/// Condition types and reasons, spelled as metal3 spells them.
pub mod conditions {
    pub const ASSOCIATED: &str = "Associated";
    pub const SYNCHRONIZED: &str = "Synchronized";
    pub const PROVISIONED: &str = "Provisioned";
    pub const READY: &str = "Ready";

    pub const BARE_METAL_HOST_ASSOCIATED: &str = "BareMetalHostAssociated";
    pub const MISSING_BARE_METAL_HOST: &str = "MissingBareMetalHost";
    pub const NO_BARE_METAL_HOST: &str = "NoBareMetalHost";
    pub const HOST_PAUSED: &str = "HostPaused";
    pub const HOST_CLAIM_DELETING: &str = "HostClaimDeleting";
    pub const HOST_CLAIM_DELETION_FAILED: &str = "HostClaimDeletionFailed";
    pub const PAUSE_ANNOTATION_SET_FAILED: &str = "PauseAnnotationSetFailed";
    /// The host's firmware is being changed across a reboot (metal3's servicing).
    pub const SERVICING: &str = "Servicing";

    pub const CONFIGURATION_SYNCED: &str = "ConfigurationSynced";
    pub const USER_DATA_SYNC_FAILURE: &str = "UserDataSecretSyncFailure";
    pub const META_DATA_SYNC_FAILURE: &str = "MetaDataSecretSyncFailure";
    pub const NETWORK_DATA_SYNC_FAILURE: &str = "NetworkDataSecretSyncFailure";
    pub const BARE_METAL_HOST_NOT_SYNCHRONIZED: &str = "BareMetalHostNotSynchronized";

    /// Remote claims: why the mirror in the other cluster is not in step.
    pub const REMOTE_UNREACHABLE: &str = "RemoteClusterUnreachable";
    pub const REMOTE_KUBECONFIG_INVALID: &str = "RemoteKubeconfigInvalid";
    pub const REMOTE_REFUSED: &str = "RemoteClusterRefused";
    pub const REMOTE_CLAIM_CONFLICT: &str = "RemoteClaimConflict";

    /// Claims of a HostClass whose provider is not bare metal (see `host_class`).
    pub const VIRTUAL_MACHINE_ASSOCIATED: &str = "VirtualMachineAssociated";
    pub const HOST_CLASS_NOT_FOUND: &str = "HostClassNotFound";
    pub const HOST_CLASS_NOT_ALLOWED: &str = "HostClassNotAllowed";
    pub const HOST_CLASS_INVALID: &str = "HostClassInvalid";
    pub const HYPERVISOR_UNREACHABLE: &str = "HypervisorUnreachable";
    pub const INVALID_REQUEST: &str = "InvalidRequest";
    pub const NO_IMAGE: &str = "NoImage";
    pub const PROVISIONING: &str = "Provisioning";
    pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    pub const DEPROVISIONING: &str = "Deprovisioning";
    pub const VIRTUAL_MACHINE_PROVISIONED: &str = "VirtualMachineProvisioned";
}

/// A workload asking for one bare-metal server.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HostClaim",
    plural = "hostclaims",
    shortname = "hc",
    category = "metal3",
    namespaced,
    status = "HostClaimStatus",
    printcolumn = r#"{"name":"Associated","type":"string","jsonPath":".status.conditions[?(@.type==\"Associated\")].status","description":"Whether a host is bound to the claim"}"#,
    printcolumn = r#"{"name":"Provisioned","type":"string","jsonPath":".status.conditions[?(@.type==\"Provisioned\")].status","description":"Whether the image is deployed"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Powered","type":"boolean","jsonPath":".status.poweredOn","description":"Observed power of the host"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Associated\")].reason","priority":1}"#,
    printcolumn = r#"{"name":"Host","type":"string","jsonPath":".status.bareMetalHost.name","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HostClaimSpec {
    /// Whether the host should be powered on.
    #[serde(default)]
    pub powered_on: bool,
    /// The image to deploy; setting it starts provisioning, removing it deprovisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    /// Secret (in the claim's namespace) with the user data for the first boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub user_data: Option<SecretReference>,
    /// Secret (in the claim's namespace) with network configuration for the first boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub network_data: Option<SecretReference>,
    /// Secret (in the claim's namespace) with metadata for the config drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub meta_data: Option<SecretReference>,
    /// A deploy step of a site-specific ramdisk instead of an image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_deploy: Option<CustomDeploy>,
    /// Which hosts may serve the claim.
    #[serde(default)]
    pub host_selector: HostSelector,
    /// Who uses the claim (e.g. a Cluster API machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub consumer_ref: Option<CoreObjectReference>,
    /// Prefer hosts labelled `infrastructure.cluster.x-k8s.io/failure-domain=<value>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure_domain: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostSelector {
    /// Labels a chosen host must carry with these values.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub match_labels: std::collections::BTreeMap<String, String>,
    /// Label expressions that must hold on a chosen host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub match_expressions: Vec<HostSelectorRequirement>,
    /// The one namespace to choose from; empty: every namespace whose policy admits the claim.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub in_namespace: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HostSelectorRequirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist` (any case), or `=`, `==`, `!=`, `gt`, `lt`.
    pub operator: String,
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub values: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostClaimStatus {
    /// When this status was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The host serving the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bare_metal_host: Option<NamespacedRef>,
    /// The copy of the host's inspection data in the claim's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_data: Option<NamespacedRef>,
    /// The observed power of the host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub powered_on: bool,
}

/// metal3's `ObjectReference` of HostClaim status: a namespace and a name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct NamespacedRef {
    pub namespace: String,
    pub name: String,
}

impl HostClaimStatus {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    pub fn is_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }
}

/// Which tenant namespaces may claim the hosts of the policy's namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "HostDeployPolicy",
    plural = "hostdeploypolicies",
    shortname = "hdp",
    category = "metal3",
    namespaced,
    status = "HostDeployPolicyStatus",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HostDeployPolicySpec {
    /// Constraints on the claims' namespaces; a policy without them admits nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_claim_namespaces: Option<HostClaimNamespaces>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostClaimNamespaces {
    /// The namespaces admitted by name (when set, the claim's namespace must be one of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub names: Option<Vec<String>>,
    /// A regular expression the claim's namespace must match (unanchored, as metal3: "prod"
    /// matches "reproduce"; write "^prod$" for exactly "prod").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub name_matches: String,
    /// Labels the claim's namespace must carry (with the value, when one is given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub has_labels: Vec<NameValuePair>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NameValuePair {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HostDeployPolicyStatus {}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn claim_round_trips_metal3_yaml() {
        let yaml = r#"
apiVersion: metal3.io/v1alpha1
kind: HostClaim
metadata: {name: web-0, namespace: tenant-a}
spec:
  poweredOn: true
  hostSelector:
    matchLabels: {infra-kind: medium}
    matchExpressions: [{key: rack, operator: In, values: [r1, r2]}]
    inNamespace: infra
  image: {url: "http://images/os.iso", format: live-iso}
  userData: {name: web-0-ud, namespace: tenant-a}
  failureDomain: rack-1
status:
  bareMetalHost: {namespace: infra, name: bm-3}
  hardwareData: {namespace: tenant-a, name: web-0}
  poweredOn: true
  conditions:
  - {type: Associated, status: "True", reason: BareMetalHostAssociated, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;
        let claim: HostClaim = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(claim.spec.host_selector.in_namespace, "infra");
        assert_eq!(claim.spec.failure_domain, "rack-1");
        let status = claim.status.as_ref().unwrap();
        assert!(status.is_true(conditions::ASSOCIATED));
        let json = serde_json::to_value(&claim).unwrap();
        assert_eq!(json["spec"]["poweredOn"], true);
        assert_eq!(
            json["spec"]["hostSelector"]["matchLabels"]["infra-kind"],
            "medium"
        );
        assert_eq!(json["status"]["bareMetalHost"]["name"], "bm-3");
        let again: HostClaim = serde_json::from_value(json).unwrap();
        assert_eq!(again.spec, claim.spec);
        assert_eq!(again.status, claim.status);

        let policy: HostDeployPolicy = serde_yaml::from_str(
            r#"
apiVersion: metal3.io/v1alpha1
kind: HostDeployPolicy
metadata: {name: policy, namespace: infra}
spec:
  hostClaimNamespaces: {names: [tenant-a], nameMatches: "^team-", hasLabels: [{name: tier, value: gold}, {name: x}]}
"#,
        )
        .unwrap();
        let ns = policy.spec.host_claim_namespaces.unwrap();
        assert_eq!(ns.names.as_deref(), Some(&["tenant-a".to_string()][..]));
        assert_eq!(ns.has_labels[1].value, "");
    }

    #[test]
    fn claim_crd_has_status_and_columns() {
        let crd = serde_json::to_value(HostClaim::crd()).unwrap();
        let version = &crd["spec"]["versions"][0];
        assert!(version["subresources"]["status"].is_object());
        assert_eq!(crd["spec"]["names"]["plural"], "hostclaims");
        let names: Vec<_> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "Associated",
                "Provisioned",
                "Ready",
                "Powered",
                "Reason",
                "Host",
                "Age"
            ]
        );
        let policy = serde_json::to_value(HostDeployPolicy::crd()).unwrap();
        assert_eq!(policy["spec"]["names"]["plural"], "hostdeploypolicies");
    }
}
