//! Compiled bindings: each with its role's rules (or why there are none) and its
//! subjects, and the index that finds the bindings naming a user or group.

use std::collections::HashMap;
use std::sync::Arc;

use super::attributes::UserInfo;
use super::quote::go_quote;
use super::rule::PolicyRule;

pub(super) type Rules = Arc<[PolicyRule]>;

#[derive(Debug, Clone)]
pub(super) struct Subject {
    pub(super) kind: String,
    pub(super) name: String,
    /// As written; may be empty.
    pub(super) namespace: String,
}

#[derive(Debug, Clone)]
pub(super) struct Binding {
    /// Empty for ClusterRoleBindings.
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) role_kind: String,
    pub(super) role_name: String,
    /// The role's rules, or Kubernetes' error text when the role is missing.
    pub(super) rules: Result<Rules, String>,
    pub(super) subjects: Vec<Subject>,
}

impl Binding {
    pub(super) fn describe(&self, subject: usize) -> String {
        let s = &self.subjects[subject];
        let subject = if s.kind == "ServiceAccount" {
            let ns = if s.namespace.is_empty() {
                &self.namespace
            } else {
                &s.namespace
            };
            format!("{} {}", s.kind, go_quote(&format!("{}/{}", s.name, ns)))
        } else {
            format!("{} {}", s.kind, go_quote(&s.name))
        };
        let binding = if self.namespace.is_empty() {
            format!("ClusterRoleBinding {}", go_quote(&self.name))
        } else {
            format!(
                "RoleBinding {}",
                go_quote(&format!("{}/{}", self.name, self.namespace))
            )
        };
        format!(
            "{binding} of {} {} to {subject}",
            self.role_kind,
            go_quote(&self.role_name)
        )
    }
}

/// One subject of one binding, as found in an index.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hit {
    pub(super) binding: usize,
    pub(super) subject: usize,
}

/// Bindings by the identity their subjects name. ServiceAccount subjects are
/// filed under their user name `system:serviceaccount:NS:NAME`.
#[derive(Debug, Clone, Default)]
pub(super) struct SubjectIndex {
    pub(super) users: HashMap<String, Vec<Hit>>,
    pub(super) groups: HashMap<String, Vec<Hit>>,
}

impl SubjectIndex {
    pub(super) fn collect(&self, user: &UserInfo, out: &mut Vec<Hit>) {
        if let Some(hits) = self.users.get(user.name.as_str()) {
            out.extend_from_slice(hits);
        }
        for g in &user.groups {
            if let Some(hits) = self.groups.get(g.as_str()) {
                out.extend_from_slice(hits);
            }
        }
    }
}
