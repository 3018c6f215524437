//! `BareMetalHost` (metal3.io/v1alpha1), wire-compatible with metal3's baremetal-operator.

use std::fmt;

use k8s_openapi::api::core::v1::{ObjectReference, SecretReference, Taint};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hardware::HardwareDetails;
use crate::host_config::{FirmwareConfig, NetworkInterface, RaidConfig, RootDeviceHints};

/// The BMC driver named in `bmc.address`, as a CEL expression (no scheme means IPMI).
const DRIVER: &str =
    "(self.bmc.address.contains('://') ? self.bmc.address.find('^[^:+]+') : 'ipmi')";
/// Drivers that boot through PXE only: no secure boot, no hardware RAID (metal3's ipmi and libvirt).
const PXE_ONLY: &str =
    "(!self.bmc.address.contains('://') || self.bmc.address.matches('^(ipmi|libvirt)://'))";

/// A physical server: how to reach its BMC, what power and image it should have.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "BareMetalHost",
    plural = "baremetalhosts",
    shortname = "bmh",
    shortname = "bmhost",
    category = "metal3",
    namespaced,
    status = "BareMetalHostStatus",
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.operationalStatus","description":"Operational status","priority":1}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.provisioning.state","description":"Provisioning status"}"#,
    printcolumn = r#"{"name":"Consumer","type":"string","jsonPath":".spec.consumerRef.name","description":"Consumer using this host"}"#,
    printcolumn = r#"{"name":"BMC","type":"string","jsonPath":".spec.bmc.address","description":"Address of management controller","priority":1}"#,
    printcolumn = r#"{"name":"Online","type":"string","jsonPath":".spec.online","description":"Whether the host is online or not"}"#,
    printcolumn = r#"{"name":"Error","type":"string","jsonPath":".status.errorType","description":"Type of the most recent error"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time duration since creation of BaremetalHost"}"#,
    // metal3's validating webhook, as CEL so that the rules hold on any API server; messages
    // as metal3 words them. (Rules on annotations cannot be CEL: the controller checks those.)
    validation = Rule::new("self.metadata.name.matches('^[A-Za-z0-9._-]+$')").message("BareMetalHost resource name cannot contain characters other than [A-Za-z0-9._-]"),
    validation = Rule::new("!self.metadata.name.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')").message("BareMetalHost resource name cannot be a UUID"),
    validation = Rule::new("!has(oldSelf.spec.bmc) || !has(self.spec.bmc) || oldSelf.spec.bmc.address == '' || self.spec.bmc.address == oldSelf.spec.bmc.address || (has(oldSelf.status) && (oldSelf.status.provisioning.state in ['', 'registering', 'unmanaged'] || oldSelf.status.operationalStatus == 'detached')) || !has(oldSelf.status)").message("BMC address can not be changed if the BMH is not in the Registering state, or if the BMH is not detached").field_path(".spec.bmc.address"),
    validation = Rule::new("self.spec.externallyProvisioned == oldSelf.spec.externallyProvisioned || !self.spec.externallyProvisioned || !has(oldSelf.status) || oldSelf.status.provisioning.state in ['available', 'ready']").message(kube::core::Message::Expression("'externallyProvisioned can only be enabled when in Available state, currently in ' + oldSelf.status.provisioning.state".into())).field_path(".spec.externallyProvisioned"),
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(oldSelf.bootMACAddress) || oldSelf.bootMACAddress == '' || (has(self.bootMACAddress) && self.bootMACAddress.lowerAscii() == oldSelf.bootMACAddress.lowerAscii())").message("bootMACAddress can not be changed once it is set").field_path(".bootMACAddress"))]
#[x_kube(validation = Rule::new("!self.disablePowerOff || self.online").message("node can't simultaneously have online set to false and have power off disabled").field_path(".online"))]
// metal3 also requires the MAC whenever inspection is disabled (for Ironic's PXE port); here
// virtual-media hosts need none, so only the drivers that always PXE-boot require it.
#[x_kube(validation = Rule::new("(has(self.bootMACAddress) && self.bootMACAddress != '') || !has(self.bmc) || !self.bmc.address.startsWith('libvirt://')").message(kube::core::Message::Expression(format!("'BMC driver ' + {DRIVER} + ' requires a BootMACAddress value'"))).field_path(".bootMACAddress"))]
#[x_kube(validation = Rule::new(format!("!has(self.bootMode) || self.bootMode != 'UEFISecureBoot' || !has(self.bmc) || !{PXE_ONLY}")).message(kube::core::Message::Expression(format!("'BMC driver ' + {DRIVER} + ' does not support secure boot'"))).field_path(".bootMode"))]
#[x_kube(validation = Rule::new(format!("!has(self.raid) || !has(self.raid.hardwareRAIDVolumes) || size(self.raid.hardwareRAIDVolumes) == 0 || !has(self.bmc) || !{PXE_ONLY}")).message(kube::core::Message::Expression(format!("'BMC driver ' + {DRIVER} + ' does not support configuring RAID'"))).field_path(".raid.hardwareRAIDVolumes"))]
#[x_kube(validation = Rule::new("!has(self.rootDeviceHints) || !has(self.raid) || !has(self.raid.softwareRAIDVolumes) || !self.raid.softwareRAIDVolumes.exists(v, has(v.rootVolume) && v.rootVolume)").message("softwareRAIDVolumes[*].rootVolume and rootDeviceHints can not be set at the same time").field_path(".raid.softwareRAIDVolumes"))]
pub struct BareMetalHostSpec {
    /// Taints for the corresponding Machine. metal3 never implemented them either: kept and
    /// reported, not acted on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// How to reach the baseboard management controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<BmcDetails>,
    /// Which MAC address will PXE boot.
    #[serde(
        default,
        rename = "bootMACAddress",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = "[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}"))]
    pub boot_mac_address: Option<String>,
    /// Whether the server should be powered on.
    #[serde(default)]
    pub online: bool,
    /// Keep the host powered on at all times (reboots are power cycles, not off/on).
    #[serde(default)]
    pub disable_power_off: bool,
    /// Boot mode of the deployed image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<BootMode>,
    /// Who uses the host (e.g. a CAPM3 Metal3Machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub consumer_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    /// Secret with cloud-init user data, in the host's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub user_data: Option<SecretReference>,
    /// Secret with network data, in the host's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub network_data: Option<SecretReference>,
    /// Secret with metadata for the config drive, in the host's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub meta_data: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprovisioning_network_data_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    /// The host runs an OS that was installed some other way; do not provision or clean it.
    #[serde(default)]
    pub externally_provisioned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "metadata"))]
    pub automated_cleaning_mode: Option<AutomatedCleaningMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_deploy: Option<CustomDeploy>,
    /// How hardware is inspected: `disabled`, `agent` (in-band) or `fast` (out-of-band via the BMC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspection_mode: Option<InspectionMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// RAID volumes to build while preparing the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<RaidConfig>,
    /// BIOS settings (deprecated by metal3; kept and reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwareConfig>,
    /// Network configuration per NIC.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BmcDetails {
    /// e.g. `ipmi://10.0.0.1`, `redfish+http://10.0.0.1/redfish/v1/Systems/1`.
    pub address: String,
    /// Secret in the host's namespace with `username` and `password` keys.
    pub credentials_name: String,
    #[serde(default)]
    pub disable_certificate_verification: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.url.matches('^(http|https|ftp|gopher|oci)://[^/?#]')").message(kube::core::Message::Expression("'image URL ' + self.url + ' is invalid: the scheme must be http, https, ftp, gopher or oci'".into())).field_path(".url"))]
#[x_kube(validation = Rule::new("!self.url.startsWith('oci://') || !has(self.checksum) || self.checksum == ''").message("spec.image.checksum must be empty for OCI images (oci:// images have embedded checksums)").field_path(".checksum"))]
#[x_kube(validation = Rule::new("(has(self.format) && self.format == 'live-iso') || self.url.startsWith('oci://') || (has(self.checksum) && self.checksum != '')").message("checksum is required for normal images").field_path(".checksum"))]
pub struct Image {
    pub url: String,
    /// The checksum itself, or a URL to a checksum file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<ChecksumType>,
    #[serde(default, rename = "format", skip_serializing_if = "Option::is_none")]
    pub format: Option<ImageFormat>,
    /// Secret with credentials for an `oci://` image registry, in the host's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci_auth_secret_name: Option<String>,
}

impl Image {
    pub fn is_live_iso(&self) -> bool {
        self.format == Some(ImageFormat::LiveIso)
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ChecksumType {
    #[serde(rename = "md5")]
    Md5,
    #[serde(rename = "sha256")]
    Sha256,
    #[serde(rename = "sha512")]
    Sha512,
    #[serde(rename = "auto")]
    Auto,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ImageFormat {
    #[serde(rename = "raw")]
    Raw,
    #[serde(rename = "qcow2")]
    Qcow2,
    #[serde(rename = "vdi")]
    Vdi,
    #[serde(rename = "vmdk")]
    Vmdk,
    #[serde(rename = "live-iso")]
    LiveIso,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BootMode {
    #[serde(rename = "UEFI")]
    Uefi,
    #[serde(rename = "UEFISecureBoot")]
    UefiSecureBoot,
    #[serde(rename = "legacy")]
    Legacy,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AutomatedCleaningMode {
    #[serde(rename = "metadata")]
    Metadata,
    #[serde(rename = "disabled")]
    Disabled,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum InspectionMode {
    #[serde(rename = "disabled")]
    Disabled,
    #[serde(rename = "agent")]
    Agent,
    #[serde(rename = "fast")]
    Fast,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CustomDeploy {
    pub method: String,
}

/// What the operator observed and decided.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BareMetalHostStatus {
    #[serde(default)]
    pub operational_status: OperationalStatus,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_error_type_is_none"
    )]
    pub error_type: Option<ErrorType>,
    #[serde(default)]
    pub error_message: String,
    #[serde(default)]
    pub error_count: i32,
    /// Failed provisioning attempts in a row; at the retry limit the host stops retrying.
    #[serde(default)]
    pub provisioning_fail_count: i32,
    /// The image of the last provisioning attempt, successful or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_image: Option<Image>,
    /// RFC 3339 time of the last status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_updated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<HardwareDetails>,
    #[serde(default)]
    pub provisioning: ProvisionStatus,
    /// The credentials last seen working, with the Secret's resourceVersion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_credentials: Option<CredentialsStatus>,
    /// The credentials last tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried_credentials: Option<CredentialsStatus>,
    #[serde(default)]
    pub powered_on: bool,
    #[serde(default)]
    pub operation_history: OperationHistory,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionStatus {
    /// A free string in metal3's schema too, so that a state either side adds later can be
    /// stored (and reported) rather than refused.
    #[serde(default)]
    #[schemars(with = "String")]
    pub state: ProvisioningState,
    /// The provisioner's ID for this host.
    #[serde(default, rename = "ID")]
    pub id: String,
    /// The image most recently provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<BootMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_deploy: Option<CustomDeploy>,
    /// The RAID configuration last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<RaidConfig>,
    /// The firmware settings last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwareConfig>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub credentials: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_version: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationHistory {
    #[serde(default)]
    pub register: OperationMetric,
    #[serde(default)]
    pub inspect: OperationMetric,
    #[serde(default)]
    pub provision: OperationMetric,
    #[serde(default)]
    pub deprovision: OperationMetric,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperationMetric {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time", "nullable" = true))]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time", "nullable" = true))]
    pub end: Option<String>,
}

/// A `metav1.Condition`, with the upstream schema's bounds and patterns.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    // Required, as in metal3's schema (conditions stored before always carried it).
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    #[schemars(length(max = 32768))]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

/// metal3's provisioning states, spelled as on the wire.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ProvisioningState {
    #[default]
    #[serde(rename = "")]
    None,
    #[serde(rename = "unmanaged")]
    Unmanaged,
    #[serde(rename = "registering")]
    Registering,
    #[serde(rename = "match profile")]
    MatchProfile,
    #[serde(rename = "inspecting")]
    Inspecting,
    #[serde(rename = "preparing")]
    Preparing,
    /// Older name of `available`; read but never written.
    #[serde(rename = "ready")]
    Ready,
    #[serde(rename = "available")]
    Available,
    #[serde(rename = "provisioning")]
    Provisioning,
    #[serde(rename = "provisioned")]
    Provisioned,
    #[serde(rename = "externally provisioned")]
    ExternallyProvisioned,
    #[serde(rename = "deprovisioning")]
    Deprovisioning,
    #[serde(rename = "powering off before delete")]
    PoweringOffBeforeDelete,
    #[serde(rename = "deleting")]
    Deleting,
}

impl ProvisioningState {
    pub const ALL: [ProvisioningState; 14] = [
        ProvisioningState::None,
        ProvisioningState::Unmanaged,
        ProvisioningState::Registering,
        ProvisioningState::MatchProfile,
        ProvisioningState::Inspecting,
        ProvisioningState::Preparing,
        ProvisioningState::Ready,
        ProvisioningState::Available,
        ProvisioningState::Provisioning,
        ProvisioningState::Provisioned,
        ProvisioningState::ExternallyProvisioned,
        ProvisioningState::Deprovisioning,
        ProvisioningState::PoweringOffBeforeDelete,
        ProvisioningState::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProvisioningState::None => "",
            ProvisioningState::Unmanaged => "unmanaged",
            ProvisioningState::Registering => "registering",
            ProvisioningState::MatchProfile => "match profile",
            ProvisioningState::Inspecting => "inspecting",
            ProvisioningState::Preparing => "preparing",
            ProvisioningState::Ready => "ready",
            ProvisioningState::Available => "available",
            ProvisioningState::Provisioning => "provisioning",
            ProvisioningState::Provisioned => "provisioned",
            ProvisioningState::ExternallyProvisioned => "externally provisioned",
            ProvisioningState::Deprovisioning => "deprovisioning",
            ProvisioningState::PoweringOffBeforeDelete => "powering off before delete",
            ProvisioningState::Deleting => "deleting",
        }
    }
}

impl fmt::Display for ProvisioningState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum OperationalStatus {
    #[default]
    #[serde(rename = "OK")]
    Ok,
    /// Not yet known (metal3 writes it before the first reconcile).
    #[serde(rename = "")]
    Unknown,
    #[serde(rename = "discovered")]
    Discovered,
    #[serde(rename = "error")]
    Error,
    #[serde(rename = "delayed")]
    Delayed,
    #[serde(rename = "detached")]
    Detached,
    /// Servicing (updates to a provisioned host) is under way.
    #[serde(rename = "servicing")]
    Servicing,
}

impl OperationalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationalStatus::Ok => "OK",
            OperationalStatus::Unknown => "",
            OperationalStatus::Discovered => "discovered",
            OperationalStatus::Error => "error",
            OperationalStatus::Delayed => "delayed",
            OperationalStatus::Detached => "detached",
            OperationalStatus::Servicing => "servicing",
        }
    }
}

/// metal3's error types, spelled as on the wire. metal3's schema has no detach error (its
/// controller's "detach error" is refused by its own CRD): a failed detach is a registration
/// error, the provisioner being what the host failed to leave.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ErrorType {
    #[serde(rename = "provisioned registration error")]
    ProvisionedRegistration,
    /// Also reads the "detach error" earlier versions stored (metal3's schema has none).
    #[serde(rename = "registration error", alias = "detach error")]
    Registration,
    #[serde(rename = "inspection error")]
    Inspection,
    #[serde(rename = "preparation error")]
    Preparation,
    #[serde(rename = "provisioning error")]
    Provisioning,
    #[serde(rename = "power management error")]
    PowerManagement,
    /// A servicing step (firmware settings or updates on a provisioned host) failed.
    #[serde(rename = "servicing error")]
    Servicing,
}

/// An empty errorType (Go's zero value, in hand-written or old status annotations) is none.
fn empty_error_type_is_none<'de, D>(d: D) -> Result<Option<ErrorType>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match Option::<String>::deserialize(d)?.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => ErrorType::deserialize(serde::de::value::StrDeserializer::new(s)).map(Some),
    }
}

impl ErrorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Registration => "registration error",
            ErrorType::Inspection => "inspection error",
            ErrorType::Preparation => "preparation error",
            ErrorType::Provisioning => "provisioning error",
            ErrorType::ProvisionedRegistration => "provisioned registration error",
            ErrorType::PowerManagement => "power management error",
            ErrorType::Servicing => "servicing error",
        }
    }
}

impl BareMetalHost {
    /// The host's namespace (hosts are namespaced; empty only for malformed objects).
    pub fn namespace_or_default(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn state(&self) -> ProvisioningState {
        self.status
            .as_ref()
            .map(|s| s.provisioning.state)
            .unwrap_or_default()
    }
}
