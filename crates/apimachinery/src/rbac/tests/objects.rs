//! Wire-form objects: the PolicyRule encoding, and malformed or random RBAC objects
//! (skipped with warnings, never a panic).

use serde_json::{Value, json};

use super::fixtures::*;
use crate::rbac::{Attributes, Decision, Policy, PolicyRule, UserInfo, covers};

#[test]
fn malformed_objects_are_skipped_with_warnings() {
    let good_rules = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
    let crs = vec![
        json!("not an object"),
        json!({"metadata": {}}),
        json!({"metadata": {"name": "bad-rules"}, "rules": {"verbs": ["get"]}}),
        json!({"metadata": {"name": "bad-verbs"}, "rules": [{"verbs": "get", "apiGroups": [""], "resources": ["pods"]}]}),
        json!({"metadata": {"name": "bad-agg"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "a", "operator": "Near"}]}
        ]}, "rules": good_rules.clone()}),
        // nulls read as empty lists, unknown fields are ignored.
        json!({"metadata": {"name": "ok"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": null, "extra": 1}]}),
        json!({"metadata": {"name": "ok"}, "rules": []}),
    ];
    let roles = vec![
        json!({"metadata": {"name": "no-namespace"}, "rules": good_rules.clone()}),
        json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": [7]}),
    ];
    let crbs = vec![
        json!({"metadata": {"name": "no-roleref"}, "subjects": user("u")}),
        json!({"metadata": {"name": "bad-subject"}, "roleRef": {"kind": "ClusterRole", "name": "ok"}, "subjects": [{"kind": "User"}]}),
        json!({"metadata": {"name": "bad-subjects"}, "roleRef": {"kind": "ClusterRole", "name": "ok"}, "subjects": "u"}),
        crb(
            "sa-no-ns",
            "ok",
            json!([{"kind": "ServiceAccount", "name": "x"}, {"kind": "Robot", "name": "r2"}, {"kind": "User", "name": "u"}]),
        ),
        crb("via-bad-agg", "bad-agg", user("agg")),
        crb("via-bad-verbs", "bad-verbs", user("u2")),
        json!(null),
    ];
    let rbs = vec![
        json!({"metadata": {"name": "no-ns"}, "roleRef": {"kind": "ClusterRole", "name": "ok"}, "subjects": user("u")}),
    ];
    let (p, warnings) = Policy::from_objects(&crs, &roles, &crbs, &rbs);
    let expect = [
        "ClusterRole at index 0: metadata.name is missing; skipped",
        "ClusterRole at index 1: metadata.name is missing; skipped",
        "ClusterRole \"bad-rules\": rules is not an array; skipped",
        "ClusterRole \"bad-verbs\": rules[0]: invalid type: string \"get\", expected a sequence; skipped",
        "ClusterRole \"bad-agg\": aggregationRule.clusterRoleSelectors[0]: invalid selector",
        "ClusterRole \"ok\": duplicate name; skipped",
        "Role at index 0: metadata.name or metadata.namespace is missing; skipped",
        "Role \"ns/r\": rules[0]: invalid type: integer `7`, expected struct PolicyRule; skipped",
        "ClusterRoleBinding \"no-roleref\": roleRef is missing; skipped",
        "ClusterRoleBinding \"bad-subject\": subjects[0] needs a string kind and name; skipped",
        "ClusterRoleBinding \"bad-subjects\": subjects is not an array; skipped",
        "ClusterRoleBinding \"sa-no-ns\": ServiceAccount subject \"x\" has no namespace and matches nobody",
        "ClusterRoleBinding \"sa-no-ns\": subject kind \"Robot\" is not User, Group or ServiceAccount and matches nobody",
        "ClusterRoleBinding at index 6: metadata.name is missing; skipped",
        "RoleBinding \"no-ns\": metadata.namespace is missing; skipped",
    ];
    assert_eq!(warnings.len(), expect.len(), "{warnings:#?}");
    for (got, want) in warnings.iter().zip(expect) {
        assert!(got.starts_with(want), "got {got:?}\nwant prefix {want:?}");
    }

    // The valid parts still work: "ok" keeps its first definition, the
    // binding with unusable subjects still serves its User subject, and a
    // bad aggregationRule leaves the own rules.
    let pods = |u: &UserInfo| {
        p.authorize(&Attributes::resource(u, "get", "", "pods", "", "ns", "p"))
            .allowed
    };
    assert!(pods(&UserInfo::new("u", Vec::<String>::new())));
    assert!(pods(&UserInfo::new("agg", Vec::<String>::new())));
    assert!(!pods(&UserInfo::new(
        "system:serviceaccount::x",
        Vec::<String>::new()
    )));
    let skipped = p.authorize(&Attributes::resource(
        &UserInfo::new("u2", Vec::<String>::new()),
        "get",
        "",
        "pods",
        "",
        "ns",
        "p",
    ));
    assert_eq!(
        skipped,
        Decision {
            allowed: false,
            reason: r#"RBAC: clusterrole.rbac.authorization.k8s.io "bad-verbs" not found"#.into()
        }
    );
    assert_eq!(p.role_rules("ClusterRole", "", "ok").unwrap().len(), 1);

    // Total garbage never panics.
    let junk = vec![
        json!(1),
        json!([]),
        json!({"metadata": 3}),
        json!({"metadata": {"name": 5}}),
    ];
    let (p, w) = Policy::from_objects(&junk, &junk, &junk, &junk);
    assert_eq!(w.len(), 16);
    let root = UserInfo::new("root", Vec::<String>::new());
    assert!(
        !p.authorize(&Attributes::non_resource(&root, "get", "/"))
            .allowed
    );
}

/// RBAC-shaped objects with random holes and wrong types: never a panic.
#[test]
fn random_objects_never_panic() {
    let mut seed: u64 = 0x5eed;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let leaves = [
        json!(null),
        json!(1),
        json!("x"),
        json!(""),
        json!("*"),
        json!(["*"]),
        json!([""]),
        json!(["get", 2]),
        json!({}),
        json!([{}]),
        json!({"a": "b"}),
        json!("ServiceAccount"),
        json!("ClusterRole"),
        json!("Role"),
        json!([{"kind": "ServiceAccount", "name": "x"}]),
        json!([{"matchLabels": {"a": "b"}}, {}, null]),
    ];
    let keys = [
        "metadata",
        "name",
        "namespace",
        "labels",
        "rules",
        "verbs",
        "apiGroups",
        "resources",
        "resourceNames",
        "nonResourceURLs",
        "roleRef",
        "kind",
        "subjects",
        "aggregationRule",
        "clusterRoleSelectors",
        "matchLabels",
        "matchExpressions",
    ];
    fn shape(
        next: &mut dyn FnMut() -> usize,
        leaves: &[Value],
        keys: &[&str],
        depth: u32,
    ) -> Value {
        match next() % if depth == 0 { 1 } else { 3 } {
            0 => leaves[next() % leaves.len()].clone(),
            1 => Value::Array(
                (0..next() % 3)
                    .map(|_| shape(next, leaves, keys, depth - 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..next() % 5)
                    .map(|_| {
                        (
                            keys[next() % keys.len()].to_string(),
                            shape(next, leaves, keys, depth - 1),
                        )
                    })
                    .collect(),
            ),
        }
    }
    let u = UserInfo::new("system:serviceaccount:x:x", ["b", "x"]);
    for _ in 0..300 {
        let lists: Vec<Vec<Value>> = (0..4)
            .map(|_| {
                (0..next() % 6)
                    .map(|_| shape(&mut next, &leaves, &keys, 5))
                    .collect()
            })
            .collect();
        let (p, _) = Policy::from_objects(&lists[0], &lists[1], &lists[2], &lists[3]);
        for ns in ["", "x"] {
            let _ = p.authorize(&Attributes::resource(&u, "get", "", "x", "x", ns, "x"));
            let _ = p.authorize(&Attributes::non_resource(&u, "get", "x"));
            let rules = p.rules_for(&u, ns);
            let _ = covers(&rules, &rules);
        }
    }
}

#[test]
fn policy_rule_wire_form() {
    let r: PolicyRule = serde_json::from_value(json!({
        "verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "nonResourceURLs": null
    }))
    .unwrap();
    assert_eq!(r, rule(&["get"], &[""], &["pods"]));
    assert_eq!(
        serde_json::to_value(url_rule(&["get"], &["/healthz"])).unwrap(),
        json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
    );
    assert_eq!(
        serde_json::to_value(named(rule(&["get"], &[""], &["secrets"]), &["db"])).unwrap(),
        json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["db"]})
    );
}
