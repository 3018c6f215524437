//! RBAC escalation prevention, as Kubernetes does it. Creating or updating a Role or ClusterRole needs every permission it grants, or the
//! `escalate` verb on it; a binding needs the permissions of the role it references, or the
//! `bind` verb on that role.

use ferrometal_apimachinery::rbac::{self, Policy, PolicyRule, UserInfo};
use serde_json::Value;

use crate::authz::{self, CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES};
use crate::registry::Resource;
use crate::status::ApiError;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn forbidden(res: &Resource, name: &str, why: String) -> ApiError {
    ApiError::forbidden(format!("{} \"{name}\" is forbidden: {why}", res.key)).with_name_kind(
        name,
        &res.group,
        &res.plural,
    )
}

fn escalation(res: &Resource, name: &str, user: &UserInfo, missing: &[PolicyRule]) -> ApiError {
    forbidden(res, name, rbac::escalation_message(user, missing))
}

/// Checks a Role, ClusterRole, RoleBinding or ClusterRoleBinding about to be stored; other
/// objects pass.
pub fn check(
    policy: &Policy,
    user: &UserInfo,
    res: &Resource,
    ns: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    if !res.builtin {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match res.key.as_str() {
        ROLES | CLUSTER_ROLES => {
            if authz::allowed(policy, user, "escalate", RBAC_GROUP, &res.plural, ns, name) {
                return Ok(());
            }
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                return Err(forbidden(
                    res,
                    name,
                    format!(
                        "user \"{}\" must have the escalate verb on clusterroles to set an aggregationRule",
                        user.name
                    ),
                ));
            }
            let rules: Vec<PolicyRule> = obj
                .get("rules")
                .cloned()
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| ApiError::bad_request(format!("rules: {e}")))?
                .unwrap_or_default();
            let held = policy.rules_for(user, ns);
            rbac::covers(&held, &rules).map_err(|missing| escalation(res, name, user, &missing))
        }
        ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS => {
            let kind = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (plural, role_ns) = match kind {
                "Role" => ("roles", ns),
                "ClusterRole" => ("clusterroles", ""),
                other => {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "roleRef.kind: Unsupported value: {other:?}: supported values: \"Role\", \"ClusterRole\""
                        ),
                    ));
                }
            };
            if authz::allowed(policy, user, "bind", RBAC_GROUP, plural, role_ns, role)
                || authz::allowed(policy, user, "bind", RBAC_GROUP, plural, ns, role)
            {
                return Ok(());
            }
            let Some(rules) = policy.role_rules(kind, ns, role) else {
                return Err(forbidden(
                    res,
                    name,
                    format!(
                        "user \"{}\" cannot bind {kind} {role:?}: it does not exist and binding it needs the bind verb",
                        user.name
                    ),
                ));
            };
            let held = policy.rules_for(user, ns);
            rbac::covers(&held, &rules).map_err(|missing| escalation(res, name, user, &missing))
        }
        _ => Ok(()),
    }
}
