//! Defaulting and pruning.

use serde_json::{Value, json};

use super::fixtures::{admit, bmh, host, summary, valid_spec};
use crate::error::Reason;
use crate::schema::Schema;

// ---------------------------------------------------------------- defaulting

#[test]
fn defaults_are_applied_recursively() {
    let s = bmh();
    let mut obj = host(json!({
        "online": true,
        "bmc": {"address": "192.0.2.10", "credentialsName": "c"},
        "ports": [{"name": "eno1"}, {"name": "eno2", "speedGbps": 25}],
        "annotations": {"a": {"value": "x"}, "b": {"priority": 1}},
    }));
    s.default(&mut obj);
    let spec = &obj["spec"];
    assert_eq!(spec["bootMode"], "UEFI");
    assert_eq!(spec["bootMACAddress"], "");
    assert_eq!(spec["externallyProvisioned"], false);
    assert_eq!(spec["bmc"]["disableCertificateVerification"], false);
    // a defaulted object gets its own fields' defaults too
    assert_eq!(
        spec["power"],
        json!({"policy": "soft", "timeoutSeconds": 180})
    );
    // array items and additionalProperties values
    assert_eq!(spec["ports"][0]["speedGbps"], 1);
    assert_eq!(spec["ports"][1]["speedGbps"], 25);
    assert_eq!(spec["annotations"]["a"]["priority"], 10);
    assert_eq!(spec["annotations"]["b"]["priority"], 1);
    // absent objects without a default stay absent
    assert!(spec.get("image").is_none());
    assert!(obj.get("status").is_none());
}

#[test]
fn defaulting_keeps_given_values_and_handles_nulls() {
    let s = bmh();
    let mut obj = host(json!({
        "online": true,
        "bootMode": "legacy",
        "power": {"policy": "hard"},
        "externallyProvisioned": null,
        "rootDeviceHints": null,
    }));
    obj["status"] = json!({"lastUpdated": null, "errorCount": null});
    s.default(&mut obj);
    assert_eq!(obj["spec"]["bootMode"], "legacy");
    assert_eq!(
        obj["spec"]["power"],
        json!({"policy": "hard", "timeoutSeconds": 180})
    );
    // null on a non-nullable field: default applies, or the field goes
    assert_eq!(obj["spec"]["externallyProvisioned"], false);
    assert!(obj["spec"].get("rootDeviceHints").is_none());
    assert!(obj["status"].get("errorCount").is_none());
    // nullable fields keep their null
    assert_eq!(obj["status"]["lastUpdated"], Value::Null);
}

#[test]
fn defaulting_ignores_mistyped_input() {
    let s = bmh();
    for mut v in [
        json!(null),
        json!("string"),
        json!([1, 2]),
        json!({"spec": "not an object"}),
        json!({"spec": {"ports": {"not": "a list"}, "annotations": []}}),
    ] {
        s.default(&mut v);
        s.prune(&mut v);
        let _ = s.validate(&v, Some(&v.clone()));
    }
}

// ------------------------------------------------------------------- pruning

#[test]
fn pruning_drops_unknown_fields() {
    let s = bmh();
    let mut obj = host(json!({
        "online": true,
        "unknownField": 1,
        "bmc": {"address": "a", "credentialsName": "c", "password": "hunter2"},
        "ports": [{"name": "eno1", "vlan": 7}],
        "annotations": {"a": {"value": "x", "junk": true}},
        "userData": {"name": "u", "anything": {"goes": [1, 2]}},
        "consumerRef": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"replicas": 2, "extra": true},
            "data": {"k": "v"}
        }
    }));
    obj["metadata"]["unknownMetadataField"] = json!("kept for the server");
    obj["extraRootField"] = json!(true);
    obj["status"] = json!({"hardware": {"cpu": {"count": 8}}, "junk": 1});
    let mut dropped = s.prune_reporting(&mut obj);
    dropped.sort();
    assert_eq!(
        dropped,
        vec![
            "extraRootField",
            "spec.annotations[a].junk",
            "spec.bmc.password",
            "spec.consumerRef.data",
            "spec.consumerRef.metadata.bogus",
            "spec.consumerRef.spec.extra",
            "spec.ports[0].vlan",
            "spec.unknownField",
            "status.junk",
        ]
    );

    assert!(obj.get("extraRootField").is_none());
    assert_eq!(obj["apiVersion"], "metal.ferrometal.io/v1alpha1");
    assert_eq!(obj["kind"], "BareMetalHost");
    assert_eq!(
        obj["metadata"]["unknownMetadataField"],
        "kept for the server"
    );
    let spec = &obj["spec"];
    assert!(spec.get("unknownField").is_none());
    assert_eq!(spec["bmc"], json!({"address": "a", "credentialsName": "c"}));
    assert_eq!(spec["ports"], json!([{"name": "eno1"}]));
    assert_eq!(spec["annotations"], json!({"a": {"value": "x"}}));
    // preserve-unknown-fields keeps everything below it
    assert_eq!(
        spec["userData"],
        json!({"name": "u", "anything": {"goes": [1, 2]}})
    );
    assert_eq!(obj["status"], json!({"hardware": {"cpu": {"count": 8}}}));
    // embedded resources keep apiVersion/kind and ObjectMeta fields only
    assert_eq!(
        spec["consumerRef"],
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "b"}},
            "spec": {"replicas": 2}
        })
    );
}

#[test]
fn pruning_respects_additional_properties_true_and_preserve_at_root() {
    let s = Schema::compile(&json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
            "free": {"type": "object", "additionalProperties": true}
        }
    }))
    .unwrap();
    let mut obj = json!({"anything": 1, "spec": {"a": "x", "b": "y"}, "free": {"z": [1]}});
    s.prune(&mut obj);
    assert_eq!(
        obj,
        json!({"anything": 1, "spec": {"a": "x"}, "free": {"z": [1]}})
    );
}

#[test]
fn embedded_resource_requires_kind_and_api_version() {
    let s = bmh();
    let mut spec = valid_spec();
    spec["consumerRef"] = json!({"metadata": {"name": "x"}});
    let (_, errs) = admit(&s, host(spec), None);
    assert_eq!(
        summary(&errs),
        vec![
            (
                "spec.consumerRef.apiVersion".into(),
                Reason::FieldValueRequired
            ),
            ("spec.consumerRef.kind".into(), Reason::FieldValueRequired),
        ]
    );
}
