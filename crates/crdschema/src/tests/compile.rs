//! Schemas and rules that compile refuses, and where it reports them.

use serde_json::{Value, json};

use super::fixtures::{compile_errors, in_spec, summary};
use crate::error::Reason;
use crate::schema::Schema;

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
