//! The rules of metal3's validating webhook that a CRD schema cannot hold, because CEL sees
//! neither annotations nor the object's namespace: the JSON inside the status, hardware
//! details, detached and reboot annotations; the inspect annotation against
//! `spec.inspectionMode`; and data Secrets from other namespaces. Messages are metal3's.
//!
//! Pure functions over the object's JSON: the embedded API server runs [`check_host`] on every
//! create and update of a BareMetalHost, as a kube-apiserver calls metal3's webhook.

use std::sync::LazyLock;

use ferrometal_crdschema::Schema;
use serde_json::Value;

use crate::annotations::{self as ann};
use crate::{BareMetalHost, ErrorType, HardwareDetails, OperationalStatus};
use kube::CustomResourceExt;

/// One refused field: where, and metal3's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        message: message.into(),
    }
}

/// The BareMetalHost CRD's schema, to decode annotation JSON as strictly as metal3 does
/// (Go's `DisallowUnknownFields`).
static HOST_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    let crd = serde_json::to_value(BareMetalHost::crd()).expect("the CRD serializes");
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .unwrap_or(Value::Null)
});

fn compiled(pointer: &str) -> Option<Schema> {
    HOST_SCHEMA
        .pointer(pointer)
        .and_then(|s| Schema::compile(s).ok())
}

static STATUS_SCHEMA: LazyLock<Option<Schema>> = LazyLock::new(|| compiled("/properties/status"));
static HARDWARE_SCHEMA: LazyLock<Option<Schema>> =
    LazyLock::new(|| compiled("/properties/status/properties/hardware"));

fn str_at<'v>(obj: &'v Value, pointer: &str) -> &'v str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Problems of a BareMetalHost about to be written (`old`: the stored object on update).
/// On update only annotations that are new or changed are checked, so an object stored
/// before these checks never blocks the controller's own metadata writes.
pub fn check_host(new: &Value, old: Option<&Value>) -> Vec<Problem> {
    let mut out = Vec::new();
    let empty = serde_json::Map::new();
    let annotations = new
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let old_annotations = old
        .and_then(|o| o.pointer("/metadata/annotations"))
        .and_then(Value::as_object);
    let inspection_mode = str_at(new, "/spec/inspectionMode");
    let inspect_annotation = annotations.get(ann::INSPECT).and_then(Value::as_str);
    let inspection_disabled =
        inspection_mode == "disabled" || inspect_annotation == Some("disabled");

    for (key, value) in annotations {
        let Some(value) = value.as_str() else {
            continue;
        };
        if old_annotations
            .and_then(|o| o.get(key))
            .and_then(Value::as_str)
            == Some(value)
        {
            continue;
        }
        let field = format!("metadata.annotations[{key}]");
        let message = if key == ann::STATUS {
            status_annotation(value)
        } else if ann::is_reboot_key(key) {
            reboot_annotation(value)
        } else if key == ann::INSPECT {
            (!matches!(value, "disabled" | "")).then(|| {
                format!(
                    "invalid value for the {} annotation, allowed are \"disabled\" or \"\"",
                    ann::INSPECT
                )
            })
        } else if key == ann::HARDWARE_DETAILS {
            hardware_details_annotation(value, inspection_disabled)
        } else if key == ann::DETACHED {
            detached_annotation(value)
        } else {
            None
        };
        if let Some(message) = message {
            out.push(problem(field, message));
        }
    }

    if let Some(a) = inspect_annotation.filter(|a| !a.is_empty())
        && !inspection_mode.is_empty()
        && (a == "disabled") != (inspection_mode == "disabled")
    {
        out.push(problem(
            "spec.inspectionMode",
            "inspect.metal3.io annotation and inspectionMode field have contradicting values",
        ));
    }

    let namespace = str_at(new, "/metadata/namespace");
    for field in ["userData", "networkData", "metaData"] {
        let pointer = format!("/spec/{field}/namespace");
        let other = str_at(new, &pointer);
        let unchanged = old.is_some_and(|o| str_at(o, &pointer) == other);
        if !other.is_empty() && other != namespace && !unchanged {
            out.push(problem(
                format!("spec.{field}.namespace"),
                format!("{field}: cross-namespace Secret references are not allowed"),
            ));
        }
    }
    out
}

/// A reference at `pointer` to another namespace than the object's own, new or changed:
/// the controllers act for whoever can write the object, who may not be allowed to read (or
/// use) what the other namespace holds.
fn cross_namespace(
    new: &Value,
    old: Option<&Value>,
    pointer: &str,
    field: &str,
    what: &str,
) -> Option<Problem> {
    let namespace = str_at(new, "/metadata/namespace");
    let other = str_at(new, pointer);
    let unchanged = old.is_some_and(|o| str_at(o, pointer) == other);
    (!other.is_empty() && other != namespace && !unchanged).then(|| {
        problem(
            field,
            format!(
                "Invalid value: {other:?}: {what} must be in the object's own namespace {namespace:?}; cross-namespace references are not allowed"
            ),
        )
    })
}

/// Rufio `Machine` and `Task`: the credentials Secret is in the object's own namespace.
/// Upstream Rufio reads any namespace (it assumes a cluster-wide operator); here a namespace's
/// users may create Machines, and must not be able to send another namespace's BMC password
/// to an address of their choosing.
pub fn check_rufio_connection(new: &Value, old: Option<&Value>) -> Vec<Problem> {
    cross_namespace(
        new,
        old,
        "/spec/connection/authSecretRef/namespace",
        "spec.connection.authSecretRef.namespace",
        "the BMC credentials Secret",
    )
    .into_iter()
    .collect()
}

/// Rufio `Job`: the Machine it acts on is in its own namespace.
pub fn check_rufio_job(new: &Value, old: Option<&Value>) -> Vec<Problem> {
    cross_namespace(
        new,
        old,
        "/spec/machineRef/namespace",
        "spec.machineRef.namespace",
        "the Machine",
    )
    .into_iter()
    .collect()
}

/// HostClaim: `image.ociAuthSecretName` would be read in the host's namespace, not the
/// claim's, so a tenant could name any infrastructure Secret; it is not passed on.
pub fn check_claim(new: &Value, old: Option<&Value>) -> Vec<Problem> {
    let pointer = "/spec/image/ociAuthSecretName";
    let name = str_at(new, pointer);
    let unchanged = old.is_some_and(|o| str_at(o, pointer) == name);
    if name.is_empty() || unchanged {
        return Vec::new();
    }
    vec![problem(
        "spec.image.ociAuthSecretName",
        format!(
            "Forbidden: {name:?}: a HostClaim cannot name registry credentials (the Secret would be looked up in the host's namespace, not the claim's); use an image that needs none"
        ),
    )]
}

fn status_annotation(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let decoding = |e: String| Some(format!("error decoding status annotation: {e}"));
    let parsed: Value = match serde_json::from_str(value) {
        Ok(v) => v,
        Err(e) => return decoding(e.to_string()),
    };
    if let Some(op) = parsed.get("operationalStatus")
        && serde_json::from_value::<OperationalStatus>(op.clone()).is_err()
    {
        return Some(format!(
            "invalid operationalStatus '{}' in the {} annotation",
            op.as_str().unwrap_or(&op.to_string()),
            ann::STATUS
        ));
    }
    // Strictly the spellings metal3 writes (reading also takes the old "detach error").
    if let Some(et) = parsed.get("errorType").filter(|e| e.as_str() != Some(""))
        && serde_json::from_value::<ErrorType>(et.clone())
            .map_or(true, |t| et.as_str() != Some(t.as_str()))
    {
        return Some(format!(
            "invalid errorType '{}' in the {} annotation",
            et.as_str().unwrap_or(&et.to_string()),
            ann::STATUS
        ));
    }
    if let Some(unknown) = unknown_field(&parsed, &STATUS_SCHEMA) {
        return decoding(format!("json: unknown field \"{unknown}\""));
    }
    match serde_json::from_value::<crate::BareMetalHostStatus>(parsed) {
        Ok(_) => None,
        Err(e) => decoding(e.to_string()),
    }
}

fn hardware_details_annotation(value: &str, inspection_disabled: bool) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if !inspection_disabled {
        return Some(
            "when hardware details are provided, inspection must be disabled (either via inspect.metal3.io annotation or inspectionMode field)"
                .into(),
        );
    }
    let decoding = |e: String| {
        Some(format!(
            "error decoding the {} annotation: {e}",
            ann::HARDWARE_DETAILS
        ))
    };
    let parsed: Value = match serde_json::from_str(value) {
        Ok(v) => v,
        Err(e) => return decoding(e.to_string()),
    };
    if let Some(unknown) = unknown_field(&parsed, &HARDWARE_SCHEMA) {
        return decoding(format!("json: unknown field \"{unknown}\""));
    }
    match serde_json::from_value::<HardwareDetails>(parsed) {
        Ok(_) => None,
        Err(e) => decoding(e.to_string()),
    }
}

fn reboot_annotation(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let parsed: Value = match serde_json::from_str(value) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            return Some(format!(
                "failed to unmarshal the data from the {} annotation: not a JSON object: {other}",
                ann::REBOOT
            ));
        }
        Err(e) => {
            return Some(format!(
                "failed to unmarshal the data from the {} annotation: {e}",
                ann::REBOOT
            ));
        }
    };
    match parsed.get("mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if matches!(m.as_str(), "hard" | "soft" | "") => None,
        Some(_) => Some(format!(
            "invalid mode in the {} annotation, allowed are \"hard\", \"soft\" or \"\"",
            ann::REBOOT
        )),
    }
}

fn detached_annotation(value: &str) -> Option<String> {
    ann::parse_detached(value).err().map(|e| {
        format!(
            "failed to unmarshal the data from the {} annotation: {}",
            ann::DETACHED,
            e.reason
        )
    })
}

/// The first field of `value` that `schema` does not declare, as a path: what pruning drops.
fn unknown_field(value: &Value, schema: &Option<Schema>) -> Option<String> {
    let mut copy = value.clone();
    schema
        .as_ref()?
        .prune_reporting(&mut copy)
        .into_iter()
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host(annotations: Value, spec: Value) -> Value {
        json!({
            "metadata": {"name": "h", "namespace": "ns", "annotations": annotations},
            "spec": spec,
        })
    }

    fn messages(p: Vec<Problem>) -> Vec<String> {
        p.into_iter().map(|p| p.message).collect()
    }

    #[test]
    fn good_annotations_pass() {
        let status = json!({"operationalStatus": "OK", "errorType": "", "provisioning": {"state": "provisioned", "ID": "x"}, "poweredOn": true});
        let hw = json!({"cpu": {"arch": "x86_64", "count": 4}, "ramMebibytes": 1024});
        let h = host(
            json!({
                ann::STATUS: status.to_string(),
                ann::HARDWARE_DETAILS: hw.to_string(),
                ann::INSPECT: "disabled",
                ann::REBOOT: "",
                "reboot.metal3.io/capm3": "{\"mode\":\"soft\"}",
                ann::DETACHED: "{\"deleteAction\":\"delay\"}",
            }),
            json!({"userData": {"name": "u", "namespace": "ns"}}),
        );
        assert_eq!(check_host(&h, None), vec![]);
    }

    #[test]
    fn each_rule_with_metal3s_message() {
        let cases: &[(Value, Value, &str)] = &[
            (
                json!({ann::STATUS: "{"}),
                json!({}),
                "error decoding status annotation: ",
            ),
            (
                json!({ann::STATUS: "{\"operationalStatus\":\"bogus\"}"}),
                json!({}),
                "invalid operationalStatus 'bogus' in the baremetalhost.metal3.io/status annotation",
            ),
            (
                json!({ann::STATUS: "{\"errorType\":\"detach error\"}"}),
                json!({}),
                "invalid errorType 'detach error' in the baremetalhost.metal3.io/status annotation",
            ),
            (
                json!({ann::STATUS: "{\"provisioning\":{\"state\":\"ready\",\"colour\":1}}"}),
                json!({}),
                "error decoding status annotation: json: unknown field \"provisioning.colour\"",
            ),
            (
                json!({ann::HARDWARE_DETAILS: "{\"cpu\":{}}"}),
                json!({}),
                "when hardware details are provided, inspection must be disabled (either via inspect.metal3.io annotation or inspectionMode field)",
            ),
            (
                json!({ann::HARDWARE_DETAILS: "{\"cpus\":2}"}),
                json!({"inspectionMode": "disabled"}),
                "error decoding the inspect.metal3.io/hardwaredetails annotation: json: unknown field \"cpus\"",
            ),
            (
                json!({ann::INSPECT: "now"}),
                json!({}),
                "invalid value for the inspect.metal3.io annotation, allowed are \"disabled\" or \"\"",
            ),
            (
                json!({ann::INSPECT: "disabled"}),
                json!({"inspectionMode": "agent"}),
                "inspect.metal3.io annotation and inspectionMode field have contradicting values",
            ),
            (
                json!({"reboot.metal3.io/x": "hard"}),
                json!({}),
                "failed to unmarshal the data from the reboot.metal3.io annotation: ",
            ),
            (
                json!({ann::REBOOT: "{\"mode\":\"gentle\"}"}),
                json!({}),
                "invalid mode in the reboot.metal3.io annotation, allowed are \"hard\", \"soft\" or \"\"",
            ),
            (
                json!({ann::DETACHED: "{\"deleteAction\":\"later\"}"}),
                json!({}),
                "failed to unmarshal the data from the baremetalhost.metal3.io/detached annotation: ",
            ),
            (
                json!({}),
                json!({"networkData": {"name": "n", "namespace": "other"}}),
                "networkData: cross-namespace Secret references are not allowed",
            ),
        ];
        for (annotations, spec, want) in cases {
            let got = messages(check_host(&host(annotations.clone(), spec.clone()), None));
            assert!(
                got.len() == 1 && got[0].starts_with(want),
                "{annotations} {spec}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn unchanged_annotations_are_not_rechecked_on_update() {
        let bad = host(json!({ann::REBOOT: "junk"}), json!({}));
        assert_eq!(check_host(&bad, None).len(), 1);
        assert_eq!(check_host(&bad, Some(&bad)), vec![]);
        let changed = host(json!({ann::REBOOT: "junk2"}), json!({}));
        assert_eq!(check_host(&changed, Some(&bad)).len(), 1);
    }

    #[test]
    fn rufio_references_stay_in_the_objects_namespace() {
        let machine = |ns: &str| {
            json!({"metadata": {"name": "m", "namespace": "team-x"},
                   "spec": {"connection": {"host": "h", "authSecretRef": {"name": "bmc", "namespace": ns}}}})
        };
        assert!(check_rufio_connection(&machine("team-x"), None).is_empty());
        assert!(check_rufio_connection(&machine(""), None).is_empty());
        let p = check_rufio_connection(&machine("infra"), None);
        assert_eq!(p[0].field, "spec.connection.authSecretRef.namespace");
        assert!(p[0].message.contains("\"infra\"") && p[0].message.contains("cross-namespace"));
        // An object stored before the check can still be written (finalizers, annotations).
        assert!(check_rufio_connection(&machine("infra"), Some(&machine("infra"))).is_empty());
        let job = json!({"metadata": {"name": "j", "namespace": "ops"},
                         "spec": {"machineRef": {"name": "m3", "namespace": "infra"}, "tasks": []}});
        assert_eq!(
            check_rufio_job(&job, None)[0].field,
            "spec.machineRef.namespace"
        );
    }

    #[test]
    fn a_claim_cannot_name_registry_credentials() {
        let claim = json!({"metadata": {"name": "c", "namespace": "t"},
                           "spec": {"image": {"url": "oci://r/i", "ociAuthSecretName": "node-2-bmc"}}});
        let p = check_claim(&claim, None);
        assert_eq!(p[0].field, "spec.image.ociAuthSecretName");
        assert!(p[0].message.contains("node-2-bmc"));
        assert!(check_claim(&json!({"spec": {"image": {"url": "oci://r/i"}}}), None).is_empty());
    }
}
