//! Tables for built-ins, events and CRDs; ages, timestamps and JSONPath.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::*;

fn at(ts: &str) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(parse_rfc3339(ts).unwrap() as u64)
}

#[test]
fn human_durations() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (4 * 3600 + 30 * 60, "4h30m"),
        (10 * 3600, "10h"),
        (47 * 3600, "47h"),
        (2 * 86400, "2d"),
        (3 * 86400 + 5 * 3600, "3d5h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 10 * 86400, "3y10d"),
        (9 * 365 * 86400, "9y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(secs), want, "{secs}s");
    }
}

#[test]
fn rfc3339_round_trip() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_rfc3339("2024-02-29T12:00:00Z"), Some(1709208000));
    assert_eq!(parse_rfc3339("2024-02-29T14:00:00+02:00"), Some(1709208000));
    assert_eq!(
        parse_rfc3339("2024-02-29T12:00:00.123456Z"),
        Some(1709208000)
    );
    assert_eq!(format_rfc3339(1709208000), "2024-02-29T12:00:00Z");
    for bad in [
        "",
        "2024-02-29",
        "2024-13-01T00:00:00Z",
        "2024-02-29T12:00:00",
        "x024-02-29T12:00:00Z",
        "2024-02-29T12:00:00.Z",
        "2024-02-29T12:00:00Zjunk",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn jsonpath_subset() {
    let obj = json!({
        "metadata": {"name": "h1", "annotations": {"x": "1", "a.b/c": "2"}},
        "spec": {"consumerRef": {"name": "m1"}, "list": [1, 2, 3]},
        "status": {
            "provisioning": {"state": "available"},
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Other", "status": "False"}
            ]
        }
    });
    let cases = [
        (".status.provisioning.state", Some(json!("available"))),
        ("{.status.provisioning.state}", Some(json!("available"))),
        (".spec.consumerRef.name", Some(json!("m1"))),
        ("metadata.name", Some(json!("h1"))),
        ("$.metadata.name", Some(json!("h1"))),
        (".metadata.annotations['x']", Some(json!("1"))),
        (".metadata.annotations[\"a.b/c\"]", Some(json!("2"))),
        (".metadata.annotations.a\\.b/c", Some(json!("2"))),
        (
            ".status.conditions[?(@.type==\"Ready\")].status",
            Some(json!("True")),
        ),
        (
            ".status.conditions[?(@.type=='Other')].status",
            Some(json!("False")),
        ),
        (
            ".status.conditions[?(@.type!='Ready')].type",
            Some(json!("Other")),
        ),
        (".status.conditions[?(@.type=='Nope')].status", None),
        (".status.conditions[?(@.status)].type", Some(json!("Ready"))),
        (".spec.list[1]", Some(json!(2))),
        (".spec.list[-1]", Some(json!(3))),
        (".spec.list[*]", Some(json!(1))),
        (".spec.list[9]", None),
        (".spec.missing.deeper", None),
        (
            ".spec",
            Some(json!({"consumerRef": {"name": "m1"}, "list": [1, 2, 3]})),
        ),
        ("..name", None),
        (".spec.list[", None),
        (".spec.list[abc]", None),
    ];
    for (path, want) in cases {
        assert_eq!(jsonpath_get(&obj, path), want, "{path}");
    }
}

fn obj(kind: &str, name: &str, created: &str, extra: Value) -> Value {
    let mut o = json!({"kind": kind, "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": created, "uid": "u1"}});
    merge(&mut o, extra);
    o
}

fn merge(o: &mut Value, extra: Value) {
    crate::patch::merge_patch(o, &extra);
}

fn cells(t: &Value) -> Vec<Value> {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].clone())
        .collect()
}

#[test]
fn builtin_tables() {
    let now = at("2024-01-01T01:00:00Z");
    let ns = obj(
        "Namespace",
        "default",
        "2024-01-01T00:59:55Z",
        json!({"status": {"phase": "Active"}}),
    );
    let t = to_table(
        std::slice::from_ref(&ns),
        &columns_for_builtin("Namespace"),
        IncludeObject::Metadata,
        now,
        json!({"resourceVersion": "7"}),
    );
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"], json!({"resourceVersion": "7"}));
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Status", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(cells(&t), vec![json!(["default", "Active", "5s"])]);
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "default");
    assert!(t["rows"][0]["object"].get("status").is_none());

    let secret = obj(
        "Secret",
        "s",
        "2024-01-01T00:56:58Z",
        json!({"type": "Opaque", "data": {"a": "", "b": ""}}),
    );
    let t = to_table(
        &[secret],
        &columns_for_builtin("Secret"),
        IncludeObject::None,
        now,
        Value::Null,
    );
    assert_eq!(cells(&t), vec![json!(["s", "Opaque", 2, "3m2s"])]);
    assert_eq!(t["rows"][0]["object"], Value::Null);
    assert_eq!(t["metadata"], json!({}));

    let cm = obj(
        "ConfigMap",
        "c",
        "2023-12-30T01:00:00Z",
        json!({"data": {"a": "1"}, "binaryData": {"b": ""}}),
    );
    let t = to_table(
        std::slice::from_ref(&cm),
        &columns_for_builtin("ConfigMap"),
        IncludeObject::Object,
        now,
        json!({}),
    );
    assert_eq!(cells(&t), vec![json!(["c", 2, "2d"])]);
    assert_eq!(t["rows"][0]["object"], cm);

    let lease = obj(
        "Lease",
        "l",
        "2023-12-31T21:00:00Z",
        json!({"spec": {"holderIdentity": "me"}}),
    );
    let t = to_table(
        &[lease],
        &columns_for_builtin("Lease"),
        IncludeObject::None,
        now,
        json!({}),
    );
    assert_eq!(cells(&t), vec![json!(["l", "me", "4h"])]);

    let crd = obj(
        "CustomResourceDefinition",
        "bmhs.metal3.io",
        "2023-12-31T21:00:00.5Z",
        json!({}),
    );
    let t = to_table(
        &[crd],
        &columns_for_builtin("CustomResourceDefinition"),
        IncludeObject::None,
        now,
        json!({}),
    );
    assert_eq!(
        cells(&t),
        vec![json!(["bmhs.metal3.io", "2023-12-31T21:00:00Z"])]
    );

    let other = obj("Widget", "w", "", json!({}));
    let t = to_table(
        &[other],
        &columns_for_builtin("Widget"),
        IncludeObject::None,
        now,
        json!({}),
    );
    assert_eq!(cells(&t), vec![json!(["w", "<unknown>"])]);
}

#[test]
fn event_table() {
    let now = at("2024-01-01T01:00:00Z");
    let ev = obj(
        "Event",
        "e1",
        "2024-01-01T00:00:00Z",
        json!({
            "type": "Warning", "reason": "Failed", "message": " boom \n",
            "involvedObject": {"kind": "BareMetalHost", "name": "h1", "fieldPath": "spec"},
            "source": {"component": "ctl", "host": "node1"},
            "firstTimestamp": "2024-01-01T00:50:00Z", "lastTimestamp": "2024-01-01T00:59:00Z",
            "count": 3
        }),
    );
    let cols = columns_for_builtin("Event");
    let t = to_table(&[ev], &cols, IncludeObject::None, now, json!({}));
    let c = &cells(&t)[0];
    assert_eq!(c[0], "60s");
    assert_eq!(c[1], "Warning");
    assert_eq!(c[3], "baremetalhost/h1");
    assert_eq!(c[4], "spec");
    assert_eq!(c[5], "ctl, node1");
    assert_eq!(c[6], "boom");
    assert_eq!(c[7], "10m");
    assert_eq!(c[8], 3);
    assert_eq!(c[9], "e1");
    // events.k8s.io shape: eventTime, series, regarding, reportingController.
    let ev2 = obj(
        "Event",
        "e2",
        "2024-01-01T00:00:00Z",
        json!({
            "eventTime": "2024-01-01T00:58:00.000000Z",
            "series": {"count": 4, "lastObservedTime": "2024-01-01T00:59:30.000000Z"},
            "regarding": {"kind": "Node", "fieldPath": "spec.x"}, "reportingController": "kubelet", "note": "n "
        }),
    );
    let t = to_table(&[ev2], &cols, IncludeObject::None, now, json!({}));
    let c = &cells(&t)[0];
    assert_eq!((c[4].clone(), c[6].clone()), (json!("spec.x"), json!("n")));
    assert_eq!(
        (
            c[0].clone(),
            c[3].clone(),
            c[5].clone(),
            c[7].clone(),
            c[8].clone()
        ),
        (
            json!("30s"),
            json!("node"),
            json!("kubelet"),
            json!("2m"),
            json!(4)
        )
    );
}

#[test]
fn crd_columns_and_cells() {
    let cols = columns_for_crd(&json!([
        {"name": "State", "type": "string", "jsonPath": ".status.provisioning.state", "description": "Provisioning state"},
        {"name": "Consumer", "type": "string", "jsonPath": ".spec.consumerRef.name"},
        {"name": "Online", "type": "boolean", "jsonPath": ".spec.online"},
        {"name": "Count", "type": "integer", "jsonPath": ".spec.count", "priority": 1},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]));
    assert_eq!(cols.len(), 8);
    assert_eq!(cols[0].name, "Name");
    assert_eq!(
        cols[2].description.as_deref(),
        Some("Custom resource definition column (in JSONPath format): .spec.consumerRef.name")
    );
    assert_eq!(cols[4].priority, 1);
    let now = at("2024-01-01T01:00:00Z");
    let host = json!({"metadata": {"name": "h1", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"online": true, "count": 2.0, "ratio": 1, "consumerRef": {"name": "m"}},
        "status": {"provisioning": {"state": "ready"}, "conditions": [{"type": "Ready", "status": "True"}]}});
    let t = to_table(&[host], &cols, IncludeObject::Metadata, now, json!({}));
    assert_eq!(
        cells(&t)[0],
        json!(["h1", "ready", "m", true, 2, 1.0, "True", "60m"])
    );
    let sparse = json!({"metadata": {"name": "h2", "creationTimestamp": "bad"}, "spec": {"online": "yes", "count": "x"}});
    let t = to_table(&[sparse], &cols, IncludeObject::None, now, json!({}));
    assert_eq!(
        cells(&t)[0],
        json!(["h2", null, null, null, null, null, null, "<invalid>"])
    );

    let cols = columns_for_crd(&Value::Null);
    assert_eq!(
        cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["Name", "Age"]
    );
    assert_eq!(cols[1].type_, "date");
    let cols = columns_for_crd(&json!([{"name": "State", "type": "string", "jsonPath": ".x"}]));
    assert_eq!(
        cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["Name", "State"]
    );
}

#[test]
fn garbage_objects_do_not_panic() {
    let now = SystemTime::now();
    for cols in [
        columns_for_builtin("Event"),
        columns_for_builtin("Secret"),
        columns_for_crd(&json!([{"name": "x", "type": "date", "jsonPath": ".a[?(@.b==1)]"}])),
    ] {
        let t = to_table(
            &[json!(null), json!([1]), json!("s"), json!({"metadata": 5})],
            &cols,
            IncludeObject::Metadata,
            now,
            json!([]),
        );
        assert_eq!(t["rows"].as_array().unwrap().len(), 4);
    }
}
