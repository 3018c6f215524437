//! OpenAPI validation: keywords, paths, messages, and ratcheting on
//! update.

use serde_json::{Value, json};

use super::fixtures::{admit, bmh, host, summary, valid_spec};
use crate::error::{FieldError, Reason};
use crate::schema::Schema;

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
