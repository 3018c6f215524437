//! The 403 texts.

use crate::rbac::{Attributes, UserInfo, forbidden_message, forbidden_status_message};

#[test]
fn forbidden_message_table() {
    let alice = UserInfo::new("alice", ["system:authenticated"]);
    // (attributes, reason, short, status)
    let rows = [
        (
            Attributes::resource(&alice, "list", "", "secrets", "", "infra", ""),
            "",
            r#"User "alice" cannot list resource "secrets" in API group "" in the namespace "infra""#,
            r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "infra""#,
        ),
        (
            Attributes::resource(&alice, "list", "", "secrets", "", "", ""),
            "",
            r#"User "alice" cannot list resource "secrets" in API group "" at the cluster scope"#,
            r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" at the cluster scope"#,
        ),
        (
            Attributes::resource(&alice, "get", "", "secrets", "", "infra", "db"),
            "",
            r#"User "alice" cannot get resource "secrets" in API group "" in the namespace "infra""#,
            r#"secrets "db" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "infra""#,
        ),
        (
            Attributes::resource(
                &alice,
                "get",
                "metal3.io",
                "baremetalhosts",
                "status",
                "x",
                "h0",
            ),
            "",
            r#"User "alice" cannot get resource "baremetalhosts/status" in API group "metal3.io" in the namespace "x""#,
            r#"baremetalhosts.metal3.io "h0" is forbidden: User "alice" cannot get resource "baremetalhosts/status" in API group "metal3.io" in the namespace "x""#,
        ),
        (
            Attributes::non_resource(&alice, "get", "/metrics"),
            "",
            r#"User "alice" cannot get path "/metrics""#,
            r#"forbidden: User "alice" cannot get path "/metrics""#,
        ),
        (
            Attributes::resource(&alice, "get", "", "pods", "", "infra", "p"),
            r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#,
            r#"User "alice" cannot get resource "pods" in API group "" in the namespace "infra""#,
            r#"pods "p" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "infra": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#,
        ),
    ];
    for (a, reason, short, status) in rows {
        assert_eq!(forbidden_message(&a), short);
        assert_eq!(forbidden_status_message(&a, reason), status);
    }

    // Go %q quoting and the HTML sanitizer.
    let odd = UserInfo::new("a\"b\n<c>&\u{200b}", Vec::<String>::new());
    let a = Attributes::non_resource(&odd, "get", "/x");
    assert_eq!(
        forbidden_message(&a),
        r#"User "a\"b\n<c>&\u200b" cannot get path "/x""#
    );
    assert_eq!(
        forbidden_status_message(&a, ""),
        r#"forbidden: User "a\"b\n&lt;c&gt;&amp;\u200b" cannot get path "/x""#
    );
}
