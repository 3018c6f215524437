//! kube-apiserver's 403 texts for a denied request.

use super::attributes::Attributes;
use super::quote::go_quote;

/// kube-apiserver's `forbiddenMessage`, the 403 text for a denied request:
///
/// - `User "alice" cannot list resource "secrets" in API group "" in the namespace "infra"`
/// - `User "alice" cannot list resource "nodes" in API group "" at the cluster scope`
/// - `User "alice" cannot get resource "baremetalhosts/status" in API group "metal3.io" in the namespace "x"`
/// - `User "alice" cannot get path "/metrics"`
///
/// Strings are quoted as Go's `%q` does. Use [`forbidden_status_message`]
/// for the `Status.message` kube-apiserver actually sends.
pub fn forbidden_message(a: &Attributes) -> String {
    let user = go_quote(&a.user.name);
    if !a.resource_request {
        return format!("User {user} cannot {} path {}", a.verb, go_quote(a.path));
    }
    let resource = if a.subresource.is_empty() {
        go_quote(a.resource)
    } else {
        go_quote(&format!("{}/{}", a.resource, a.subresource))
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {}", go_quote(a.namespace))
    };
    format!(
        "User {user} cannot {} resource {resource} in API group {} {scope}",
        a.verb,
        go_quote(a.api_group)
    )
}

/// The `message` of the 403 Status kube-apiserver sends for a denied
/// request (`responsewriters.Forbidden` + `apierrors.NewForbidden`):
///
/// - `secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "infra"`
/// - `secrets "db" is forbidden: User "alice" cannot get resource …`
/// - `baremetalhosts.metal3.io "h0" is forbidden: User "alice" cannot get resource "baremetalhosts/status" …`
/// - `forbidden: User "alice" cannot get path "/metrics"`
///
/// `reason` is the authorizer's deny reason ([`Decision::reason`](super::Decision::reason)); when
/// non-empty it is appended as `: REASON`. `&`, `<`, `>` in the
/// [`forbidden_message`] part are HTML-escaped as kube-apiserver does. The
/// Status has `reason: Forbidden`, `code: 403` and `details` `{name, group,
/// kind: RESOURCE}`.
pub fn forbidden_status_message(a: &Attributes, reason: &str) -> String {
    let msg = forbidden_message(a)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    let (group, resource) = if a.resource_request {
        (a.api_group, a.resource)
    } else {
        ("", "")
    };
    if group.is_empty() && resource.is_empty() {
        return format!("forbidden: {err}");
    }
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    if a.resource_request && !a.name.is_empty() {
        format!("{qualified} {} is forbidden: {err}", go_quote(a.name))
    } else {
        format!("{qualified} is forbidden: {err}")
    }
}
