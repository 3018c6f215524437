//! CEL rules: evaluation, transition rules, messages, the Kubernetes
//! library, typed values, and fields rules may select.

use serde_json::{Value, json};

use super::fixtures::{admit, bmh, compile_errors, host, in_spec, summary, valid_spec};
use crate::error::{FieldError, Reason};
use crate::schema::Schema;

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
    spec_schema(
        rules,
        json!({
            "replicas": {"type": "integer"},
            "minReplicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "name": {"type": "string"},
            "items": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}},
            "selector": {"type": "object", "additionalProperties": {"type": "string"}}
        }),
    )
}

/// An object whose `spec` has `properties` and the `rules`.
fn spec_schema(rules: Value, properties: Value) -> Schema {
    Schema::compile(&json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": properties
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

/// Rules see only what they read of a value (`rules::rule_reads`); what
/// they see of it, and so every outcome and error, must be what they would
/// see of the whole value. Each rule runs alone and beside `self == self`,
/// which reads the value whole.
#[test]
fn rules_reading_parts_of_a_value_see_what_the_whole_value_shows() {
    let schema = |rules: Value| {
        spec_schema(
            rules,
            json!({
                "name": {"type": "string", "maxLength": 64},
                "nested": {"type": "object", "properties": {
                    "inner": {"type": "object", "properties": {"x": {"type": "integer"}}},
                    "list": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
                    "label": {"type": "string", "maxLength": 64}
                }},
                "other": {"type": "object", "properties": {"y": {"type": "string", "maxLength": 64}}}
            }),
        )
    };
    let rules = [
        "has(self.nested.inner)",
        "!has(self.nested.inner)",
        "has(self.nested.inner) && self.nested.inner.x == 1",
        "self.nested.inner.x == 2",
        "self.nested.list[0] == 1",
        "size(self.nested.list) == 2",
        "self.nested.label == 'a'",
        "self.other.y == 'z'",
        "has(self.other)",
        "self.nested.inner == {'x': 1}",
        "self.name.size() > 0",
        "has(self.nested) && self.nested.list.all(i, i > 0)",
        "self.nested.inner.x > 'a'",
        "oldSelf.nested.inner.x == self.nested.inner.x",
        "!has(oldSelf.other) || has(self.other)",
        "has(oldSelf.nested.inner) == has(self.nested.inner)",
    ];
    let objects = [
        json!({"name": "n", "nested": {"inner": {"x": 1}, "list": [1, 2]}, "other": {"y": "z"}}),
        json!({"name": "n", "nested": {"list": [0]}}),
        json!({"name": "", "nested": {"inner": {"x": 2}, "label": "a"}}),
    ];
    let mut outcomes = std::collections::BTreeSet::new();
    for rule in rules {
        let alone = schema(json!([{"rule": rule}]));
        let beside_whole = schema(json!([{"rule": rule}, {"rule": "self == self"}]));
        for new in &objects {
            for old in std::iter::once(None).chain(objects.iter().map(Some)) {
                let obj = json!({"spec": new});
                let old = old.map(|o| json!({"spec": o}));
                let got = alone.validate(&obj, old.as_ref());
                let want = beside_whole.validate(&obj, old.as_ref());
                assert_eq!(got, want, "{rule} on {new} (old {old:?})");
                outcomes.insert(got.first().map(|e| e.message.contains("failed rule")));
            }
        }
    }
    // The table reaches passes, failures and evaluation errors.
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
}
