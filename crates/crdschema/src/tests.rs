use serde_json::{Value, json};

use crate::{FieldError, Reason, Schema};

/// A subset of ferrometal's BareMetalHost schema, shaped like the real CRD.
fn bmh_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["online"],
                "x-kubernetes-validations": [
                    {
                        "rule": "self.bootMACAddress == oldSelf.bootMACAddress || oldSelf.bootMACAddress == ''",
                        "message": "bootMACAddress can not be changed once it is set"
                    },
                    {
                        "rule": "!has(self.image) || has(self.image.checksum) || self.image.format == 'live-iso'",
                        "message": "image.checksum is required unless image.format is live-iso",
                        "fieldPath": ".image"
                    }
                ],
                "properties": {
                    "online": {"type": "boolean"},
                    "bootMACAddress": {
                        "type": "string",
                        "default": "",
                        "pattern": "^$|^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$"
                    },
                    "bootMode": {
                        "type": "string",
                        "enum": ["UEFI", "UEFISecureBoot", "legacy"],
                        "default": "UEFI"
                    },
                    "externallyProvisioned": {
                        "type": "boolean",
                        "default": false,
                        "x-kubernetes-validations": [
                            {"rule": "oldSelf == false || self == true", "message": "externallyProvisioned can not be unset"}
                        ]
                    },
                    "bmc": {
                        "type": "object",
                        "required": ["address", "credentialsName"],
                        "properties": {
                            "address": {"type": "string", "minLength": 1, "maxLength": 253},
                            "credentialsName": {
                                "type": "string",
                                "x-kubernetes-validations": [
                                    {"rule": "self.matches('^[A-Za-z0-9._-]+$')", "message": "credentialsName must be a Secret name"}
                                ]
                            },
                            "disableCertificateVerification": {"type": "boolean", "default": false}
                        }
                    },
                    "image": {
                        "type": "object",
                        "required": ["url"],
                        "properties": {
                            "url": {"type": "string", "format": "uri"},
                            "checksum": {"type": "string"},
                            "checksumType": {"type": "string", "enum": ["md5", "sha256", "sha512", "auto"], "default": "auto"},
                            "format": {"type": "string", "enum": ["raw", "qcow2", "live-iso"]}
                        }
                    },
                    "power": {
                        "type": "object",
                        "default": {},
                        "properties": {
                            "policy": {"type": "string", "default": "soft"},
                            "timeoutSeconds": {"type": "integer", "format": "int32", "minimum": 1, "default": 180}
                        }
                    },
                    "rootDeviceHints": {
                        "type": "object",
                        "properties": {
                            "deviceName": {"type": "string"},
                            "minSizeGigabytes": {"type": "integer", "minimum": 0}
                        }
                    },
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "maxItems": 4,
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "x-kubernetes-validations": [
                                {"rule": "!has(oldSelf.mac) || has(self.mac) && self.mac == oldSelf.mac", "message": "mac is immutable"}
                            ],
                            "properties": {
                                "name": {"type": "string"},
                                "mac": {"type": "string", "format": "mac"},
                                "speedGbps": {"type": "integer", "default": 1}
                            }
                        }
                    },
                    "tags": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"}
                    },
                    "annotations": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {
                                "value": {"type": "string"},
                                "priority": {"type": "integer", "default": 10}
                            }
                        }
                    },
                    "userData": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"name": {"type": "string"}}
                    },
                    "consumerRef": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": true,
                        "properties": {
                            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                        }
                    }
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "operationalStatus": {"type": "string", "enum": ["OK", "discovered", "error", "detached"]},
                    "errorCount": {"type": "integer", "minimum": 0},
                    "lastUpdated": {"type": "string", "format": "date-time", "nullable": true},
                    "hardware": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            }
        }
    })
}

fn bmh() -> Schema {
    Schema::compile(&bmh_schema()).expect("BareMetalHost schema compiles")
}

fn host(spec: Value) -> Value {
    json!({
        "apiVersion": "metal.ferrometal.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "worker-0", "namespace": "metal"},
        "spec": spec,
    })
}

/// default → prune → validate, as the server runs them.
fn admit(s: &Schema, mut obj: Value, old: Option<&Value>) -> (Value, Vec<FieldError>) {
    s.default(&mut obj);
    s.prune(&mut obj);
    let errs = s.validate(&obj, old);
    (obj, errs)
}

fn summary(errs: &[FieldError]) -> Vec<(String, Reason)> {
    errs.iter().map(|e| (e.field.clone(), e.reason)).collect()
}

fn valid_spec() -> Value {
    json!({
        "online": true,
        "bootMACAddress": "52:54:00:12:34:56",
        "bmc": {"address": "redfish://192.0.2.10/redfish/v1/Systems/1", "credentialsName": "worker-0-bmc"},
        "image": {"url": "http://images.example/os.qcow2", "checksum": "abc", "format": "qcow2"},
    })
}

#[test]
fn schema_is_shareable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Schema>();
}

#[test]
fn valid_host_passes() {
    let (obj, errs) = admit(&bmh(), host(valid_spec()), None);
    assert_eq!(errs, vec![], "{obj}");
}

#[test]
fn reason_strings() {
    assert_eq!(Reason::FieldValueRequired.as_str(), "FieldValueRequired");
    assert_eq!(
        Reason::FieldValueNotSupported.as_str(),
        "FieldValueNotSupported"
    );
    assert_eq!(Reason::FieldValueTooMany.to_string(), "FieldValueTooMany");
    let e = FieldError::new("spec.online", Reason::FieldValueRequired, "Required value");
    assert_eq!(e.to_string(), "spec.online: Required value");
}

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

// ---------------------------------------------------------------- validation

/// Wraps `field` as `spec.f` of a CRD schema and validates `value` there.
fn check(field: Value, value: Value) -> Vec<FieldError> {
    let s = Schema::compile(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"f": field}}}
    }))
    .unwrap_or_else(|e| panic!("schema {field} does not compile: {e:?}"));
    s.validate(&json!({"spec": {"f": value}}), None)
}

struct Case {
    name: &'static str,
    schema: Value,
    ok: Vec<Value>,
    bad: Value,
    field: &'static str,
    reason: Reason,
    message: Option<&'static str>,
}

fn case(
    name: &'static str,
    schema: Value,
    ok: Vec<Value>,
    bad: Value,
    field: &'static str,
    reason: Reason,
    message: Option<&'static str>,
) -> Case {
    Case {
        name,
        schema,
        ok,
        bad,
        field,
        reason,
        message,
    }
}

#[test]
fn keyword_table() {
    use Reason::*;
    let cases = vec![
        case(
            "type string",
            json!({"type": "string"}),
            vec![json!("x")],
            json!(1),
            "spec.f",
            FieldValueTypeInvalid,
            Some("Invalid value: 1: spec.f in body must be of type string: \"integer\""),
        ),
        case(
            "type integer",
            json!({"type": "integer"}),
            vec![json!(1), json!(-3), json!(2.0)],
            json!(1.5),
            "spec.f",
            FieldValueTypeInvalid,
            Some("Invalid value: 1.5: spec.f in body must be of type integer: \"number\""),
        ),
        case(
            "type number",
            json!({"type": "number"}),
            vec![json!(1), json!(1.5)],
            json!("1"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "type boolean",
            json!({"type": "boolean"}),
            vec![json!(true)],
            json!("true"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "type object",
            json!({"type": "object"}),
            vec![json!({})],
            json!([]),
            "spec.f",
            FieldValueTypeInvalid,
            Some("Invalid value: \"array\": spec.f in body must be of type object: \"array\""),
        ),
        case(
            "type array",
            json!({"type": "array", "items": {"type": "string"}}),
            vec![json!([])],
            json!({}),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "not nullable",
            json!({"type": "string"}),
            vec![],
            json!(null),
            "spec.f",
            FieldValueTypeInvalid,
            Some("Invalid value: null: spec.f in body must be of type string: \"null\""),
        ),
        case(
            "nullable",
            json!({"type": "string", "nullable": true}),
            vec![json!(null), json!("x")],
            json!(1),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "int-or-string",
            json!({"x-kubernetes-int-or-string": true}),
            vec![json!(80), json!("http")],
            json!(1.5),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "required",
            json!({"type": "object", "required": ["address"], "properties": {"address": {"type": "string"}}}),
            vec![json!({"address": "a"})],
            json!({}),
            "spec.f.address",
            FieldValueRequired,
            Some("Required value"),
        ),
        case(
            "enum",
            json!({"type": "string", "enum": ["a", "b"]}),
            vec![json!("a")],
            json!("foo"),
            "spec.f",
            FieldValueNotSupported,
            Some("Unsupported value: \"foo\": supported values: \"a\", \"b\""),
        ),
        case(
            "enum numbers",
            json!({"type": "integer", "enum": [1, 2]}),
            vec![json!(2), json!(2.0)],
            json!(3),
            "spec.f",
            FieldValueNotSupported,
            Some("Unsupported value: 3: supported values: \"1\", \"2\""),
        ),
        case(
            "pattern",
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            vec![json!("abc")],
            json!("ABC"),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: \"ABC\": spec.f in body should match '^[a-z]+$'"),
        ),
        case(
            "minLength counts chars",
            json!({"type": "string", "minLength": 3}),
            vec![json!("äöü")],
            json!("ab"),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: \"ab\": spec.f in body should be at least 3 chars long"),
        ),
        case(
            "maxLength counts chars",
            json!({"type": "string", "maxLength": 3}),
            vec![json!("äöü")],
            json!("abcd"),
            "spec.f",
            FieldValueTooLong,
            Some("Too long: may not be longer than 3"),
        ),
        case(
            "minimum",
            json!({"type": "integer", "minimum": 1}),
            vec![json!(1)],
            json!(0),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 0: spec.f in body should be greater than or equal to 1"),
        ),
        case(
            "exclusiveMinimum",
            json!({"type": "number", "minimum": 1, "exclusiveMinimum": true}),
            vec![json!(1.5)],
            json!(1),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 1: spec.f in body should be greater than 1"),
        ),
        case(
            "maximum",
            json!({"type": "number", "maximum": 2.5}),
            vec![json!(2.5)],
            json!(3),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 3: spec.f in body should be less than or equal to 2.5"),
        ),
        case(
            "exclusiveMaximum",
            json!({"type": "integer", "maximum": 10, "exclusiveMaximum": true}),
            vec![json!(9)],
            json!(10),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 10: spec.f in body should be less than 10"),
        ),
        case(
            "multipleOf",
            json!({"type": "integer", "multipleOf": 512}),
            vec![json!(1024), json!(0)],
            json!(1000),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 1000: spec.f in body should be a multiple of 512"),
        ),
        case(
            "multipleOf float",
            json!({"type": "number", "multipleOf": 0.1}),
            vec![json!(0.3), json!(2)],
            json!(0.25),
            "spec.f",
            FieldValueInvalid,
            None,
        ),
        case(
            "minItems",
            json!({"type": "array", "minItems": 1, "items": {"type": "string"}}),
            vec![json!(["a"])],
            json!([]),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 0: spec.f in body should have at least 1 items"),
        ),
        case(
            "maxItems",
            json!({"type": "array", "maxItems": 1, "items": {"type": "string"}}),
            vec![json!(["a"])],
            json!(["a", "b"]),
            "spec.f",
            FieldValueTooMany,
            Some("Too many: 2: must have at most 1 items"),
        ),
        case(
            "uniqueItems",
            json!({"type": "array", "uniqueItems": true, "items": {"type": "integer"}}),
            vec![json!([1, 2])],
            json!([1, 2, 1]),
            "spec.f[2]",
            FieldValueDuplicate,
            Some("Duplicate value: 1"),
        ),
        case(
            "minProperties",
            json!({"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}}),
            vec![json!({"a": "b"})],
            json!({}),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: 0: spec.f in body should have at least 1 properties"),
        ),
        case(
            "maxProperties",
            json!({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}),
            vec![json!({"a": "b"})],
            json!({"a": "b", "c": "d"}),
            "spec.f",
            FieldValueTooMany,
            Some("Too many: 2: must have at most 1 items"),
        ),
        case(
            "items",
            json!({"type": "array", "items": {"type": "string", "maxLength": 2}}),
            vec![json!(["ab"])],
            json!(["ok", "long"]),
            "spec.f[1]",
            FieldValueTooLong,
            None,
        ),
        case(
            "nested properties",
            json!({"type": "object", "properties": {"bmc": {"type": "object", "properties": {"port": {"type": "integer", "maximum": 65535}}}}}),
            vec![json!({"bmc": {"port": 623}})],
            json!({"bmc": {"port": 70000}}),
            "spec.f.bmc.port",
            FieldValueInvalid,
            None,
        ),
        case(
            "additionalProperties schema",
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            vec![json!({"a": 1})],
            json!({"a": 1, "b": "x"}),
            "spec.f.b",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "additionalProperties false",
            json!({"type": "object", "additionalProperties": false}),
            vec![json!({})],
            json!({"a": 1}),
            "spec.f.a",
            FieldValueForbidden,
            None,
        ),
        case(
            "allOf",
            json!({"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 5}]}),
            vec![json!(3)],
            json!(6),
            "spec.f",
            FieldValueInvalid,
            None,
        ),
        case(
            "anyOf",
            json!({"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "hostname"}]}),
            vec![json!("192.0.2.1"), json!("bmc.example")],
            json!("not a host!"),
            "spec.f",
            FieldValueInvalid,
            Some(
                "Invalid value: \"not a host!\": spec.f in body must validate at least one schema (anyOf)",
            ),
        ),
        case(
            "oneOf",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            vec![json!({"a": "x"}), json!({"b": "y"})],
            json!({"a": "x", "b": "y"}),
            "spec.f",
            FieldValueInvalid,
            None,
        ),
        case(
            "not",
            json!({"type": "string", "not": {"enum": ["reserved"]}}),
            vec![json!("free")],
            json!("reserved"),
            "spec.f",
            FieldValueInvalid,
            Some("Invalid value: \"reserved\": spec.f in body must not validate the schema (not)"),
        ),
        case(
            "list-type set",
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}),
            vec![json!(["a", "b"])],
            json!(["a", "b", "a"]),
            "spec.f[2]",
            FieldValueDuplicate,
            Some("Duplicate value: \"a\""),
        ),
        case(
            "list-type map",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "proto"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "proto": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}}}}),
            vec![json!([{"name": "a", "port": 1}, {"name": "a", "proto": "UDP", "port": 1}])],
            json!([{"name": "a", "port": 1}, {"name": "a", "proto": "TCP", "port": 2}]),
            "spec.f[1]",
            FieldValueDuplicate,
            Some("Duplicate value: {\"name\":\"a\",\"proto\":\"TCP\"}"),
        ),
        case(
            "format date-time",
            json!({"type": "string", "format": "date-time"}),
            vec![json!("2024-05-01T10:00:00Z")],
            json!("yesterday"),
            "spec.f",
            FieldValueTypeInvalid,
            Some(
                "Invalid value: \"yesterday\": spec.f in body must be of type date-time: \"yesterday\"",
            ),
        ),
        case(
            "format date",
            json!({"type": "string", "format": "date"}),
            vec![json!("2024-05-01")],
            json!("2024-05-32"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format int32",
            json!({"type": "integer", "format": "int32"}),
            vec![json!(2147483647)],
            json!(2147483648i64),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format byte",
            json!({"type": "string", "format": "byte"}),
            vec![json!("aGVsbG8=")],
            json!("%%%"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format uuid",
            json!({"type": "string", "format": "uuid"}),
            vec![json!("123e4567-e89b-12d3-a456-426614174000")],
            json!("123"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format hostname",
            json!({"type": "string", "format": "hostname"}),
            vec![json!("bmc-0.example")],
            json!("bmc_0"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format ipv4",
            json!({"type": "string", "format": "ipv4"}),
            vec![json!("192.0.2.1")],
            json!("192.0.2"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format ipv6",
            json!({"type": "string", "format": "ipv6"}),
            vec![json!("fe80::1")],
            json!("fe80:::1"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format cidr",
            json!({"type": "string", "format": "cidr"}),
            vec![json!("192.0.2.0/24")],
            json!("192.0.2.0/33"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format uri",
            json!({"type": "string", "format": "uri"}),
            vec![json!("https://bmc/redfish")],
            json!("bmc host"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format mac",
            json!({"type": "string", "format": "mac"}),
            vec![json!("52:54:00:aa:bb:cc")],
            json!("52:54:00"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
        case(
            "format duration",
            json!({"type": "string", "format": "duration"}),
            vec![json!("90s"), json!("1h2m")],
            json!("soon"),
            "spec.f",
            FieldValueTypeInvalid,
            None,
        ),
    ];
    for c in cases {
        for ok in &c.ok {
            let errs = check(c.schema.clone(), ok.clone());
            assert_eq!(errs, vec![], "{}: {ok} should be accepted", c.name);
        }
        let errs = check(c.schema.clone(), c.bad.clone());
        assert!(
            errs.iter()
                .any(|e| e.field == c.field && e.reason == c.reason),
            "{}: {} should fail at {} with {:?}, got {errs:#?}",
            c.name,
            c.bad,
            c.field,
            c.reason
        );
        if let Some(m) = c.message {
            assert!(
                errs.iter().any(|e| e.field == c.field && e.message == m),
                "{}: expected message {m:?}, got {errs:#?}",
                c.name
            );
        }
    }
}

#[test]
fn map_keys_render_in_openapi_paths_and_cel_paths() {
    let s = Schema::compile(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"labels": {
            "type": "object",
            "additionalProperties": {
                "type": "string",
                "maxLength": 3,
                "x-kubernetes-validations": [{"rule": "self != 'bad'"}]
            }
        }}}}
    }))
    .unwrap();
    let errs = s.validate(
        &json!({"spec": {"labels": {"env": "toolong", "x": "bad"}}}),
        None,
    );
    assert_eq!(
        summary(&errs),
        vec![
            ("spec.labels.env".into(), Reason::FieldValueTooLong),
            ("spec.labels[x]".into(), Reason::FieldValueInvalid),
        ]
    );
    assert_eq!(
        errs[1].message,
        "Invalid value: \"string\": failed rule: self != 'bad'"
    );
}

#[test]
fn bmh_openapi_errors() {
    let s = bmh();
    let obj = host(json!({
        "bootMode": "BIOS",
        "bmc": {"address": ""},
        "image": {"url": "http://x/os.img", "checksum": "a"},
        "power": {"timeoutSeconds": 0},
        "ports": [{"name": "a", "mac": "nope"}, {"name": "a"}],
        "tags": ["x", "x"],
    }));
    let (_, errs) = admit(&s, obj, None);
    assert_eq!(
        summary(&errs),
        vec![
            ("spec.online".into(), Reason::FieldValueRequired),
            (
                "spec.bmc.credentialsName".into(),
                Reason::FieldValueRequired
            ),
            ("spec.bmc.address".into(), Reason::FieldValueInvalid),
            ("spec.bootMode".into(), Reason::FieldValueNotSupported),
            ("spec.ports[0].mac".into(), Reason::FieldValueTypeInvalid),
            ("spec.ports[1]".into(), Reason::FieldValueDuplicate),
            (
                "spec.power.timeoutSeconds".into(),
                Reason::FieldValueInvalid
            ),
            ("spec.tags[1]".into(), Reason::FieldValueDuplicate),
        ]
    );
    assert_eq!(
        errs[3].message,
        "Unsupported value: \"BIOS\": supported values: \"UEFI\", \"UEFISecureBoot\", \"legacy\""
    );
}

#[test]
fn root_metadata_is_left_to_the_server() {
    let s = Schema::compile(&json!({
        "type": "object",
        "required": ["metadata", "spec"],
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
            "spec": {"type": "object"}
        }
    }))
    .unwrap();
    let errs = s.validate(&json!({"metadata": {"name": "a-long-name"}}), None);
    assert_eq!(
        summary(&errs),
        vec![("spec".into(), Reason::FieldValueRequired)]
    );
}

// ----------------------------------------------------------------- CEL rules

#[test]
fn cel_rules_on_create() {
    let s = bmh();
    // transition rules do not run without an old object
    let mut spec = valid_spec();
    spec["externallyProvisioned"] = json!(false);
    let (_, errs) = admit(&s, host(spec), None);
    assert_eq!(errs, vec![]);

    let mut spec = valid_spec();
    spec["bmc"]["credentialsName"] = json!("bad name!");
    spec["image"] = json!({"url": "http://x/os.qcow2", "format": "qcow2"});
    let (_, errs) = admit(&s, host(spec), None);
    assert_eq!(
        errs,
        vec![
            FieldError::new(
                "spec.image",
                Reason::FieldValueInvalid,
                "Invalid value: \"object\": image.checksum is required unless image.format is live-iso"
            ),
            FieldError::new(
                "spec.bmc.credentialsName",
                Reason::FieldValueInvalid,
                "Invalid value: \"string\": credentialsName must be a Secret name"
            ),
        ]
    );

    // live-iso needs no checksum
    let mut spec = valid_spec();
    spec["image"] = json!({"url": "http://x/live.iso", "format": "live-iso"});
    let (_, errs) = admit(&s, host(spec), None);
    assert_eq!(errs, vec![]);
}

#[test]
fn cel_transition_rules_on_update() {
    let s = bmh();
    let (old, errs) = admit(&s, host(valid_spec()), None);
    assert_eq!(errs, vec![]);

    // unchanged: fine
    let (_, errs) = admit(&s, host(valid_spec()), Some(&old));
    assert_eq!(errs, vec![]);

    // changing a set bootMACAddress is refused
    let mut spec = valid_spec();
    spec["bootMACAddress"] = json!("52:54:00:00:00:01");
    let (_, errs) = admit(&s, host(spec), Some(&old));
    assert_eq!(
        errs,
        vec![FieldError::new(
            "spec",
            Reason::FieldValueInvalid,
            "Invalid value: \"object\": bootMACAddress can not be changed once it is set"
        )]
    );

    // setting it when it was empty is allowed
    let mut empty = valid_spec();
    empty.as_object_mut().unwrap().remove("bootMACAddress");
    let (old_empty, errs) = admit(&s, host(empty), None);
    assert_eq!(errs, vec![]);
    assert_eq!(old_empty["spec"]["bootMACAddress"], "");
    let (_, errs) = admit(&s, host(valid_spec()), Some(&old_empty));
    assert_eq!(errs, vec![]);

    // oldSelf == false || self == true
    let mut provisioned = valid_spec();
    provisioned["externallyProvisioned"] = json!(true);
    let (old_prov, _) = admit(&s, host(provisioned.clone()), None);
    let mut unset = valid_spec();
    unset["externallyProvisioned"] = json!(false);
    let (_, errs) = admit(&s, host(unset.clone()), Some(&old_prov));
    assert_eq!(
        summary(&errs),
        vec![(
            "spec.externallyProvisioned".into(),
            Reason::FieldValueInvalid
        )]
    );
    assert_eq!(
        errs[0].message,
        "Invalid value: \"boolean\": externallyProvisioned can not be unset"
    );
    let (old_unset, _) = admit(&s, host(unset), None);
    let (_, errs) = admit(&s, host(provisioned), Some(&old_unset));
    assert_eq!(errs, vec![]);
}

#[test]
fn cel_transition_rules_in_map_lists_correlate_by_key() {
    let s = bmh();
    let mut spec = valid_spec();
    spec["ports"] = json!([{"name": "eno1", "mac": "52:54:00:00:00:01"}, {"name": "eno2", "mac": "52:54:00:00:00:02"}]);
    let (old, errs) = admit(&s, host(spec), None);
    assert_eq!(errs, vec![]);

    // reordered, one changed, one new: only the changed one is reported
    let mut spec = valid_spec();
    spec["ports"] = json!([
        {"name": "eno3", "mac": "52:54:00:00:00:03"},
        {"name": "eno2", "mac": "52:54:00:00:00:02"},
        {"name": "eno1", "mac": "52:54:00:00:00:09"}
    ]);
    let (_, errs) = admit(&s, host(spec), Some(&old));
    assert_eq!(
        errs,
        vec![FieldError::new(
            "spec.ports[2]",
            Reason::FieldValueInvalid,
            "Invalid value: \"object\": mac is immutable"
        )]
    );
}

fn rule_schema(rules: Value) -> Schema {
    // `items` is bounded: kube-apiserver (and so Schema::compile) refuses
    // `map` or `min` over a list as long as a request allows.
    Schema::compile(&json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {
                "replicas": {"type": "integer"},
                "minReplicas": {"type": "integer"},
                "ratio": {"type": "number"},
                "name": {"type": "string"},
                "items": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}},
                "selector": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        }}
    }))
    .unwrap_or_else(|e| panic!("{e:#?}"))
}

#[test]
fn cel_rule_table() {
    let spec = json!({
        "replicas": 3,
        "minReplicas": 1,
        "ratio": 1,
        "name": "worker-0",
        "items": ["a", "bb", "ccc"],
        "selector": {"role": "worker"}
    });
    let passing = [
        "self.replicas >= self.minReplicas",
        "self.ratio == 1.0",
        "self.name.startsWith('worker') && self.name.endsWith('-0') && self.name.contains('ker')",
        "self.name.matches('^[a-z]+-[0-9]+$')",
        "size(self.items) == 3 && self.items.size() == 3",
        "self.items.all(i, size(i) > 0)",
        "self.items.exists(i, i == 'bb')",
        "self.items.exists_one(i, i.startsWith('c'))",
        "self.items.map(i, size(i)) == [1, 2, 3]",
        "self.items.filter(i, size(i) > 1) == ['bb', 'ccc']",
        "'a' in self.items",
        "'role' in self.selector && self.selector.role == 'worker'",
        "has(self.selector) && has(self.name) && !has(self.selector.zone)",
        "self.name.lowerAscii() == 'worker-0'",
        "self.name.split('-') == ['worker', '0']",
    ];
    for rule in passing {
        let s = rule_schema(json!([{"rule": rule}]));
        let errs = s.validate(&json!({"spec": spec}), None);
        assert_eq!(errs, vec![], "{rule}");
    }
    let failing = [
        "self.replicas < self.minReplicas",
        "self.items.all(i, size(i) == 1)",
        "self.name.matches('^[0-9]+$')",
    ];
    for rule in failing {
        let s = rule_schema(json!([{"rule": rule}]));
        let errs = s.validate(&json!({"spec": spec}), None);
        assert_eq!(
            errs,
            vec![FieldError::new(
                "spec",
                Reason::FieldValueInvalid,
                format!("Invalid value: \"object\": failed rule: {rule}")
            )],
            "{rule}"
        );
    }
}

#[test]
fn cel_messages_field_paths_and_reasons() {
    let s = rule_schema(json!([
        {"rule": "self.replicas >= self.minReplicas", "message": "replicas must not be below minReplicas", "fieldPath": ".replicas"},
        {"rule": "!has(self.name) || self.name != 'forbidden'", "reason": "FieldValueForbidden", "message": "name is reserved", "fieldPath": "['name']"},
        {"rule": "has(self.name)", "reason": "FieldValueRequired", "messageExpression": "'name is required with ' + string(self.replicas) + ' replicas'"},
        {"rule": "self.replicas < 100", "messageExpression": "42", "message": "fallback message"}
    ]));
    let errs = s.validate(
        &json!({"spec": {"replicas": 100, "minReplicas": 101, "name": "forbidden"}}),
        None,
    );
    assert_eq!(
        errs,
        vec![
            FieldError::new(
                "spec.replicas",
                Reason::FieldValueInvalid,
                "Invalid value: \"object\": replicas must not be below minReplicas"
            ),
            FieldError::new(
                "spec.name",
                Reason::FieldValueForbidden,
                "Forbidden: name is reserved"
            ),
            FieldError::new(
                "spec",
                Reason::FieldValueInvalid,
                "Invalid value: \"object\": fallback message"
            ),
        ]
    );
    let errs = s.validate(&json!({"spec": {"replicas": 5, "minReplicas": 1}}), None);
    assert_eq!(
        errs,
        vec![FieldError::new(
            "spec",
            Reason::FieldValueRequired,
            "Required value: name is required with 5 replicas"
        )]
    );
}

#[test]
fn cel_evaluation_errors_are_reported() {
    let s = bmh();
    let mut spec = valid_spec();
    // neither checksum nor format: `self.image.format` has no such key
    spec["image"] = json!({"url": "http://x/os.img"});
    let (_, errs) = admit(&s, host(spec), None);
    assert_eq!(
        summary(&errs),
        vec![("spec".into(), Reason::FieldValueInvalid)]
    );
    assert!(
        errs[0].message.starts_with("Invalid value: \"object\": ")
            && errs[0].message.contains("no such key: format")
            && errs[0]
                .message
                .ends_with("evaluating rule: !has(self.image) || has(self.image.checksum) || self.image.format == 'live-iso'"),
        "{}",
        errs[0].message
    );

    let s = rule_schema(json!([
        {"rule": "self.replicas / 0 == 1"},
        {"rule": "self.name"},
        {"rule": "self.name > 1"},
        {"rule": "self.items[5] == 'x'"}
    ]));
    let errs = s.validate(
        &json!({"spec": {"replicas": 1, "name": "x", "items": []}}),
        None,
    );
    let messages: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        vec![
            "Invalid value: \"object\": division by zero evaluating rule: self.replicas / 0 == 1",
            "Invalid value: \"object\": rule did not evaluate to a bool but to \"string\": self.name",
            "Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.name > 1",
            "Invalid value: \"object\": index out of bounds: 5 evaluating rule: self.items[5] == 'x'",
        ]
    );
}

#[test]
fn cel_number_fields_are_doubles_and_integers_ints() {
    let s = rule_schema(json!([
        {"rule": "self.ratio > 0.5"},
        {"rule": "self.replicas + 1 == 4"},
        {"rule": "type(self.replicas) == int && type(self.ratio) == double"}
    ]));
    let errs = s.validate(&json!({"spec": {"ratio": 2, "replicas": 3}}), None);
    assert_eq!(errs, vec![]);
}

#[test]
fn cel_optional_old_self() {
    let s = rule_schema(json!([{
        "rule": "!oldSelf.hasValue() || self.replicas >= oldSelf.value().replicas",
        "optionalOldSelf": true,
        "message": "replicas may only grow"
    }]));
    // runs on create too, with oldSelf empty
    assert_eq!(s.validate(&json!({"spec": {"replicas": 1}}), None), vec![]);
    let old = json!({"spec": {"replicas": 3}});
    assert_eq!(
        s.validate(&json!({"spec": {"replicas": 4}}), Some(&old)),
        vec![]
    );
    assert_eq!(
        summary(&s.validate(&json!({"spec": {"replicas": 2}}), Some(&old))),
        vec![("spec".into(), Reason::FieldValueInvalid)]
    );
}

#[test]
fn transition_rule_skipped_when_old_lacks_the_value() {
    let s = rule_schema(json!([{"rule": "self.replicas >= oldSelf.replicas"}]));
    // old object has no spec: no oldSelf, so the rule does not run
    let old = json!({"metadata": {"name": "x"}});
    assert_eq!(
        s.validate(&json!({"spec": {"replicas": 1}}), Some(&old)),
        vec![]
    );
    let old = json!({"spec": {"replicas": 3}});
    assert_eq!(
        summary(&s.validate(&json!({"spec": {"replicas": 1}}), Some(&old))),
        vec![("spec".into(), Reason::FieldValueInvalid)]
    );
}

// --------------------------------------------------------- compile rejection

fn compile_errors(schema: Value) -> Vec<(String, Reason)> {
    match Schema::compile(&schema) {
        Ok(_) => panic!("{schema} should not compile"),
        Err(errs) => summary(&errs),
    }
}

fn in_spec(field: Value) -> Value {
    json!({"type": "object", "properties": {"spec": field}})
}

#[test]
fn rule_that_fails_to_parse_is_rejected() {
    let schema = in_spec(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.replicas > 1"},
            {"rule": "self.replicas >"}
        ]
    }));
    let errs = Schema::compile(&schema).unwrap_err();
    assert_eq!(
        summary(&errs),
        vec![(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule"
                .into(),
            Reason::FieldValueInvalid
        )]
    );
    assert!(
        errs[0]
            .message
            .starts_with("Invalid value: \"self.replicas >\": compilation failed: "),
        "{}",
        errs[0].message
    );
}

#[test]
fn compile_errors_carry_the_schema_prefix() {
    let errs = Schema::compile(&in_spec(json!({"type": "array"}))).unwrap_err();
    let rel = errs[0].field.strip_prefix(crate::SCHEMA_FIELD_PREFIX);
    assert_eq!(rel, Some(".properties[spec].items"));
}

#[test]
fn compile_rejections_table() {
    use Reason::*;
    let root = "spec.validation.openAPIV3Schema";
    let spec = "spec.validation.openAPIV3Schema.properties[spec]";
    let cases: Vec<(Value, String, Reason)> = vec![
        (
            json!({"type": "string"}),
            format!("{root}.type"),
            FieldValueInvalid,
        ),
        (
            json!({"properties": {}}),
            format!("{root}.type"),
            FieldValueRequired,
        ),
        (
            in_spec(json!({"properties": {}})),
            format!("{spec}.type"),
            FieldValueRequired,
        ),
        (
            in_spec(json!({"type": "thing"})),
            format!("{spec}.type"),
            FieldValueNotSupported,
        ),
        (
            in_spec(json!({"type": "array"})),
            format!("{spec}.items"),
            FieldValueRequired,
        ),
        (
            in_spec(json!({"type": "array", "items": {}})),
            format!("{spec}.items.type"),
            FieldValueRequired,
        ),
        (
            in_spec(json!({"type": "string", "pattern": "(["})),
            format!("{spec}.pattern"),
            FieldValueInvalid,
        ),
        (
            in_spec(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            ),
            format!("{spec}.additionalProperties"),
            FieldValueForbidden,
        ),
        (
            in_spec(
                json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}),
            ),
            format!("{spec}.x-kubernetes-list-type"),
            FieldValueNotSupported,
        ),
        (
            in_spec(
                json!({"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"}),
            ),
            format!("{spec}.x-kubernetes-list-map-keys"),
            FieldValueRequired,
        ),
        (
            in_spec(
                json!({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["b"]}),
            ),
            format!("{spec}.x-kubernetes-list-map-keys[0]"),
            FieldValueInvalid,
        ),
        (
            in_spec(json!({"type": "string", "allOf": [{"type": "string"}]})),
            format!("{spec}.allOf[0].type"),
            FieldValueForbidden,
        ),
        (
            in_spec(
                json!({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"]}),
            ),
            format!("{spec}.x-kubernetes-list-map-keys[0]"),
            FieldValueInvalid,
        ),
        (
            in_spec(
                json!({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}}),
            ),
            format!("{spec}.items.x-kubernetes-validations[0].rule"),
            FieldValueInvalid,
        ),
        (
            in_spec(
                json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "atomic",
                "items": {"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}}}),
            ),
            format!("{spec}.properties[l].items.properties[o].x-kubernetes-validations[0].rule"),
            FieldValueInvalid,
        ),
        (
            in_spec(json!({"type": "string", "$ref": "#/definitions/x"})),
            format!("{spec}.$ref"),
            FieldValueForbidden,
        ),
        (
            in_spec(json!({"type": "integer", "default": "three"})),
            format!("{spec}.default"),
            FieldValueTypeInvalid,
        ),
        (
            in_spec(
                json!({"type": "object", "default": {"a": 1}, "properties": {"b": {"type": "integer"}}}),
            ),
            format!("{spec}.default"),
            FieldValueInvalid,
        ),
        (
            in_spec(
                json!({"type": "string", "x-kubernetes-validations": [{"rule": "self == 'a'", "reason": "Nope"}]}),
            ),
            format!("{spec}.x-kubernetes-validations[0].reason"),
            FieldValueNotSupported,
        ),
        (
            in_spec(
                json!({"type": "object", "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".nope"}]}),
            ),
            format!("{spec}.x-kubernetes-validations[0].fieldPath"),
            FieldValueInvalid,
        ),
        (
            in_spec(json!({"type": "object", "x-kubernetes-validations": [{"rule": "  "}]})),
            format!("{spec}.x-kubernetes-validations[0].rule"),
            FieldValueRequired,
        ),
        (
            in_spec(
                json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a", "messageExpression": "'x' +"}]}),
            ),
            format!("{spec}.x-kubernetes-validations[0].messageExpression"),
            FieldValueInvalid,
        ),
        (
            in_spec(
                json!({"type": "object", "x-kubernetes-validations": [{"rule": "true", "optionalOldSelf": true}]}),
            ),
            format!("{spec}.x-kubernetes-validations[0].optionalOldSelf"),
            FieldValueForbidden,
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            format!("{root}.properties[metadata]"),
            FieldValueForbidden,
        ),
        (
            in_spec(json!("not a schema")),
            spec.to_string(),
            FieldValueTypeInvalid,
        ),
    ];
    for (schema, field, reason) in cases {
        let errs = compile_errors(schema.clone());
        assert!(
            errs.contains(&(field.clone(), reason)),
            "{schema}: expected {field} {reason:?}, got {errs:#?}"
        );
    }
}

#[test]
fn nested_defaults_are_checked_at_compile() {
    let errs = compile_errors(in_spec(json!({
        "type": "object",
        "properties": {"port": {"type": "integer", "maximum": 10, "default": 11}}
    })));
    assert_eq!(
        errs,
        vec![(
            "spec.validation.openAPIV3Schema.properties[spec].properties[port].default".into(),
            Reason::FieldValueInvalid
        )]
    );
}

#[test]
fn deep_values_do_not_overflow() {
    let s = Schema::compile(&json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{"rule": "size(self) >= 0"}]
    }))
    .unwrap();
    let mut v = json!(1);
    for _ in 0..2000 {
        let mut m = serde_json::Map::new();
        m.insert("a".into(), Value::Array(vec![v]));
        v = Value::Object(m);
    }
    let mut root = serde_json::Map::new();
    root.insert("deep".into(), v);
    let mut obj = Value::Object(root);
    s.default(&mut obj);
    s.prune(&mut obj);
    let _ = s.validate(&obj, Some(&obj));
    // Dropping a 4000-level serde_json value recurses; leak it instead of
    // overflowing the test thread's stack.
    std::mem::forget(obj);
}

/// A small deterministic generator, so the robustness tests need no
/// extra dependency and always see the same inputs.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() as usize) % items.len()]
    }

    fn string(&mut self) -> String {
        let alphabet = [
            "a",
            "Z",
            "0",
            "9",
            ":",
            "-",
            ".",
            "/",
            "T",
            "Z",
            "+",
            "é",
            "µ",
            "💥",
            " ",
            "[",
            "'",
            "2024-01-01",
            "T12:00:00",
            "52:54:00",
            "::",
            "=",
        ];
        let len = self.next() % 8;
        (0..len).map(|_| *self.pick(&alphabet)).collect()
    }

    fn value(&mut self, depth: u32) -> Value {
        match self.next() % if depth > 4 { 5 } else { 7 } {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64 - (1 << 30)),
            3 => json!((self.next() as f64) / 7.0),
            4 => json!(self.string()),
            5 => Value::Array(
                (0..self.next() % 4)
                    .map(|_| self.value(depth + 1))
                    .collect(),
            ),
            _ => {
                let keys = [
                    "spec",
                    "status",
                    "online",
                    "bmc",
                    "address",
                    "ports",
                    "name",
                    "mac",
                    "image",
                    "format",
                    "checksum",
                    "tags",
                    "annotations",
                    "consumerRef",
                    "apiVersion",
                    "kind",
                    "metadata",
                    "externallyProvisioned",
                    "power",
                    "bootMACAddress",
                ];
                let mut m = serde_json::Map::new();
                for _ in 0..self.next() % 6 {
                    m.insert(self.pick(&keys).to_string(), self.value(depth + 1));
                }
                Value::Object(m)
            }
        }
    }
}

#[test]
fn formats_never_panic() {
    let mut rng = Lcg(7);
    let formats = [
        "date-time",
        "date",
        "byte",
        "uuid",
        "uuid4",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "uri",
        "mac",
        "duration",
        "email",
    ];
    for _ in 0..20_000 {
        let s = rng.string();
        for f in formats {
            let _ = crate::formats::check_string(f, &s);
        }
    }
}

#[test]
fn arbitrary_json_never_panics() {
    let s = bmh();
    let mut rng = Lcg(42);
    for _ in 0..3_000 {
        let mut obj = rng.value(0);
        if rng.next().is_multiple_of(2) {
            obj = host(rng.value(1));
        }
        let old = rng.value(0);
        let mut defaulted = obj.clone();
        s.default(&mut defaulted);
        s.prune(&mut defaulted);
        let _ = s.validate(&defaulted, Some(&old));
        let _ = s.validate(&obj, None);
    }
}

#[test]
fn arbitrary_schemas_never_panic() {
    let mut rng = Lcg(3);
    for _ in 0..3_000 {
        let schema = rng.value(0);
        if let Ok(s) = Schema::compile(&schema) {
            let mut v = rng.value(0);
            s.default(&mut v);
            s.prune(&mut v);
            let _ = s.validate(&v, None);
        }
    }
}

fn mutate(v: &mut Value, rng: &mut Lcg) {
    if rng.next().is_multiple_of(12) {
        *v = rng.value(3);
        return;
    }
    match v {
        Value::Object(m) => {
            if rng.next().is_multiple_of(10) && !m.is_empty() {
                let keys: Vec<String> = m.keys().cloned().collect();
                m.remove(rng.pick(&keys));
            }
            for child in m.values_mut() {
                mutate(child, rng);
            }
        }
        Value::Array(items) => {
            for child in items.iter_mut() {
                mutate(child, rng);
            }
        }
        _ => {}
    }
}

#[test]
fn mutated_schemas_never_panic() {
    let mut rng = Lcg(99);
    let mut compiled = 0;
    for _ in 0..400 {
        let mut schema = bmh_schema();
        mutate(&mut schema, &mut rng);
        match Schema::compile(&schema) {
            Ok(s) => {
                compiled += 1;
                let mut v = host(valid_spec());
                mutate(&mut v, &mut rng);
                let old = v.clone();
                s.default(&mut v);
                s.prune(&mut v);
                let _ = s.validate(&v, Some(&old));
            }
            Err(errs) => assert!(!errs.is_empty()),
        }
    }
    assert!(compiled > 0);
}

#[test]
fn cel_kubernetes_library_functions() {
    let s = Schema::compile(&in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.nums.isSorted() && !self.names.isSorted()"},
            {"rule": "self.nums.sum() == 6 && self.ratios.sum() == 1.5 && [].sum() == 0"},
            {"rule": "self.nums.min() == 1 && self.nums.max() == 3 && self.names.max() == 'c'"},
            {"rule": "min(4, 2, 8) == 2 && max([4, 2, 8]) == 8"},
            {"rule": "self.url.find('[0-9]+') == '192' && self.url.findAll('[0-9]+') == ['192', '0', '2', '10']"},
            {"rule": "self.url.findAll('[0-9]+', 2) == ['192', '0'] && self.url.find('x{3}') == ''"},
            {"rule": "isURL(self.url) && !isURL('not a url')"}
        ],
        "properties": {
            "nums": {"type": "array", "items": {"type": "integer"}},
            "names": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}},
            "ratios": {"type": "array", "items": {"type": "number"}},
            "url": {"type": "string"}
        }
    })))
    .unwrap();
    let obj = json!({"spec": {
        "nums": [1, 2, 3],
        "names": ["c", "a"],
        "ratios": [1, 0.5],
        "url": "https://192.0.2.10/redfish"
    }});
    assert_eq!(s.validate(&obj, None), vec![]);

    let s = rule_schema(json!([{"rule": "self.items.min() == ''"}]));
    let errs = s.validate(&json!({"spec": {"items": []}}), None);
    assert_eq!(
        summary(&errs),
        vec![("spec".into(), Reason::FieldValueInvalid)]
    );
    assert!(
        errs[0].message.contains("min called on empty list"),
        "{}",
        errs[0].message
    );
}

#[test]
fn cel_sees_formatted_strings_as_timestamps_durations_and_bytes() {
    let s = Schema::compile(&in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.notAfter > self.notBefore", "message": "notAfter must be after notBefore"},
            {"rule": "self.timeout <= duration('1h')"},
            {"rule": "self.day == timestamp('2024-05-01T00:00:00Z')"},
            {"rule": "size(self.key) == 5"}
        ],
        "properties": {
            "notBefore": {"type": "string", "format": "date-time"},
            "notAfter": {"type": "string", "format": "date-time"},
            "timeout": {"type": "string", "format": "duration"},
            "day": {"type": "string", "format": "date"},
            "key": {"type": "string", "format": "byte"}
        }
    })))
    .unwrap();
    let mut spec = json!({
        "notBefore": "2024-05-01T10:00:00Z",
        "notAfter": "2024-05-01T12:00:00+01:00",
        "timeout": "90m",
        "day": "2024-05-01",
        "key": "aGVsbG8="
    });
    let errs = s.validate(&json!({"spec": spec}), None);
    assert_eq!(
        errs,
        vec![FieldError::new(
            "spec",
            Reason::FieldValueInvalid,
            "Invalid value: \"object\": failed rule: self.timeout <= duration('1h')"
        )]
    );
    spec["timeout"] = json!("45m");
    spec["notAfter"] = json!("2024-05-01T10:30:00+01:00");
    let errs = s.validate(&json!({"spec": spec}), None);
    assert_eq!(
        errs,
        vec![FieldError::new(
            "spec",
            Reason::FieldValueInvalid,
            "Invalid value: \"object\": notAfter must be after notBefore"
        )]
    );
}

#[test]
fn cel_root_metadata_shows_name_and_generate_name_only() {
    let s = Schema::compile(&json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('worker-')"},
            {"rule": "!has(self.metadata.namespace) && !has(self.metadata.labels)"},
            {"rule": "self.spec.size <= 3"}
        ],
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}
    }))
    .unwrap();
    let obj = json!({
        "metadata": {"name": "worker-1", "namespace": "metal", "labels": {"a": "b"}},
        "spec": {"size": 3}
    });
    assert_eq!(s.validate(&obj, None), vec![]);
    let obj = json!({"metadata": {"name": "db-1"}, "spec": {"size": 4}});
    assert_eq!(
        summary(&s.validate(&obj, None)),
        vec![
            ("".into(), Reason::FieldValueInvalid),
            ("".into(), Reason::FieldValueInvalid)
        ]
    );
}

#[test]
fn rules_selecting_undeclared_fields_are_rejected() {
    let spec = "spec.validation.openAPIV3Schema.properties[spec]";
    let bad = [
        "self.replcias > 0",
        "has(self.nmae)",
        "self.items.all(i, i.size() > 0) && self.ports.all(p, p.prot == 'TCP')",
        "self.ports[0].nmae == 'a'",
        "oldSelf.replcias == self.replicas",
    ];
    for rule in bad {
        let errs = compile_errors(in_spec(json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": rule}],
            "properties": {
                "replicas": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "string"}},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "proto": {"type": "string"}}}}
            }
        })));
        assert_eq!(
            errs,
            vec![(
                format!("{spec}.x-kubernetes-validations[0].rule"),
                Reason::FieldValueInvalid
            )],
            "{rule}"
        );
    }
    let good = [
        "self.apiVersion != '' && self.kind != '' && self.metadata.name != ''",
        "self.spec.labels.anything == 'x' || self.spec.free.whatever.deeper == 1",
        "self.spec.labels.all(k, self.spec.labels[k].size() > 0)",
        "self.spec.ref.apiVersion == 'v1' && self.spec.ref.metadata.name != ''",
        "[1, 2].all(x, x > 0) && {'a': 1}.a == 1",
    ];
    for rule in good {
        let schema = json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"spec": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "ref": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
            }}}
        });
        if let Err(e) = Schema::compile(&schema) {
            panic!("{rule}: {e:#?}");
        }
    }
    let errs = Schema::compile(&in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.replcias > 0"}],
        "properties": {"replicas": {"type": "integer"}}
    })))
    .unwrap_err();
    assert_eq!(
        errs[0].message,
        "Invalid value: \"self.replcias > 0\": compilation failed: undefined field 'replcias'"
    );
}

#[test]
fn updates_ratchet_over_unchanged_invalid_values() {
    // Stored while the schema was looser: bootMode was free-form, the BMC
    // credentials name unchecked, and port MACs unformatted.
    let s = bmh();
    let mut stored = host(valid_spec());
    stored["spec"]["bootMode"] = json!("BIOS");
    stored["spec"]["bmc"]["credentialsName"] = json!("bad name!");
    stored["spec"]["ports"] =
        json!([{"name": "a", "speedGbps": 1}, {"name": "b", "mac": "nope", "speedGbps": 1}]);
    s.default(&mut stored);
    assert_eq!(s.validate(&stored, None).len(), 3);

    // An update that touches none of them is accepted.
    let mut update = stored.clone();
    update["spec"]["online"] = json!(false);
    let (_, errs) = admit(&s, update.clone(), Some(&stored));
    assert_eq!(errs, vec![]);

    // Touching one of them holds it to the schema again; the rest still ratchet.
    update["spec"]["bootMode"] = json!("BIOS2");
    update["spec"]["bmc"]["credentialsName"] = json!("still bad!");
    let (_, errs) = admit(&s, update.clone(), Some(&stored));
    assert_eq!(
        summary(&errs),
        vec![
            ("spec.bootMode".into(), Reason::FieldValueNotSupported),
            ("spec.bmc.credentialsName".into(), Reason::FieldValueInvalid),
        ]
    );

    // Map-list items correlate by key, so reordering keeps ratcheting, and
    // ratcheting is per value: a sibling's change does not re-check `mac`.
    let mut update = stored.clone();
    update["spec"]["ports"] = json!([
        {"name": "b", "mac": "nope", "speedGbps": 10},
        {"name": "a", "speedGbps": 1}
    ]);
    let (_, errs) = admit(&s, update.clone(), Some(&stored));
    assert_eq!(errs, vec![]);
    update["spec"]["ports"][0]["mac"] = json!("still nope");
    let (_, errs) = admit(&s, update, Some(&stored));
    assert_eq!(
        summary(&errs),
        vec![
            ("spec.ports[0].mac".into(), Reason::FieldValueTypeInvalid),
            // and the port's transition rule sees the MAC change
            ("spec.ports[0]".into(), Reason::FieldValueInvalid),
        ]
    );

    // Without an old object nothing ratchets.
    let (_, errs) = admit(&s, stored.clone(), None);
    assert_eq!(errs.len(), 3);
}

#[test]
fn deep_rules_are_refused_or_evaluated_without_overflow() {
    // The longest chain accepted still evaluates.
    let chain = vec!["1"; 249].join(" + ");
    let s = Schema::compile(&in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": format!("{chain} == 249")}]
    })))
    .unwrap();
    assert_eq!(s.validate(&json!({"spec": {}}), None), vec![]);

    for (n, ok) in [(90usize, true), (300, false), (20_000, false)] {
        let chain = vec!["1"; n].join(" + ");
        let parens = format!("{}1{} > 0", "(".repeat(n), ")".repeat(n));
        for rule in [format!("{chain} > 0"), parens] {
            let compiled = Schema::compile(&in_spec(json!({
                "type": "object",
                "x-kubernetes-validations": [{"rule": rule}]
            })));
            match compiled {
                Ok(s) => {
                    assert!(ok, "{n}-deep rule should be refused");
                    assert_eq!(s.validate(&json!({"spec": {}}), None), vec![]);
                }
                Err(errs) => {
                    assert!(!ok, "{n}-deep rule should compile: {errs:?}");
                    assert!(
                        errs[0].message.contains("max recursion depth exceeded"),
                        "{}",
                        errs[0].message
                    );
                }
            }
        }
    }
}
