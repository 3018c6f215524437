//! The compiled [`Policy`] and its questions: [`Policy::authorize`] (the RBAC
//! authorizer behind the privileged-group one), [`Policy::rules_for`] (Kubernetes'
//! `RulesFor`) and [`Policy::role_rules`].

use std::collections::{HashMap, HashSet};

use super::attributes::{Attributes, PRIVILEGED_GROUP, UserInfo};
use super::binding::{Binding, Hit, Rules, SubjectIndex};
use super::rule::PolicyRule;

/// An authorization decision. `reason` names the granting binding on allow,
/// as Kubernetes does (`RBAC: allowed by ClusterRoleBinding "x" of
/// ClusterRole "y" to User "alice"`); on deny it is empty, or
/// `RBAC: …` with the resolution errors of applicable bindings whose role is
/// missing. Empty for `system:masters`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// A compiled snapshot of all RBAC objects. Build one with
/// [`Policy::from_objects`] whenever an RBAC object changes; it is immutable
/// and cheap to share (`Arc<Policy>`). `Policy::default()` has no objects and
/// so allows only `system:masters`.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Effective (aggregated) rules by ClusterRole name.
    pub(super) cluster_roles: HashMap<String, Rules>,
    /// Role rules by namespace, then name.
    pub(super) roles: HashMap<String, HashMap<String, Rules>>,
    /// ClusterRoleBindings first (in input order), then RoleBindings, so that
    /// sorting by index visits them in Kubernetes' order.
    pub(super) bindings: Vec<Binding>,
    pub(super) cluster_index: SubjectIndex,
    pub(super) namespace_index: HashMap<String, SubjectIndex>,
}

impl Policy {
    /// The bindings that apply to `user` in `namespace`, in Kubernetes' visit
    /// order (ClusterRoleBindings, then the namespace's RoleBindings), each
    /// with the first of its subjects that names the user.
    pub(super) fn applicable(&self, user: &UserInfo, namespace: &str) -> Vec<Hit> {
        let mut hits = Vec::new();
        self.cluster_index.collect(user, &mut hits);
        if !namespace.is_empty()
            && let Some(index) = self.namespace_index.get(namespace)
        {
            index.collect(user, &mut hits);
        }
        hits.sort_unstable_by_key(|h| (h.binding, h.subject));
        hits.dedup_by_key(|h| h.binding);
        hits
    }

    /// Kubernetes' RBAC authorizer, preceded by the privileged-group
    /// authorizer (`system:masters` may do anything).
    pub fn authorize(&self, a: &Attributes) -> Decision {
        if a.user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        let mut errors: Vec<&str> = Vec::new();
        for hit in self.applicable(a.user, a.namespace) {
            let binding = &self.bindings[hit.binding];
            match &binding.rules {
                Ok(rules) => {
                    if rules.iter().any(|r| r.allows(a)) {
                        return Decision {
                            allowed: true,
                            reason: format!("RBAC: allowed by {}", binding.describe(hit.subject)),
                        };
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        Decision {
            allowed: false,
            reason: if errors.is_empty() {
                String::new()
            } else {
                format!("RBAC: {}", aggregate_errors(&errors))
            },
        }
    }

    /// For SelfSubjectRulesReview and escalation checks (Kubernetes'
    /// `RulesFor`): the rules of every ClusterRoleBinding naming `user`, then
    /// of every RoleBinding in `namespace` naming `user` (none when
    /// `namespace` is empty), in that order, duplicates included as in
    /// Kubernetes. RBAC rules only: nothing is added for `system:masters`.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        self.rules_for_with_errors(user, namespace).0
    }

    /// [`Policy::rules_for`] plus the resolution errors of applicable
    /// bindings whose role is missing (e.g.
    /// `clusterrole.rbac.authorization.k8s.io "x" not found`), for
    /// SelfSubjectRulesReview's `evaluationError`.
    pub fn rules_for_with_errors(
        &self,
        user: &UserInfo,
        namespace: &str,
    ) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        for hit in self.applicable(user, namespace) {
            match &self.bindings[hit.binding].rules {
                Ok(r) => rules.extend(r.iter().cloned()),
                Err(e) => errors.push(e.clone()),
            }
        }
        (rules, errors)
    }

    /// The effective rules of the role a roleRef names: kind `Role` in
    /// `namespace`, or kind `ClusterRole` (aggregation resolved; `namespace`
    /// ignored). `None` when it does not exist or `kind` is neither.
    pub fn role_rules(&self, kind: &str, namespace: &str, name: &str) -> Option<Vec<PolicyRule>> {
        let rules = match kind {
            "Role" => self.roles.get(namespace)?.get(name)?,
            "ClusterRole" => self.cluster_roles.get(name)?,
            _ => return None,
        };
        Some(rules.to_vec())
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as is, several
/// (deduplicated) as `[a, b]`.
fn aggregate_errors(errors: &[&str]) -> String {
    let mut seen = HashSet::new();
    let unique: Vec<&str> = errors.iter().copied().filter(|e| seen.insert(*e)).collect();
    if unique.len() == 1 {
        unique[0].to_string()
    } else {
        format!("[{}]", unique.join(", "))
    }
}
