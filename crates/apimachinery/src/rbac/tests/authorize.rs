//! `Policy::authorize`: the decision table, binding visit order, and the subject index.

use serde_json::json;

use super::fixtures::{cluster_role, crb, fixture, group, rb, user};
use crate::rbac::{Attributes, Policy, UserInfo};

struct Row {
    case: &'static str,
    user: &'static str,
    groups: &'static [&'static str],
    verb: &'static str,
    /// `None` = non-resource request to `path`.
    resource: Option<(&'static str, &'static str, &'static str)>,
    namespace: &'static str,
    name: &'static str,
    path: &'static str,
    allowed: bool,
    /// Expected reason (checked when `Some`).
    reason: Option<&'static str>,
}

#[allow(clippy::too_many_arguments)] // one table row, read positionally
const fn res(
    case: &'static str,
    user: &'static str,
    groups: &'static [&'static str],
    verb: &'static str,
    gr_sub: (&'static str, &'static str, &'static str),
    namespace: &'static str,
    name: &'static str,
    allowed: bool,
) -> Row {
    Row {
        case,
        user,
        groups,
        verb,
        resource: Some(gr_sub),
        namespace,
        name,
        path: "",
        allowed,
        reason: None,
    }
}

const fn url(
    case: &'static str,
    user: &'static str,
    groups: &'static [&'static str],
    verb: &'static str,
    path: &'static str,
    allowed: bool,
) -> Row {
    Row {
        case,
        user,
        groups,
        verb,
        resource: None,
        namespace: "",
        name: "",
        path,
        allowed,
        reason: None,
    }
}

impl Row {
    const fn because(mut self, reason: &'static str) -> Row {
        self.reason = Some(reason);
        self
    }
}

#[test]
fn authorize_table() {
    let policy = fixture();
    let rows = [
        // Wildcards.
        res("star everything: delete nodes", "root", &[], "delete", ("", "nodes", ""), "", "n1", true)
            .because(r#"RBAC: allowed by ClusterRoleBinding "root" of ClusterRole "everything" to User "root""#),
        res("star everything: custom group subresource", "root", &[], "patch", ("metal3.io", "baremetalhosts", "status"), "x", "h0", true),
        res("star resource covers subresources", "viewer", &[], "get", ("", "pods", "log"), "x", "p", true),
        res("star resource, verb still checked", "viewer", &[], "delete", ("", "pods", ""), "x", "p", false),
        res("unknown user denied", "mallory", &[], "get", ("", "pods", ""), "x", "p", false).because(""),
        // Resources and subresources.
        res("pod-reader lists pods everywhere", "pat", &[], "list", ("", "pods", ""), "any", "", true),
        res("pod-reader: wrong group", "pat", &[], "list", ("apps", "pods", ""), "any", "", false),
        res("pod-reader: wrong verb", "pat", &[], "delete", ("", "pods", ""), "any", "p", false),
        res("pods does not grant pods/log", "pat", &[], "get", ("", "pods", "log"), "any", "p", false),
        res("pods/* is not a wildcard (as Kubernetes)", "pat", &[], "get", ("", "pods", "exec"), "any", "p", false),
        res("*/scale matches deployments/scale", "hpa", &["autoscalers"], "update", ("apps", "deployments", "scale"), "x", "d", true)
            .because(r#"RBAC: allowed by ClusterRoleBinding "scalers" of ClusterRole "scaler" to Group "autoscalers""#),
        res("*/scale does not match deployments", "hpa", &["autoscalers"], "get", ("apps", "deployments", ""), "x", "d", false),
        res("*/scale does not match deployments/status", "hpa", &["autoscalers"], "get", ("apps", "deployments", "status"), "x", "d", false),
        res("baremetalhosts/status allowed", "bob", &[], "patch", ("metal3.io", "baremetalhosts", "status"), "x", "h0", true),
        res("baremetalhosts/status does not grant baremetalhosts", "bob", &[], "get", ("metal3.io", "baremetalhosts", ""), "x", "h0", false),
        res("baremetalhosts/status: other group", "bob", &[], "get", ("other.io", "baremetalhosts", "status"), "x", "h0", false),
        // resourceNames.
        res("resourceNames: get named", "sam", &[], "get", ("", "secrets", ""), "x", "db", true),
        res("resourceNames: get other name", "sam", &[], "get", ("", "secrets", ""), "x", "api", false),
        res("resourceNames: list has no name", "sam", &[], "list", ("", "secrets", ""), "x", "", false),
        res("resourceNames: create has no name", "sam", &[], "create", ("", "secrets", ""), "x", "", false),
        // Cluster vs namespaced bindings.
        res("cluster binding at cluster scope", "nina", &["node-watchers"], "list", ("", "nodes", ""), "", "", true),
        res("Role in its namespace", "alice", &[], "update", ("", "configmaps", ""), "infra", "c", true)
            .because(r#"RBAC: allowed by RoleBinding "cm/infra" of Role "cm-editor" to User "alice""#),
        res("Role elsewhere", "alice", &[], "update", ("", "configmaps", ""), "other", "c", false),
        res("Role not at cluster scope", "alice", &[], "update", ("", "configmaps", ""), "", "c", false),
        res("RoleBinding to ClusterRole in its namespace", "alice", &[], "list", ("", "secrets", ""), "infra", "", true)
            .because(r#"RBAC: allowed by RoleBinding "secrets/infra" of ClusterRole "secret-reader" to User "alice""#),
        res("RoleBinding to ClusterRole elsewhere", "alice", &[], "list", ("", "secrets", ""), "kube-system", "", false),
        res("RoleBinding to ClusterRole not cluster-wide", "alice", &[], "list", ("", "secrets", ""), "", "", false),
        // ServiceAccounts.
        res("SA subject with defaulted namespace", "system:serviceaccount:infra:builder", &["system:serviceaccounts"], "get", ("", "pods", ""), "infra", "p", true)
            .because(r#"RBAC: allowed by RoleBinding "sa-default/infra" of ClusterRole "pod-reader" to ServiceAccount "builder/infra""#),
        res("SA of same name in other namespace", "system:serviceaccount:other:builder", &[], "get", ("", "pods", ""), "infra", "p", false),
        res("SA subject with explicit namespace", "system:serviceaccount:ci:deployer", &[], "get", ("", "secrets", ""), "infra", "s", true)
            .because(r#"RBAC: allowed by RoleBinding "sa-other/infra" of ClusterRole "secret-reader" to ServiceAccount "deployer/ci""#),
        res("SA explicit namespace is not the binding's", "system:serviceaccount:infra:deployer", &[], "get", ("", "secrets", ""), "infra", "s", false),
        res("SA in ClusterRoleBinding", "system:serviceaccount:kube-system:ctrl", &[], "list", ("", "nodes", ""), "", "", true)
            .because(r#"RBAC: allowed by ClusterRoleBinding "sa-cluster" of ClusterRole "node-reader" to ServiceAccount "ctrl/kube-system""#),
        res("plain user named like the SA's short name", "ctrl", &[], "list", ("", "nodes", ""), "", "", false),
        // Groups.
        res("group subject in namespace", "dan", &["devs"], "watch", ("", "pods", ""), "infra", "", true)
            .because(r#"RBAC: allowed by RoleBinding "devs/infra" of ClusterRole "pod-reader" to Group "devs""#),
        res("group subject, other namespace", "dan", &["devs"], "watch", ("", "pods", ""), "other", "", false),
        res("user named like the group", "devs", &[], "watch", ("", "pods", ""), "infra", "", false),
        // system:masters.
        res("system:masters allowed anything", "admin", &["system:masters"], "escalate", ("rbac.authorization.k8s.io", "clusterroles", ""), "", "x", true)
            .because(""),
        url("system:masters any path", "admin", &["system:authenticated", "system:masters"], "delete", "/whatever", true),
        // Missing roleRef.
        res("missing roleRefs grant nothing, reason says why", "carol", &[], "get", ("", "pods", ""), "infra", "p", false)
            .because(r#"RBAC: [clusterrole.rbac.authorization.k8s.io "does-not-exist" not found, role.rbac.authorization.k8s.io "no-such-role" not found]"#),
        res("missing roleRef outside its namespace is not consulted", "carol", &[], "get", ("", "pods", ""), "other", "p", false)
            .because(""),
        // Non-resource URLs.
        url("/healthz exact", "anon", &["system:unauthenticated"], "get", "/healthz", true),
        url("/healthz/ready is not /healthz", "anon", &["system:unauthenticated"], "get", "/healthz/ready", false),
        url("/apis/* prefix", "anon", &["system:unauthenticated"], "get", "/apis/metal3.io/v1alpha1", true),
        url("/apis/* needs the slash", "anon", &["system:unauthenticated"], "get", "/apis", false),
        url("/readyz* prefix without slash", "anon", &["system:unauthenticated"], "get", "/readyz/etcd", true),
        url("non-resource verb checked", "anon", &["system:unauthenticated"], "post", "/healthz", false),
        url("* URL matches anything", "prom", &[], "get", "/metrics", true)
            .because(r#"RBAC: allowed by ClusterRoleBinding "metrics" of ClusterRole "metrics-all" to User "prom""#),
        url("resource rules never match paths", "root", &[], "get", "/metrics", false),
        res("URL rules never match resources", "prom", &[], "get", ("", "pods", ""), "", "", false),
    ];
    let mut failures = Vec::new();
    for row in &rows {
        let u = UserInfo::new(row.user, row.groups.iter().copied());
        let a = match row.resource {
            Some((g, r, s)) => Attributes::resource(&u, row.verb, g, r, s, row.namespace, row.name),
            None => Attributes::non_resource(&u, row.verb, row.path),
        };
        let d = policy.authorize(&a);
        if d.allowed != row.allowed {
            failures.push(format!(
                "{}: allowed={} want {} ({d:?})",
                row.case, d.allowed, row.allowed
            ));
        }
        if let Some(reason) = row.reason
            && d.reason != reason
        {
            failures.push(format!(
                "{}: reason {:?} want {reason:?}",
                row.case, d.reason
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn binding_visit_order_and_first_subject() {
    // Two bindings allow; the ClusterRoleBinding is visited first, and
    // within a binding the first matching subject is named.
    let crs = vec![cluster_role(
        "r",
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]),
    )];
    let crbs = vec![crb(
        "both",
        "r",
        json!([{"kind": "Group", "name": "g"}, {"kind": "User", "name": "u"}]),
    )];
    let rbs = vec![rb("ns", "local", "ClusterRole", "r", user("u"))];
    let (p, w) = Policy::from_objects(&crs, &[], &crbs, &rbs);
    assert!(w.is_empty(), "{w:?}");
    let u = UserInfo::new("u", ["g"]);
    let d = p.authorize(&Attributes::resource(&u, "get", "", "pods", "", "ns", "p"));
    assert_eq!(
        d.reason,
        r#"RBAC: allowed by ClusterRoleBinding "both" of ClusterRole "r" to Group "g""#
    );
}

#[test]
fn thousand_bindings_are_indexed() {
    let crs = vec![cluster_role(
        "reader",
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]),
    )];
    let mut crbs = Vec::new();
    let mut rbs = Vec::new();
    for i in 0..500 {
        crbs.push(crb(&format!("c{i}"), "reader", user(&format!("user-{i}"))));
        rbs.push(rb(
            &format!("ns-{}", i % 50),
            &format!("r{i}"),
            "ClusterRole",
            "reader",
            group(&format!("team-{i}")),
        ));
    }
    let (p, w) = Policy::from_objects(&crs, &[], &crbs, &rbs);
    assert!(w.is_empty());

    let u = UserInfo::new("user-7", ["team-107", "team-3", "system:authenticated"]);
    // Only the bindings naming one of the user's identities are looked at:
    // c7, plus r107 (ns-7); r3 is in ns-3.
    assert_eq!(p.applicable(&u, "ns-7").len(), 2);
    assert_eq!(p.applicable(&u, "ns-3").len(), 2);
    assert_eq!(p.applicable(&u, "ns-9").len(), 1);
    assert_eq!(p.applicable(&UserInfo::default(), "ns-7").len(), 0);

    let denied = Attributes::resource(&u, "delete", "", "configmaps", "", "ns-7", "c");
    let allowed = Attributes::resource(&u, "get", "", "configmaps", "", "ns-3", "c");
    assert!(!p.authorize(&denied).allowed);
    assert_eq!(
        p.authorize(&allowed).reason,
        r#"RBAC: allowed by ClusterRoleBinding "c7" of ClusterRole "reader" to User "user-7""#
    );
    let n = 20_000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(p.authorize(std::hint::black_box(&denied)));
    }
    let per_call = start.elapsed() / n;
    eprintln!("authorize over 1,000 bindings: {per_call:?} per call (unoptimised)");
    // Microseconds even unoptimised; generous bound against slow CI.
    assert!(
        per_call < std::time::Duration::from_micros(100),
        "{per_call:?} per call"
    );
}
