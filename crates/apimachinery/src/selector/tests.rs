//! Label and field selectors: parsing, errors, matching.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

#[test]
fn label_selector_table() {
    let cases: &[Case] = &[
        ("", &[], true),
        ("  ", &[("a", "b")], true),
        ("a=b", &[("a", "b")], true),
        ("a==b", &[("a", "b")], true),
        ("a=b", &[("a", "c")], false),
        ("a=b", &[], false),
        ("a!=b", &[], true),
        ("a!=b", &[("a", "b")], false),
        ("a!=b", &[("a", "c")], true),
        ("a in (x,y)", &[("a", "y")], true),
        ("a in (x, y)", &[("a", "z")], false),
        ("a in (x)", &[], false),
        ("a notin (x)", &[], true),
        ("a notin (x)", &[("a", "x")], false),
        ("a", &[("a", "")], true),
        ("a", &[], false),
        ("!a", &[], true),
        ("!a", &[("a", "1")], false),
        (
            "a=b,c!=d,e in (x,y),f notin (z),g,!h",
            &[("a", "b"), ("e", "x"), ("g", "1")],
            true,
        ),
        (
            "a=b,c!=d,e in (x,y),f notin (z),g,!h",
            &[("a", "b"), ("e", "x"), ("g", "1"), ("h", "")],
            false,
        ),
        (
            "app.kubernetes.io/name=web",
            &[("app.kubernetes.io/name", "web")],
            true,
        ),
        ("a=", &[("a", "")], true),
        ("a>3", &[("a", "4")], true),
        ("a<3", &[("a", "4")], false),
        ("a>3", &[("a", "x")], false),
    ];
    for (sel, l, want) in cases {
        let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
        assert_eq!(s.matches(&labels(l)), *want, "selector {sel:?} on {l:?}");
    }
}

#[test]
fn label_selector_errors() {
    for bad in [
        "a=b,",
        ",a",
        "a in x",
        "a in ()",
        "a in (x",
        "a=b c",
        "!a=b",
        "-a=b",
        "a=b-",
        "a in (x y)",
        "a>b",
        "Prefix_Bad/a=b",
        "(",
    ] {
        let err = LabelSelector::parse(bad);
        assert!(err.is_err(), "{bad:?} should fail, got {err:?}");
        let msg = err.unwrap_err().to_string();
        assert!(
            msg.contains(&format!("{bad:?}")),
            "error should name the input: {msg}"
        );
    }
}

#[test]
fn label_selector_error_messages_are_readable() {
    let msg = LabelSelector::parse("a in (").unwrap_err().to_string();
    assert_eq!(
        msg,
        "invalid selector \"a in (\": unexpected end of input in value set for a"
    );
    let msg = LabelSelector::parse("a=b )").unwrap_err().to_string();
    assert!(msg.ends_with("unexpected ')'"), "{msg}");
}

#[test]
fn label_selector_from_json() {
    let s = LabelSelector::from_label_selector_json(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    assert!(s.matches(&labels(&[("app", "web"), ("tier", "a")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a"), ("legacy", "1")])));
    assert!(
        LabelSelector::from_label_selector_json(&json!({}))
            .unwrap()
            .is_empty()
    );
    assert!(
        LabelSelector::from_label_selector_json(&Value::Null)
            .unwrap()
            .is_empty()
    );
    for bad in [
        json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
        json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        json!({"matchExpressions": [{"key": "a", "operator": "Gte", "values": ["x"]}]}),
        json!({"matchLabels": {"a": 1}}),
        json!([1]),
    ] {
        assert!(
            LabelSelector::from_label_selector_json(&bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn matches_object_labels() {
    let s = LabelSelector::parse("app=web").unwrap();
    assert!(s.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
    assert!(!s.matches_object(&json!({"metadata": {}})));
    assert!(!s.matches_object(&json!("garbage")));
}

#[test]
fn field_selector_table() {
    let obj = json!({
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": {"online": true, "count": 3},
        "type": "Opaque"
    });
    let cases = [
        ("", true),
        ("metadata.name=x", true),
        ("metadata.name==x", true),
        ("metadata.name=y", false),
        ("metadata.name=x,metadata.namespace!=y", true),
        ("metadata.name=x,metadata.namespace!=ns", false),
        ("spec.online=true", true),
        ("spec.count=3", true),
        ("spec.missing=", true),
        ("spec.missing!=", false),
        ("type=Opaque", true),
    ];
    for (sel, want) in cases {
        let s = FieldSelector::parse(sel).unwrap();
        assert_eq!(s.matches(&obj), want, "{sel}");
    }
    let s = FieldSelector::parse("metadata.name=a\\,b").unwrap();
    assert!(s.matches(&json!({"metadata": {"name": "a,b"}})));
    assert_eq!(
        FieldSelector::parse("metadata.name=x,spec.a!=b,metadata.name!=z")
            .unwrap()
            .fields(),
        vec!["metadata.name".to_string(), "spec.a".to_string()]
    );
    assert_eq!(
        FieldSelector::parse("metadata.name=x")
            .unwrap()
            .required_value("metadata.name"),
        Some("x")
    );
}

#[test]
fn field_selector_errors() {
    for bad in ["metadata.name", "=x", "a=b=c", "a=b\\", "a=\\q", "a b=c"] {
        let e = FieldSelector::parse(bad);
        assert!(e.is_err(), "{bad:?} should fail: {e:?}");
        assert!(e.unwrap_err().to_string().contains(&format!("{bad:?}")));
    }
}
