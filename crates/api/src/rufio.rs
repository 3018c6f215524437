//! Tinkerbell Rufio's API (`bmc.tinkerbell.org/v1alpha1`): `Machine`, `Job` and `Task`, served
//! with Rufio's fields and semantics so Tinkerbell's YAML and its Cluster API provider work with
//! ferrometal in place of Rufio. Rufio Jobs have no desired state to restore.

use k8s_openapi::api::core::v1::SecretReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::job::{
    BootDevice, JobTask as Action, OneTimeBootDeviceAction, PowerAction, VirtualMediaAction,
};

pub const GROUP: &str = "bmc.tinkerbell.org";

/// `Machine`: one BMC and how to reach it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bmc.tinkerbell.org",
    version = "v1alpha1",
    kind = "Machine",
    plural = "machines",
    singular = "machine",
    category = "tinkerbell",
    namespaced,
    status = "MachineStatus",
    printcolumn = r#"{"name":"Power","type":"string","jsonPath":".status.powerState"}"#,
    printcolumn = r#"{"name":"Contactable","type":"string","jsonPath":".status.conditions[?(@.type==\"Contactable\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct MachineSpec {
    pub connection: Connection,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// The BMC's IP address or host name.
    #[schemars(length(min = 1, max = 253))]
    pub host: String,
    /// Rufio's default is IPMI's 623.
    #[serde(default = "ipmi_port")]
    #[schemars(range(min = 0, max = 65535))]
    pub port: i64,
    /// A Secret with `username` and `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<SecretReference>,
    #[serde(default, rename = "insecureTLS")]
    pub insecure_tls: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

fn ipmi_port() -> i64 {
    623
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderOptions {
    /// bmclib providers to try first (case-insensitive): ipmitool, asrockrack, gofish,
    /// IntelAMT, dell, supermicro, openbmc. ferrometal speaks ipmitool (IPMI) and gofish
    /// (Redfish).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub preferred_order: Vec<String>,
    #[serde(default, rename = "intelAMT", skip_serializing_if = "Option::is_none")]
    pub intel_amt: Option<IntelAmtOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipmitool: Option<IpmitoolOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redfish: Option<RedfishOptions>,
    /// Rufio's RPC provider options, kept as written (not acted on here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object")]
    pub rpc: Option<serde_json::Value>,
}

fn preserved_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpmitoolOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub port: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4))]
    pub cipher_suite: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedfishOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub port: Option<i64>,
    #[serde(default)]
    pub use_basic_auth: bool,
    /// The system's ID under /redfish/v1/Systems (default: the only one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub system_name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntelAmtOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 8))]
    pub host_scheme: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// `on`, `off` or `unknown`.
    #[serde(
        default,
        rename = "powerState",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(max = 16))]
    pub power: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<RufioCondition>,
}

/// Rufio's condition shape (not metav1.Condition).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RufioCondition {
    #[serde(rename = "type")]
    #[schemars(length(max = 32))]
    pub type_: String,
    /// `True` or `False`.
    #[schemars(length(max = 8))]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub message: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(max = 63))]
    pub namespace: String,
}

/// `Job`: tasks run in order against one Machine, each through a `Task` named
/// `<job>-task-<n>`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bmc.tinkerbell.org",
    version = "v1alpha1",
    kind = "Job",
    plural = "jobs",
    singular = "job",
    shortname = "j",
    category = "tinkerbell",
    namespaced,
    status = "JobStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub machine_ref: MachineRef,
    #[schemars(length(min = 1, max = 32))]
    pub tasks: Vec<Action>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<RufioCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
}

/// `Task`: one action against a connection (created by the Job controller).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bmc.tinkerbell.org",
    version = "v1alpha1",
    kind = "Task",
    plural = "tasks",
    singular = "task",
    category = "tinkerbell",
    namespaced,
    status = "TaskStatus"
)]
pub struct TaskSpec {
    pub task: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<Connection>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<RufioCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
}

/// Whether `conditions` holds `type_` with status True.
pub fn is_true(conditions: &[RufioCondition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Sets `type_` to `status` (and `message`), Rufio's way: one entry per type.
pub fn set(
    conditions: &mut Vec<RufioCondition>,
    type_: &str,
    status: bool,
    message: &str,
    now: Option<&str>,
) {
    let status = if status { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.status = status.into();
                if let Some(now) = now {
                    c.last_update_time = Some(now.into());
                }
            }
            c.message = message.into();
        }
        None => conditions.push(RufioCondition {
            type_: type_.into(),
            status: status.into(),
            last_update_time: now.map(String::from),
            message: message.into(),
        }),
    }
}
