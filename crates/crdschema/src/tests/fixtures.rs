//! What the tests share: a BareMetalHost-like schema and objects, the
//! server's admission steps, and shorthands for schemas and errors.

use serde_json::{Value, json};

use crate::error::{FieldError, Reason};
use crate::schema::Schema;

/// A subset of ferrometal's BareMetalHost schema, shaped like the real CRD.
pub(super) fn bmh_schema() -> Value {
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

pub(super) fn bmh() -> Schema {
    Schema::compile(&bmh_schema()).expect("BareMetalHost schema compiles")
}

pub(super) fn host(spec: Value) -> Value {
    json!({
        "apiVersion": "metal.ferrometal.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "worker-0", "namespace": "metal"},
        "spec": spec,
    })
}

/// default → prune → validate, as the server runs them.
pub(super) fn admit(s: &Schema, mut obj: Value, old: Option<&Value>) -> (Value, Vec<FieldError>) {
    s.default(&mut obj);
    s.prune(&mut obj);
    let errs = s.validate(&obj, old);
    (obj, errs)
}

pub(super) fn summary(errs: &[FieldError]) -> Vec<(String, Reason)> {
    errs.iter().map(|e| (e.field.clone(), e.reason)).collect()
}

pub(super) fn valid_spec() -> Value {
    json!({
        "online": true,
        "bootMACAddress": "52:54:00:12:34:56",
        "bmc": {"address": "redfish://192.0.2.10/redfish/v1/Systems/1", "credentialsName": "worker-0-bmc"},
        "image": {"url": "http://images.example/os.qcow2", "checksum": "abc", "format": "qcow2"},
    })
}

pub(super) fn compile_errors(schema: Value) -> Vec<(String, Reason)> {
    match Schema::compile(&schema) {
        Ok(_) => panic!("{schema} should not compile"),
        Err(errs) => summary(&errs),
    }
}

pub(super) fn in_spec(field: Value) -> Value {
    json!({"type": "object", "properties": {"spec": field}})
}
