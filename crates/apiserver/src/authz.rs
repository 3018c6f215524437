//! Authorization: RBAC with Kubernetes semantics over the stored Role, ClusterRole, RoleBinding
//! and ClusterRoleBinding objects, plus impersonation. The compiled policy is rebuilt whenever
//! an RBAC object changes, so a request costs a few hash lookups.

use std::sync::{Arc, RwLock};

use ferrometal_apimachinery::rbac::{self, Attributes, Decision, Policy, UserInfo};
use http::HeaderMap;
use serde_json::Value;

use crate::authn::{self, SA_PREFIX};
use crate::request::{self, ResPath};
use crate::status::ApiError;
use crate::store::Store;

pub const ROLES: &str = "roles.rbac.authorization.k8s.io";
pub const CLUSTER_ROLES: &str = "clusterroles.rbac.authorization.k8s.io";
pub const ROLE_BINDINGS: &str = "rolebindings.rbac.authorization.k8s.io";
pub const CLUSTER_ROLE_BINDINGS: &str = "clusterrolebindings.rbac.authorization.k8s.io";

/// Storage keys whose objects make up the policy.
pub fn is_rbac_key(key: &str) -> bool {
    matches!(
        key,
        ROLES | CLUSTER_ROLES | ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS
    )
}

/// The current compiled policy; swapped as a whole.
#[derive(Default)]
pub struct PolicyCache {
    policy: RwLock<Arc<Policy>>,
}

impl PolicyCache {
    pub fn get(&self) -> Arc<Policy> {
        self.policy.read().expect("policy lock").clone()
    }

    /// Recompiles from the store (after an RBAC write, and at start).
    pub fn rebuild(&self, store: &Store) {
        let (cr, r, crb, rb) = store.read(|s| {
            let all =
                |key: &str| -> Vec<Value> { s.list(key, None, None).map(|o| o.value()).collect() };
            (
                all(CLUSTER_ROLES),
                all(ROLES),
                all(CLUSTER_ROLE_BINDINGS),
                all(ROLE_BINDINGS),
            )
        });
        let (policy, warnings) = Policy::from_objects(&cr, &r, &crb, &rb);
        for w in warnings {
            tracing::warn!(warning = %w, "RBAC object ignored");
        }
        *self.policy.write().expect("policy lock") = Arc::new(policy);
    }
}

/// What a request asks, in the authorizer's terms.
#[derive(Debug, Clone, Default)]
pub struct RequestAttrs {
    pub verb: String,
    pub resource: Option<ResPath>,
    /// The URL path, for non-resource requests.
    pub path: String,
}

impl RequestAttrs {
    pub fn as_attributes<'a>(&'a self, user: &'a UserInfo) -> Attributes<'a> {
        match &self.resource {
            Some(p) => Attributes::resource(
                user,
                &self.verb,
                &p.group,
                &p.resource,
                p.subresource.as_deref().unwrap_or_default(),
                request::authz_namespace(p),
                p.name.as_deref().unwrap_or_default(),
            ),
            None => Attributes::non_resource(user, &self.verb, &self.path),
        }
    }
}

/// 403 in kube-apiserver's words when the policy denies `attrs` to `user`.
pub fn authorize(policy: &Policy, user: &UserInfo, attrs: &RequestAttrs) -> Result<(), ApiError> {
    let a = attrs.as_attributes(user);
    let Decision {
        allowed, reason, ..
    } = policy.authorize(&a);
    if allowed {
        return Ok(());
    }
    let reason = if reason.starts_with("RBAC: allowed") {
        ""
    } else {
        reason.as_str()
    };
    let mut e = ApiError::forbidden(rbac::forbidden_status_message(&a, reason));
    if let Some(p) = &attrs.resource {
        let kind = match &p.subresource {
            Some(s) => format!("{}/{s}", p.resource),
            None => p.resource.clone(),
        };
        e = e.with_name_kind(p.name.as_deref().unwrap_or_default(), &p.group, &kind);
    }
    Err(e)
}

/// Whether `user` may do `verb` on a resource: for checks made inside a request (escalation,
/// impersonation).
pub fn allowed(
    policy: &Policy,
    user: &UserInfo,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    policy
        .authorize(&Attributes::resource(
            user, verb, group, resource, "", namespace, name,
        ))
        .allowed
}

/// The namespace and name of a ServiceAccount user name, as kube-apiserver splits it: exactly
/// `system:serviceaccount:NS:NAME` with a valid namespace and name. Anything else (an empty
/// part, a third colon) is an ordinary user name, which gets no ServiceAccount groups.
fn service_account(user: &str) -> Option<(&str, &str)> {
    let (ns, name) = user.strip_prefix(SA_PREFIX)?.split_once(':')?;
    let valid = crate::meta::dns_label_errors(ns).is_empty()
        && crate::meta::dns_subdomain_errors(name).is_empty();
    valid.then_some((ns, name))
}

/// Applies `Impersonate-User` / `Impersonate-Group` headers: the caller needs `impersonate` on
/// the users, groups or serviceaccounts named, as on kube-apiserver.
pub fn impersonate(
    policy: &Policy,
    caller: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let header_values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let users = header_values("impersonate-user");
    let groups = header_values("impersonate-group");
    if users.is_empty() {
        if !groups.is_empty() {
            return Err(ApiError::bad_request(
                "requested impersonation of groups without a user",
            ));
        }
        return Ok(caller);
    }
    let target = &users[0];
    let deny = |what: &str, name: &str| {
        ApiError::forbidden(format!(
            "{what} \"{name}\" is forbidden: User \"{}\" cannot impersonate resource \"{what}\" in API group \"\" at the cluster scope",
            caller.name
        ))
    };
    let ok = match service_account(target) {
        Some((ns, name)) => allowed(
            policy,
            &caller,
            "impersonate",
            "",
            "serviceaccounts",
            ns,
            name,
        ),
        None => allowed(policy, &caller, "impersonate", "", "users", "", target),
    };
    if !ok {
        return Err(deny("users", target));
    }
    for g in &groups {
        if !allowed(policy, &caller, "impersonate", "", "groups", "", g) {
            return Err(deny("groups", g));
        }
    }
    let mut out = match service_account(target) {
        Some((ns, name)) if groups.is_empty() => authn::service_account_user(ns, name),
        _ => UserInfo {
            name: target.clone(),
            groups,
        },
    };
    if !out.groups.iter().any(|g| g == authn::AUTHENTICATED) {
        out.groups.push(authn::AUTHENTICATED.into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::service_account;

    #[test]
    fn only_well_formed_service_account_names_are_service_accounts() {
        assert_eq!(
            service_account("system:serviceaccount:dev:robot"),
            Some(("dev", "robot"))
        );
        for not_one in [
            "system:serviceaccount:dev:x:y",
            "system:serviceaccount:dev:",
            "system:serviceaccount::x",
            "system:serviceaccount:dev",
            "system:serviceaccount:Dev:x",
            "alice",
        ] {
            assert_eq!(service_account(not_one), None, "{not_one}");
        }
    }
}
