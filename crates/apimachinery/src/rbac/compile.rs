//! [`Policy::from_objects`]: stored RBAC objects compiled into a [`Policy`], with a
//! warning for every object or subject that cannot be used.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::aggregation::resolve_cluster_roles;
use super::binding::{Binding, Hit, Rules, SubjectIndex};
use super::parse::{ParsedClusterRole, meta_str, parse_aggregation, parse_binding, parse_rules};
use super::policy::Policy;
use super::quote::go_quote;
use crate::selector::labels_of;

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

impl Policy {
    /// Compiles the stored RBAC objects (Kubernetes wire-form JSON):
    /// ClusterRoles, Roles (namespaced by `metadata.namespace`),
    /// ClusterRoleBindings and RoleBindings.
    ///
    /// Objects that cannot be used (not an object, no name/namespace, rules
    /// or subjects of the wrong shape, no roleRef kind/name, a second object
    /// with the same name) are skipped and described in the returned
    /// warnings; this never panics. An aggregationRule with an invalid
    /// selector is ignored (the role keeps its own rules) with a warning.
    /// Subjects that can never match (unknown kind, ServiceAccount without a
    /// namespace in a ClusterRoleBinding) are reported but keep the binding.
    ///
    /// ClusterRole aggregation is resolved here: a ClusterRole with an
    /// aggregationRule gets its own rules plus the (themselves aggregated)
    /// rules of every other ClusterRole whose labels match any of its
    /// `clusterRoleSelectors`.
    pub fn from_objects(
        cluster_roles: &[Value],
        roles: &[Value],
        cluster_role_bindings: &[Value],
        role_bindings: &[Value],
    ) -> (Policy, Vec<String>) {
        let mut warnings = Vec::new();

        // ClusterRoles.
        let mut parsed_crs: Vec<ParsedClusterRole> = Vec::with_capacity(cluster_roles.len());
        let mut seen: HashSet<String> = HashSet::new();
        for (i, obj) in cluster_roles.iter().enumerate() {
            let Some(name) = meta_str(obj, "name") else {
                warnings.push(format!(
                    "ClusterRole at index {i}: metadata.name is missing; skipped"
                ));
                continue;
            };
            let label = format!("ClusterRole {}", go_quote(name));
            if !seen.insert(name.to_string()) {
                warnings.push(format!("{label}: duplicate name; skipped"));
                continue;
            }
            let rules = match parse_rules(obj) {
                Ok(r) => r,
                Err(e) => {
                    warnings.push(format!("{label}: {e}; skipped"));
                    seen.remove(name);
                    continue;
                }
            };
            let selectors = match parse_aggregation(obj) {
                Ok(s) => s,
                Err(e) => {
                    warnings.push(format!(
                        "{label}: {e}; aggregationRule ignored, own rules kept"
                    ));
                    None
                }
            };
            parsed_crs.push(ParsedClusterRole {
                name: name.to_string(),
                labels: labels_of(obj),
                rules,
                selectors,
            });
        }
        let cluster_roles = resolve_cluster_roles(&parsed_crs);

        // Roles.
        let mut role_map: HashMap<String, HashMap<String, Rules>> = HashMap::new();
        for (i, obj) in roles.iter().enumerate() {
            let (Some(ns), Some(name)) = (meta_str(obj, "namespace"), meta_str(obj, "name")) else {
                warnings.push(format!(
                    "Role at index {i}: metadata.name or metadata.namespace is missing; skipped"
                ));
                continue;
            };
            let label = format!("Role {}", go_quote(&format!("{ns}/{name}")));
            let rules = match parse_rules(obj) {
                Ok(r) => r,
                Err(e) => {
                    warnings.push(format!("{label}: {e}; skipped"));
                    continue;
                }
            };
            let in_ns = role_map.entry(ns.to_string()).or_default();
            if in_ns.contains_key(name) {
                warnings.push(format!("{label}: duplicate name; skipped"));
                continue;
            }
            in_ns.insert(name.to_string(), Rules::from(rules));
        }

        // Bindings: ClusterRoleBindings first, then RoleBindings.
        let mut bindings: Vec<Binding> = Vec::new();
        let mut seen_bindings: HashSet<(String, String)> = HashSet::new();
        for (namespaced, list) in [(false, cluster_role_bindings), (true, role_bindings)] {
            let kind = if namespaced {
                "RoleBinding"
            } else {
                "ClusterRoleBinding"
            };
            for (i, obj) in list.iter().enumerate() {
                let b = match parse_binding(obj, namespaced) {
                    Ok(b) => b,
                    Err(e) => {
                        let who = match (meta_str(obj, "namespace"), meta_str(obj, "name")) {
                            (Some(ns), Some(n)) if namespaced => {
                                format!("{kind} {}", go_quote(&format!("{ns}/{n}")))
                            }
                            (_, Some(n)) => format!("{kind} {}", go_quote(n)),
                            _ => format!("{kind} at index {i}"),
                        };
                        warnings.push(format!("{who}: {e}; skipped"));
                        continue;
                    }
                };
                let label = if namespaced {
                    format!(
                        "{kind} {}",
                        go_quote(&format!("{}/{}", b.namespace, b.name))
                    )
                } else {
                    format!("{kind} {}", go_quote(&b.name))
                };
                if !seen_bindings.insert((b.namespace.clone(), b.name.clone())) {
                    warnings.push(format!("{label}: duplicate name; skipped"));
                    continue;
                }
                let rules = match b.role_kind.as_str() {
                    "Role" => role_map
                        .get(&b.namespace)
                        .and_then(|m| m.get(&b.role_name))
                        .cloned()
                        .ok_or_else(|| {
                            format!(
                                "role.rbac.authorization.k8s.io {} not found",
                                go_quote(&b.role_name)
                            )
                        }),
                    "ClusterRole" => cluster_roles.get(&b.role_name).cloned().ok_or_else(|| {
                        format!(
                            "clusterrole.rbac.authorization.k8s.io {} not found",
                            go_quote(&b.role_name)
                        )
                    }),
                    other => Err(format!(
                        "unsupported role reference kind: {}",
                        go_quote(other)
                    )),
                };
                for s in &b.subjects {
                    match s.kind.as_str() {
                        "User" | "Group" => {}
                        "ServiceAccount" => {
                            if s.namespace.is_empty() && !namespaced {
                                warnings.push(format!(
                                    "{label}: ServiceAccount subject {} has no namespace and matches nobody",
                                    go_quote(&s.name)
                                ));
                            }
                        }
                        other => warnings.push(format!(
                            "{label}: subject kind {} is not User, Group or ServiceAccount and matches nobody",
                            go_quote(other)
                        )),
                    }
                }
                bindings.push(Binding {
                    namespace: b.namespace,
                    name: b.name,
                    role_kind: b.role_kind,
                    role_name: b.role_name,
                    rules,
                    subjects: b.subjects,
                });
            }
        }

        // Index the bindings by the identities their subjects name.
        let mut cluster_index = SubjectIndex::default();
        let mut namespace_index: HashMap<String, SubjectIndex> = HashMap::new();
        for (bi, b) in bindings.iter().enumerate() {
            let index = if b.namespace.is_empty() {
                &mut cluster_index
            } else {
                namespace_index.entry(b.namespace.clone()).or_default()
            };
            for (si, s) in b.subjects.iter().enumerate() {
                let hit = Hit {
                    binding: bi,
                    subject: si,
                };
                match s.kind.as_str() {
                    "User" => index.users.entry(s.name.clone()).or_default().push(hit),
                    "Group" => index.groups.entry(s.name.clone()).or_default().push(hit),
                    "ServiceAccount" => {
                        let ns = if s.namespace.is_empty() {
                            &b.namespace
                        } else {
                            &s.namespace
                        };
                        if !ns.is_empty() {
                            let user = format!("{SERVICE_ACCOUNT_PREFIX}{ns}:{}", s.name);
                            index.users.entry(user).or_default().push(hit);
                        }
                    }
                    _ => {}
                }
            }
        }

        let policy = Policy {
            cluster_roles,
            roles: role_map,
            bindings,
            cluster_index,
            namespace_index,
        };
        (policy, warnings)
    }
}
