//! CEL cost limits: static estimates when a CRD is written, the per-call
//! limit and per-object budget when an object is validated.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fixtures::in_spec;
use crate::cost::cost_error_message;
use crate::error::{FieldError, Reason};
use crate::schema::{CostLimits, Schema};

const SPEC: &str = "spec.validation.openAPIV3Schema.properties[spec]";
const HINT: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
const NESTED_ALL: &str = "self.all(x, self.all(y, x == y || x != y))";

/// A spec whose `names` list carries `rules`.
fn names_schema(names: Value, rules: Value) -> Value {
    let mut names = names;
    names["x-kubernetes-validations"] = rules;
    in_spec(json!({"type": "object", "properties": {"names": names}}))
}

fn unbounded_names() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn bounded_names() -> Value {
    json!({"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}})
}

#[test]
fn cost_error_message_words_the_factor_as_kubernetes() {
    let limit = 10_000_000;
    for (cost, factor) in [
        (12_000_000, "1.200000x"),
        (25_000_000, "2.5x"),
        (999_000_000, "99.9x"),
        (1_000_000_001, "more than 100x"),
    ] {
        assert_eq!(
            cost_error_message("estimated rule cost", cost, limit),
            format!("estimated rule cost exceeds budget by factor of {factor} {HINT}")
        );
    }
}

/// Expected compile outcome: the causes' fields and reasons, and a prefix
/// of each message.
type Expected = Vec<(String, Reason, String)>;

#[test]
fn static_cost_limits_table() {
    use Reason::*;
    let names_rule = format!("{SPEC}.properties[names].x-kubernetes-validations[0].rule");
    let over_100x =
        format!("Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}");
    let contributed = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".to_string();
    let total_over = "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of ";

    let twenty_cheap: Vec<Value> = (0..20)
        .map(|i| json!({"rule": format!("self.all(x, x.size() < {i})")}))
        .collect();
    let mut contributed_four: Expected = Vec::new();
    for _ in 0..4 {
        contributed_four.push((
            String::new(), // any of the twenty
            FieldValueForbidden,
            contributed.clone(),
        ));
    }
    contributed_four.push((
        "spec.validation.openAPIV3Schema".into(),
        FieldValueForbidden,
        format!("{total_over}1."),
    ));

    let items_rule =
        |list: Value| in_spec(json!({"type": "object", "properties": {"hosts": list}}));
    let host = |name: Value| {
        json!({
            "type": "object",
            "properties": {"name": name},
            "x-kubernetes-validations": [{"rule": "self.name.matches('^[a-z]+$')"}]
        })
    };

    let cases: Vec<(&str, Value, CostLimits, Expected)> = vec![
        (
            "nested all over an unbounded list of unbounded strings",
            names_schema(unbounded_names(), json!([{"rule": NESTED_ALL}])),
            CostLimits::Enforce,
            vec![
                (names_rule.clone(), FieldValueForbidden, over_100x.clone()),
                (names_rule.clone(), FieldValueForbidden, contributed.clone()),
                (
                    "spec.validation.openAPIV3Schema".into(),
                    FieldValueForbidden,
                    format!("{total_over}more than 100x {HINT}"),
                ),
            ],
        ),
        (
            "the same rule, bounded by maxItems and maxLength",
            names_schema(bounded_names(), json!([{"rule": NESTED_ALL}])),
            CostLimits::Enforce,
            vec![],
        ),
        (
            "maxItems alone: comparing unbounded strings stays too costly",
            names_schema(
                json!({"type": "array", "maxItems": 100, "items": {"type": "string"}}),
                json!([{"rule": NESTED_ALL}]),
            ),
            CostLimits::Enforce,
            vec![
                (names_rule.clone(), FieldValueForbidden, over_100x.clone()),
                (names_rule.clone(), FieldValueForbidden, contributed.clone()),
                (
                    "spec.validation.openAPIV3Schema".into(),
                    FieldValueForbidden,
                    total_over.into(),
                ),
            ],
        ),
        (
            "a stored CRD is loaded without static limits",
            names_schema(unbounded_names(), json!([{"rule": NESTED_ALL}])),
            CostLimits::Ignore,
            vec![],
        ),
        (
            "a rule on each item of an unbounded list runs as often as items fit in a request",
            items_rule(json!({"type": "array", "items": host(json!({"type": "string"}))})),
            CostLimits::Enforce,
            vec![
                (
                    format!("{SPEC}.properties[hosts].items.x-kubernetes-validations[0].rule"),
                    FieldValueForbidden,
                    over_100x.clone(),
                ),
                (String::new(), FieldValueForbidden, contributed.clone()),
                (
                    "spec.validation.openAPIV3Schema".into(),
                    FieldValueForbidden,
                    total_over.into(),
                ),
            ],
        ),
        (
            "the same with maxItems and maxLength",
            items_rule(json!({
                "type": "array",
                "maxItems": 100,
                "items": host(json!({"type": "string", "maxLength": 63}))
            })),
            CostLimits::Enforce,
            vec![],
        ),
        (
            "linear rules over unbounded lists pass one by one, not twenty together",
            names_schema(unbounded_names(), Value::Array(twenty_cheap.clone())),
            CostLimits::Enforce,
            contributed_four,
        ),
        (
            "the same rules on a bounded list",
            names_schema(bounded_names(), Value::Array(twenty_cheap)),
            CostLimits::Enforce,
            vec![],
        ),
        (
            "messageExpression is estimated on its own",
            names_schema(
                unbounded_names(),
                json!([{"rule": "self.size() < 10", "messageExpression": "self.map(x, self.map(y, x + y).join(',')).join(';')"}]),
            ),
            CostLimits::Enforce,
            vec![
                (
                    format!("{SPEC}.properties[names].x-kubernetes-validations[0].messageExpression"),
                    FieldValueForbidden,
                    format!("Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x {HINT}"),
                ),
                (String::new(), FieldValueForbidden, contributed.clone()),
                (
                    "spec.validation.openAPIV3Schema".into(),
                    FieldValueForbidden,
                    total_over.into(),
                ),
            ],
        ),
        (
            "a literal pattern too costly to compile",
            in_spec(json!({
                "type": "string",
                "maxLength": 10,
                "x-kubernetes-validations": [{"rule": "self.matches('(\\\\w{100}){100}')"}]
            })),
            CostLimits::Enforce,
            vec![(
                format!("{SPEC}.x-kubernetes-validations[0].rule"),
                FieldValueForbidden,
                "Forbidden: regular expression '(\\w{100}){100}' is too complex: its estimated compilation cost ".into(),
            )],
        ),
        (
            "an invalid literal pattern",
            in_spec(json!({
                "type": "string",
                "maxLength": 10,
                "x-kubernetes-validations": [{"rule": "self.matches('(')"}]
            })),
            CostLimits::Enforce,
            vec![(
                format!("{SPEC}.x-kubernetes-validations[0].rule"),
                FieldValueInvalid,
                "Invalid value: \"self.matches('(')\": compilation failed: '(' not a valid regex: regex parse error:".into(),
            )],
        ),
        (
            "an invalid literal pattern in a stored CRD fails when it runs instead",
            in_spec(json!({
                "type": "string",
                "maxLength": 10,
                "x-kubernetes-validations": [{"rule": "self.matches('(')"}]
            })),
            CostLimits::Ignore,
            vec![],
        ),
    ];

    for (name, schema, limits, expected) in cases {
        let got = match Schema::compile_with(&schema, limits) {
            Ok(_) => Vec::new(),
            Err(errs) => errs,
        };
        assert_eq!(got.len(), expected.len(), "{name}: {got:#?}");
        for (g, (field, reason, prefix)) in got.iter().zip(&expected) {
            if field.is_empty() {
                assert!(
                    g.field.ends_with(".rule") || g.field.ends_with(".messageExpression"),
                    "{name}: {g:?}"
                );
            } else {
                assert_eq!(&g.field, field, "{name}");
            }
            assert_eq!(g.reason, *reason, "{name}: {g:?}");
            assert!(
                g.message.starts_with(prefix.as_str()),
                "{name}: {}",
                g.message
            );
        }
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("name-{i:0>10}")).collect()
}

#[test]
fn per_call_limit_refuses_a_rule_without_running_it() {
    // Compiled as a CRD stored before cost limits were enforced: nothing
    // bounds its list, so only evaluation can.
    let rules = json!([
        {"rule": NESTED_ALL, "message": "names must be comparable"},
        {"rule": "self.size() < 10", "messageExpression": "self.map(x, self.map(y, x + y).join(',')).join(';')"}
    ]);
    let schema = names_schema(unbounded_names(), rules);
    let s = Schema::compile_with(&schema, CostLimits::Ignore).unwrap();
    let per_call = "Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: names must be comparable";
    let message_per_call = "Invalid value: \"array\": no further validation rules will be run due to call cost exceeds limit for messageExpression: \"self.map(x, self.map(y, x + y).join(',')).join(';')\"";
    let cases: Vec<(usize, Vec<&str>)> = vec![
        // Small lists: both rules run; the second fails with its message.
        (5, vec![]),
        (
            12,
            vec![
                "Invalid value: \"array\": name-0000000000name-0000000000,name-0000000000name-0000000001,",
            ],
        ),
        // 400 million comparisons: refused before the first.
        (20_000, vec![per_call]),
    ];
    for (n, expected) in cases {
        let obj = json!({"spec": {"names": names(n)}});
        let started = Instant::now();
        let errs = s.validate(&obj, None);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{n} names took {:?}",
            started.elapsed()
        );
        assert_eq!(errs.len(), expected.len(), "{n}: {errs:#?}");
        for (e, want) in errs.iter().zip(expected) {
            assert_eq!(e.field, "spec.names", "{n}");
            assert_eq!(e.reason, Reason::FieldValueInvalid, "{n}");
            assert!(e.message.starts_with(want), "{n}: {}", e.message);
        }
    }

    // The rule itself fits but its message expression does not.
    let rules = json!([
        {"rule": "self.size() < 10", "messageExpression": "self.map(x, self.map(y, x + y).join(',')).join(';')"}
    ]);
    let s =
        Schema::compile_with(&names_schema(unbounded_names(), rules), CostLimits::Ignore).unwrap();
    let errs = s.validate(&json!({"spec": {"names": names(2_000)}}), None);
    assert_eq!(
        errs,
        vec![FieldError::new(
            "spec.names",
            Reason::FieldValueInvalid,
            message_per_call
        )]
    );
}

#[test]
fn object_budget_is_shared_by_all_rules_and_stops_validation() {
    // Each rule, estimated over 5000 items of 300-character strings, stays
    // under the static limit; three of them together exceed what one
    // object may spend.
    let item_rules: Vec<Value> = [
        "!self.name.contains(self.other)",
        "!self.other.contains(self.name)",
        "!self.name.contains(self.other + 'x')",
    ]
    .iter()
    .map(|r| json!({"rule": r}))
    .collect();
    let schema = in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.hosts.size() >= 0"}],
        "properties": {"hosts": {
            "type": "array",
            "maxItems": 5000,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 300},
                    "other": {"type": "string", "maxLength": 300}
                },
                "x-kubernetes-validations": item_rules
            }
        }}
    }));
    let s = Schema::compile(&schema).expect("each rule fits the static limits");
    let hosts = |n: usize, len: usize| -> Value {
        let host = json!({"name": "a".repeat(len), "other": "b".repeat(len)});
        json!({"spec": {"hosts": vec![host; n]}})
    };
    let out_of_budget = "Invalid value: \"object\": validation failed due to running out of cost budget, no further validation rules will be run";

    // Ordinary objects are unaffected.
    assert_eq!(s.validate(&hosts(100, 300), None), vec![]);
    assert_eq!(s.validate(&hosts(5000, 10), None), vec![]);

    let started = Instant::now();
    let errs = s.validate(&hosts(5000, 300), None);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].reason, Reason::FieldValueInvalid);
    assert_eq!(errs[0].message, out_of_budget);
    // Reported where the budget ran out, part-way through the list.
    let index: usize = errs[0]
        .field
        .strip_prefix("spec.hosts[")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("{}", errs[0].field));
    assert!((3000..4000).contains(&index), "{index}");

    // The budget is per object: the next validation starts afresh.
    assert_eq!(s.validate(&hosts(100, 300), None), vec![]);
}

#[test]
fn patterns_from_the_object_are_metered_as_they_compile() {
    let schema = in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.names.all(n, n.matches(self.pattern))"},
            {"rule": "matches(self.names[0], self.pattern) == self.names[0].matches(self.pattern)"},
            {"rule": "self.names[0].findAll(self.pattern).size() >= 0 && self.names[0].find(self.pattern) == self.names[0].find(self.pattern)"}
        ],
        "properties": {
            "pattern": {"type": "string", "maxLength": 64},
            "names": {"type": "array", "minItems": 1, "maxItems": 10, "items": {"type": "string", "maxLength": 10}}
        }
    }));
    let s = Schema::compile(&schema).unwrap();
    let check = |pattern: &str| {
        s.validate(
            &json!({"spec": {"pattern": pattern, "names": ["abc", "de"]}}),
            None,
        )
    };
    assert_eq!(check("^[a-z]+$"), vec![]);

    let errs = check("^[0-9]+$");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(
        errs[0].message,
        "Invalid value: \"object\": failed rule: self.names.all(n, n.matches(self.pattern))"
    );

    // A short pattern that unrolls into millions of states is refused
    // before it is compiled.
    let errs = check("(\\w{100}){100}");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].field, "spec");
    assert_eq!(
        errs[0].message,
        "Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.names.all(n, n.matches(self.pattern))"
    );

    // An invalid pattern fails each rule that uses it, as cel's matches does.
    let errs = check("(");
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].message.contains("'(' not a valid regex"),
        "{}",
        errs[0].message
    );
}
