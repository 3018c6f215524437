//! Rule and object builders, and the policy most authorization rows run against.

use serde_json::{Value, json};

use crate::rbac::{Policy, PolicyRule};

pub(super) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: strings(groups),
        resources: strings(resources),
        ..PolicyRule::default()
    }
}

pub(super) fn named(mut r: PolicyRule, names: &[&str]) -> PolicyRule {
    r.resource_names = strings(names);
    r
}

pub(super) fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: strings(urls),
        ..PolicyRule::default()
    }
}

pub(super) fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

pub(super) fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

pub(super) fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({"kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

pub(super) fn crb(name: &str, role: &str, subjects: Value) -> Value {
    json!({
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

pub(super) fn rb(ns: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": subjects,
    })
}

pub(super) fn user(name: &str) -> Value {
    json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
}

pub(super) fn group(name: &str) -> Value {
    json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
}

/// The policy most authorization rows run against.
pub(super) fn fixture() -> Policy {
    let cluster_roles = vec![
        cluster_role(
            "everything",
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
        ),
        cluster_role(
            "pod-reader",
            json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]),
        ),
        cluster_role(
            "pod-subresources",
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]}]),
        ),
        cluster_role(
            "scaler",
            json!([{"verbs": ["get", "update"], "apiGroups": ["*"], "resources": ["*/scale"]}]),
        ),
        cluster_role(
            "bmh-status",
            json!([{"verbs": ["get", "patch"], "apiGroups": ["metal3.io"], "resources": ["baremetalhosts/status"]}]),
        ),
        cluster_role(
            "one-secret",
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["db"]}]),
        ),
        cluster_role(
            "secret-reader",
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"]}]),
        ),
        cluster_role(
            "node-reader",
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["nodes"]}]),
        ),
        cluster_role(
            "probes",
            json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*", "/readyz*"]}]),
        ),
        cluster_role(
            "metrics-all",
            json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]),
        ),
        cluster_role(
            "resource-star",
            json!([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]}]),
        ),
    ];
    let roles = vec![role(
        "infra",
        "cm-editor",
        json!([{"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"]}]),
    )];
    let crbs = vec![
        crb("root", "everything", user("root")),
        crb("pods", "pod-reader", user("pat")),
        crb("pod-subs", "pod-subresources", user("pat")),
        crb("scalers", "scaler", group("autoscalers")),
        crb("bmh", "bmh-status", user("bob")),
        crb("one-secret", "one-secret", user("sam")),
        crb("nodes", "node-reader", group("node-watchers")),
        crb("probes", "probes", group("system:unauthenticated")),
        crb("metrics", "metrics-all", user("prom")),
        crb(
            "sa-cluster",
            "node-reader",
            json!([{"kind": "ServiceAccount", "name": "ctrl", "namespace": "kube-system"}]),
        ),
        crb("star-get", "resource-star", user("viewer")),
    ];
    let rbs = vec![
        rb("infra", "cm", "Role", "cm-editor", user("alice")),
        rb(
            "infra",
            "secrets",
            "ClusterRole",
            "secret-reader",
            user("alice"),
        ),
        rb(
            "infra",
            "sa-default",
            "ClusterRole",
            "pod-reader",
            json!([{"kind": "ServiceAccount", "name": "builder"}]),
        ),
        rb(
            "infra",
            "sa-other",
            "ClusterRole",
            "secret-reader",
            json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"}]),
        ),
        rb("infra", "devs", "ClusterRole", "pod-reader", group("devs")),
        rb(
            "infra",
            "dangling",
            "ClusterRole",
            "does-not-exist",
            user("carol"),
        ),
        rb(
            "infra",
            "dangling-role",
            "Role",
            "no-such-role",
            user("carol"),
        ),
    ];
    let (policy, warnings) = Policy::from_objects(&cluster_roles, &roles, &crbs, &rbs);
    assert!(warnings.is_empty(), "{warnings:?}");
    policy
}
