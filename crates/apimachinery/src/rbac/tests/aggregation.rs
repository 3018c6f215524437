//! ClusterRole aggregation, `Policy::rules_for` and `Policy::role_rules`.

use serde_json::json;

use super::fixtures::*;
use crate::rbac::{Attributes, Policy, UserInfo};

#[test]
fn aggregation_table() {
    let crs = vec![
        json!({
            "metadata": {"name": "admin"},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-admin": "true"}}
            ]},
            "rules": [{"verbs": ["delete"], "apiGroups": [""], "resources": ["namespaces"]}],
        }),
        json!({
            "metadata": {"name": "edit", "labels": {"rbac.example.com/aggregate-to-admin": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-edit": "true"}}
            ]},
        }),
        json!({
            "metadata": {"name": "edit-pods", "labels": {"rbac.example.com/aggregate-to-edit": "true"}},
            "rules": [{"verbs": ["create", "delete"], "apiGroups": [""], "resources": ["pods"]}],
        }),
        json!({
            "metadata": {"name": "expr", "labels": {"tier": "gold"}},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                                      {"key": "legacy", "operator": "DoesNotExist"}]},
                {"matchExpressions": [{"key": "extra", "operator": "Exists"},
                                      {"key": "env", "operator": "NotIn", "values": ["prod"]}]}
            ]},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}],
        }),
        json!({
            "metadata": {"name": "silver", "labels": {"tier": "silver"}},
            "rules": [{"verbs": ["list"], "apiGroups": ["apps"], "resources": ["deployments"]}],
        }),
        json!({
            "metadata": {"name": "silver-legacy", "labels": {"tier": "silver", "legacy": "yes"}},
            "rules": [{"verbs": ["list"], "apiGroups": ["batch"], "resources": ["jobs"]}],
        }),
        json!({
            "metadata": {"name": "extra-dev", "labels": {"extra": "", "env": "dev"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["events"]}],
        }),
        json!({
            "metadata": {"name": "extra-prod", "labels": {"extra": "", "env": "prod"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}],
        }),
        json!({
            "metadata": {"name": "extra-noenv", "labels": {"extra": "1"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["services"]}],
        }),
        // A cycle: each aggregates the other.
        json!({
            "metadata": {"name": "cyc-a", "labels": {"cyc": "a"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"cyc": "b"}}]},
            "rules": [{"verbs": ["get"], "apiGroups": ["a"], "resources": ["x"]}],
        }),
        json!({
            "metadata": {"name": "cyc-b", "labels": {"cyc": "b"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"cyc": "a"}}]},
            "rules": [{"verbs": ["get"], "apiGroups": ["b"], "resources": ["x"]}],
        }),
    ];
    let crbs = vec![
        crb("admins", "admin", user("ada")),
        crb("expr", "expr", user("eve")),
    ];
    let (p, w) = Policy::from_objects(&crs, &[], &crbs, &[]);
    assert!(w.is_empty(), "{w:?}");

    // (case, user, verb, group, resource, allowed)
    let rows: &[(&str, &str, &str, &str, &str, bool)] = &[
        ("own rules kept", "ada", "delete", "", "namespaces", true),
        (
            "two-level aggregation admin <- edit <- edit-pods",
            "ada",
            "create",
            "",
            "pods",
            true,
        ),
        ("not aggregated", "ada", "get", "", "configmaps", false),
        ("expr own rules", "eve", "get", "", "configmaps", true),
        (
            "In matches silver",
            "eve",
            "list",
            "apps",
            "deployments",
            true,
        ),
        (
            "DoesNotExist excludes legacy",
            "eve",
            "list",
            "batch",
            "jobs",
            false,
        ),
        (
            "Exists + NotIn matches dev",
            "eve",
            "get",
            "",
            "events",
            true,
        ),
        ("NotIn excludes prod", "eve", "get", "", "secrets", false),
        (
            "NotIn matches a missing label",
            "eve",
            "get",
            "",
            "services",
            true,
        ),
    ];
    for (case, name, verb, group, resource, allowed) in rows {
        let u = UserInfo::new(*name, Vec::<String>::new());
        let d = p.authorize(&Attributes::resource(
            &u, verb, group, resource, "", "ns", "n",
        ));
        assert_eq!(d.allowed, *allowed, "{case}");
    }

    // The aggregated rules, in order, without duplicates.
    assert_eq!(
        p.role_rules("ClusterRole", "", "admin").unwrap(),
        vec![
            rule(&["delete"], &[""], &["namespaces"]),
            rule(&["create", "delete"], &[""], &["pods"]),
        ]
    );
    assert_eq!(
        p.role_rules("ClusterRole", "", "edit").unwrap(),
        vec![rule(&["create", "delete"], &[""], &["pods"])]
    );
    let expr: Vec<String> = p
        .role_rules("ClusterRole", "", "expr")
        .unwrap()
        .iter()
        .map(|r| r.resources[0].clone())
        .collect();
    assert_eq!(expr, ["configmaps", "deployments", "events", "services"]);
    // A cycle terminates, and each side gets both rule sets.
    assert_eq!(p.role_rules("ClusterRole", "", "cyc-a").unwrap().len(), 2);
    assert_eq!(p.role_rules("ClusterRole", "", "cyc-b").unwrap().len(), 2);
}

#[test]
fn rules_for_and_role_rules() {
    let p = fixture();
    let alice = UserInfo::new("alice", ["system:authenticated"]);
    let rules = p.rules_for(&alice, "infra");
    assert_eq!(
        rules,
        vec![
            rule(&["get", "update"], &[""], &["configmaps"]),
            rule(&["get", "list"], &[""], &["secrets"]),
        ]
    );
    assert!(p.rules_for(&alice, "other").is_empty());
    assert!(p.rules_for(&alice, "").is_empty());

    // Cluster-wide rules are included in every namespace, before local ones.
    let dan = UserInfo::new("dan", ["devs", "node-watchers"]);
    assert_eq!(
        p.rules_for(&dan, "infra"),
        vec![
            rule(&["get", "list"], &[""], &["nodes"]),
            rule(&["get", "list", "watch"], &[""], &["pods"]),
        ]
    );
    assert_eq!(
        p.rules_for(&dan, ""),
        vec![rule(&["get", "list"], &[""], &["nodes"])]
    );

    let carol = UserInfo::new("carol", Vec::<String>::new());
    let (rules, errors) = p.rules_for_with_errors(&carol, "infra");
    assert!(rules.is_empty());
    assert_eq!(errors.len(), 2);

    assert_eq!(
        p.role_rules("Role", "infra", "cm-editor"),
        Some(vec![rule(&["get", "update"], &[""], &["configmaps"])])
    );
    assert_eq!(p.role_rules("Role", "other", "cm-editor"), None);
    assert_eq!(p.role_rules("ClusterRole", "", "nope"), None);
    assert_eq!(p.role_rules("Group", "", "everything"), None);
    assert_eq!(
        p.role_rules("ClusterRole", "ignored", "probes"),
        Some(vec![url_rule(
            &["get"],
            &["/healthz", "/apis/*", "/readyz*"]
        )])
    );
}
