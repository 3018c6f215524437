//! Kubernetes RBAC evaluation, with no I/O: the `rbac.authorization.k8s.io/v1`
//! authorizer (`plugin/pkg/auth/authorizer/rbac`), its rule resolver
//! (`pkg/registry/rbac/validation`), the escalation check (`Covers`),
//! ClusterRole aggregation and kube-apiserver's 403 messages.
//!
//! Public API:
//!
//! ```text
//! pub const PRIVILEGED_GROUP: &str = "system:masters";
//! pub struct UserInfo { pub name: String, pub groups: Vec<String> }
//!     fn new(name, groups) -> UserInfo
//! pub struct Attributes<'a> { user, verb, resource_request, api_group, resource,
//!                             subresource, namespace, name, path }
//!     fn resource(user, verb, api_group, resource, subresource, namespace, name) -> Attributes
//!     fn non_resource(user, verb, path) -> Attributes
//! pub struct PolicyRule { verbs, api_groups, resources, resource_names, non_resource_urls }
//!     fn allows(&self, &Attributes) -> bool            // RuleAllows
//!     fn compact_string(&self) -> String               // CompactString
//! pub struct Decision { pub allowed: bool, pub reason: String }
//! pub struct Policy  (Clone, Default = no RBAC objects)
//!     fn from_objects(&[Value], &[Value], &[Value], &[Value]) -> (Policy, Vec<String>)
//!     fn authorize(&self, &Attributes) -> Decision
//!     fn rules_for(&self, &UserInfo, namespace) -> Vec<PolicyRule>
//!     fn rules_for_with_errors(&self, &UserInfo, namespace) -> (Vec<PolicyRule>, Vec<String>)
//!     fn role_rules(&self, kind, namespace, name) -> Option<Vec<PolicyRule>>
//! pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> Result<(), Vec<PolicyRule>>
//! pub fn escalation_message(user: &UserInfo, missing: &[PolicyRule]) -> String
//! pub fn forbidden_message(a: &Attributes) -> String
//! pub fn forbidden_status_message(a: &Attributes, reason: &str) -> String
//! ```
//!
//! Semantics follow Kubernetes exactly, including the parts that surprise:
//!
//! - `pods/*` is **not** a wildcard: a rule resource matches `*`, the exact
//!   `resource/subresource`, or `*/subresource` (e.g. `*/scale`). Kubernetes
//!   rejected `resource/*` on purpose (kubernetes/enhancements#4961).
//! - A rule with `resourceNames` never matches a request without a name
//!   (list, watch, create, deletecollection).
//! - `*` in `resourceNames` is a literal, not a wildcard; in
//!   `nonResourceURLs` a trailing `*` is a prefix match (`/apis/*` matches
//!   `/apis` + anything, `/healthz*` matches `/healthz/ready`).
//! - A RoleBinding is consulted only for requests in its own namespace; a
//!   ClusterRole it references grants only there. ClusterRoleBindings apply
//!   everywhere, including cluster-scoped and non-resource requests.
//! - A ServiceAccount subject without a namespace in a RoleBinding means the
//!   binding's namespace; in a ClusterRoleBinding it matches nobody.
//! - Bindings whose role does not exist grant nothing; when such a binding
//!   applies to a denied user, the deny reason carries Kubernetes' resolution
//!   error (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`),
//!   which kube-apiserver appends to the 403 message.
//! - Users in `system:masters` are allowed everything by [`Policy::authorize`]
//!   (kube-apiserver's privileged-group authorizer, whose reason is empty);
//!   [`Policy::rules_for`] reports RBAC rules only, as Kubernetes does.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::selector::{LabelSelector, labels_of};

/// The group whose members are allowed everything.
pub const PRIVILEGED_GROUP: &str = "system:masters";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
const VERB_ALL: &str = "*";
const API_GROUP_ALL: &str = "*";
const RESOURCE_ALL: &str = "*";
const NON_RESOURCE_ALL: &str = "*";

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn new<G: Into<String>>(
        name: impl Into<String>,
        groups: impl IntoIterator<Item = G>,
    ) -> Self {
        Self {
            name: name.into(),
            groups: groups.into_iter().map(Into::into).collect(),
        }
    }
}

/// What is asked (kube-apiserver's `authorizer.Attributes`).
///
/// For resource requests the fields are the RequestInfo ones: `namespace`
/// is `""` at cluster scope (for `namespaces/NAME` kube-apiserver sets it to
/// NAME), `name` is `""` for list/watch/create/deletecollection. For
/// non-resource requests only `verb` (the lower-case HTTP method: get, post,
/// put, …) and `path` matter.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    pub resource_request: bool,
    pub api_group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub path: &'a str,
}

impl<'a> Attributes<'a> {
    /// A resource request.
    pub fn resource(
        user: &'a UserInfo,
        verb: &'a str,
        api_group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Self {
        Self {
            user,
            verb,
            resource_request: true,
            api_group,
            resource,
            subresource,
            namespace,
            name,
            path: "",
        }
    }

    /// A non-resource request (`/healthz`, `/metrics`, `/apis`, …).
    pub fn non_resource(user: &'a UserInfo, verb: &'a str, path: &'a str) -> Self {
        Self {
            user,
            verb,
            resource_request: false,
            api_group: "",
            resource: "",
            subresource: "",
            namespace: "",
            name: "",
            path,
        }
    }
}

/// An `rbac.authorization.k8s.io/v1` PolicyRule in its wire form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub verbs: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_groups: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_names: Vec<String>,
    #[serde(
        rename = "nonResourceURLs",
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// `null` reads as an empty list (Go encodes a nil slice without omitempty as null).
fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

impl PolicyRule {
    /// Kubernetes' `RuleAllows`: does this rule allow the request?
    pub fn allows(&self, a: &Attributes) -> bool {
        if !verb_matches(self, a.verb) {
            return false;
        }
        if a.resource_request {
            api_group_matches(self, a.api_group)
                && resource_matches(self, a.resource, a.subresource)
                && resource_name_matches(self, a.name)
        } else {
            non_resource_url_matches(self, a.path)
        }
    }

    /// Kubernetes' `CompactString`, used in escalation errors, e.g.
    /// `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
    pub fn compact_string(&self) -> String {
        let mut parts = Vec::new();
        for (label, list) in [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ] {
            if !list.is_empty() {
                parts.push(format!("{label}:{}", go_quote_list(list)));
            }
        }
        format!("{{{}}}", parts.join(", "))
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == VERB_ALL || v == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups
        .iter()
        .any(|g| g == API_GROUP_ALL || g == group)
}

/// `*`, exact `resource` or `resource/subresource`, or `*/subresource`.
fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        if r == RESOURCE_ALL {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        // Compare against "resource/subresource" without allocating.
        let combined = r.len() == resource.len() + 1 + subresource.len()
            && r.starts_with(resource)
            && r[resource.len()..].starts_with('/')
            && r.ends_with(subresource);
        combined || r.strip_prefix("*/") == Some(subresource)
    })
}

fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls
        .iter()
        .any(|u| u == NON_RESOURCE_ALL || non_resource_url_covers(u, path))
}

/// Exact, or a trailing-`*` rule whose prefix (all trailing `*` removed) starts `path`.
fn non_resource_url_covers(rule_url: &str, path: &str) -> bool {
    rule_url == path
        || (rule_url.ends_with('*') && path.starts_with(rule_url.trim_end_matches('*')))
}

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

type Rules = Arc<[PolicyRule]>;

#[derive(Debug, Clone)]
struct Subject {
    kind: String,
    name: String,
    /// As written; may be empty.
    namespace: String,
}

#[derive(Debug, Clone)]
struct Binding {
    /// Empty for ClusterRoleBindings.
    namespace: String,
    name: String,
    role_kind: String,
    role_name: String,
    /// The role's rules, or Kubernetes' error text when the role is missing.
    rules: Result<Rules, String>,
    subjects: Vec<Subject>,
}

impl Binding {
    fn describe(&self, subject: usize) -> String {
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
struct Hit {
    binding: usize,
    subject: usize,
}

/// Bindings by the identity their subjects name. ServiceAccount subjects are
/// filed under their user name `system:serviceaccount:NS:NAME`.
#[derive(Debug, Clone, Default)]
struct SubjectIndex {
    users: HashMap<String, Vec<Hit>>,
    groups: HashMap<String, Vec<Hit>>,
}

impl SubjectIndex {
    fn collect(&self, user: &UserInfo, out: &mut Vec<Hit>) {
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

/// A compiled snapshot of all RBAC objects. Build one with
/// [`Policy::from_objects`] whenever an RBAC object changes; it is immutable
/// and cheap to share (`Arc<Policy>`). `Policy::default()` has no objects and
/// so allows only `system:masters`.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Effective (aggregated) rules by ClusterRole name.
    cluster_roles: HashMap<String, Rules>,
    /// Role rules by namespace, then name.
    roles: HashMap<String, HashMap<String, Rules>>,
    /// ClusterRoleBindings first (in input order), then RoleBindings, so that
    /// sorting by index visits them in Kubernetes' order.
    bindings: Vec<Binding>,
    cluster_index: SubjectIndex,
    namespace_index: HashMap<String, SubjectIndex>,
}

struct ParsedClusterRole {
    name: String,
    labels: BTreeMap<String, String>,
    rules: Vec<PolicyRule>,
    /// `Some` when the role has a (valid) aggregationRule.
    selectors: Option<Vec<LabelSelector>>,
}

struct ParsedBinding {
    name: String,
    namespace: String,
    role_kind: String,
    role_name: String,
    subjects: Vec<Subject>,
}

fn meta_str<'v>(obj: &'v Value, field: &str) -> Option<&'v str> {
    obj.get("metadata")?
        .get(field)?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn parse_rules(obj: &Value) -> Result<Vec<PolicyRule>, String> {
    match obj.get("rules") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, r)| PolicyRule::deserialize(r).map_err(|e| format!("rules[{i}]: {e}")))
            .collect(),
        Some(_) => Err("rules is not an array".into()),
    }
}

/// `Ok(None)` without an aggregationRule.
fn parse_aggregation(obj: &Value) -> Result<Option<Vec<LabelSelector>>, String> {
    let rule = match obj.get("aggregationRule") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("aggregationRule is not an object".into()),
    };
    match rule.get("clusterRoleSelectors") {
        None | Some(Value::Null) => Ok(Some(Vec::new())),
        Some(Value::Array(sels)) => sels
            .iter()
            .enumerate()
            .map(|(i, s)| {
                LabelSelector::from_label_selector_json(s)
                    .map_err(|e| format!("aggregationRule.clusterRoleSelectors[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err("aggregationRule.clusterRoleSelectors is not an array".into()),
    }
}

fn parse_binding(obj: &Value, namespaced: bool) -> Result<ParsedBinding, String> {
    let name = meta_str(obj, "name").ok_or("metadata.name is missing")?;
    let namespace = if namespaced {
        meta_str(obj, "namespace").ok_or("metadata.namespace is missing")?
    } else {
        ""
    };
    let role_ref = obj
        .get("roleRef")
        .and_then(Value::as_object)
        .ok_or("roleRef is missing")?;
    let ref_field = |f: &str| {
        role_ref
            .get(f)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("roleRef.{f} is missing"))
    };
    let role_kind = ref_field("kind")?;
    let role_name = ref_field("name")?;
    let subjects = match obj.get("subjects") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let field = |f: &str| s.get(f).and_then(Value::as_str);
                let (Some(kind), Some(name)) = (field("kind"), field("name")) else {
                    return Err(format!("subjects[{i}] needs a string kind and name"));
                };
                let namespace = match s.get("namespace") {
                    None | Some(Value::Null) => "",
                    Some(Value::String(ns)) => ns,
                    Some(_) => return Err(format!("subjects[{i}].namespace is not a string")),
                };
                Ok(Subject {
                    kind: kind.into(),
                    name: name.into(),
                    namespace: namespace.into(),
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("subjects is not an array".into()),
    };
    Ok(ParsedBinding {
        name: name.into(),
        namespace: namespace.into(),
        role_kind: role_kind.into(),
        role_name: role_name.into(),
        subjects,
    })
}

/// The rules of each ClusterRole, with aggregation resolved to a fixpoint:
/// an aggregated role gets its own rules, then (per selector, roles sorted by
/// name, itself excluded) the effective rules of each matching role, which
/// are themselves aggregated (`admin` ← `edit` ← `view`), without duplicates.
fn resolve_cluster_roles(parsed: &[ParsedClusterRole]) -> HashMap<String, Rules> {
    let mut by_name: Vec<usize> = (0..parsed.len()).collect();
    by_name.sort_by(|&a, &b| parsed[a].name.cmp(&parsed[b].name));
    let children: Vec<Vec<usize>> = parsed
        .iter()
        .enumerate()
        .map(|(i, cr)| match &cr.selectors {
            None => Vec::new(),
            Some(sels) => sels
                .iter()
                .flat_map(|sel| {
                    by_name
                        .iter()
                        .copied()
                        .filter(move |&j| j != i && sel.matches(&parsed[j].labels))
                })
                .collect(),
        })
        .collect();

    let mut out = HashMap::with_capacity(parsed.len());
    for (i, cr) in parsed.iter().enumerate() {
        if cr.selectors.is_none() {
            out.insert(cr.name.clone(), Rules::from(cr.rules.clone()));
            continue;
        }
        // Iterative pre-order DFS (no recursion: chains may be long).
        let mut rules = Vec::new();
        let mut seen_rules: HashSet<&PolicyRule> = HashSet::new();
        let mut visited = vec![false; parsed.len()];
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if std::mem::replace(&mut visited[j], true) {
                continue;
            }
            for r in &parsed[j].rules {
                if seen_rules.insert(r) {
                    rules.push(r.clone());
                }
            }
            stack.extend(children[j].iter().rev().copied().filter(|&k| !visited[k]));
        }
        out.insert(cr.name.clone(), Rules::from(rules));
    }
    out
}

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

    /// The bindings that apply to `user` in `namespace`, in Kubernetes' visit
    /// order (ClusterRoleBindings, then the namespace's RoleBindings), each
    /// with the first of its subjects that names the user.
    fn applicable(&self, user: &UserInfo, namespace: &str) -> Vec<Hit> {
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

/// Kubernetes' `Covers` (the heart of `ConfirmNoEscalation`): `Ok` when the
/// `owner` rules allow everything the `requested` rules allow. Otherwise the
/// uncovered parts of `requested`, broken down as Kubernetes does: one rule
/// per (apiGroup, resource, verb[, resourceName]) and per (nonResourceURL,
/// verb), in order.
///
/// Owner `*` verbs/groups/resources cover anything, owner `*/sub` covers
/// `x/sub`, owner URL `/a/*` covers `/a/b`; an owner rule with
/// resourceNames covers only requested rules naming a subset of them.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> Result<(), Vec<PolicyRule>> {
    let missing: Vec<PolicyRule> = requested
        .iter()
        .flat_map(breakdown_rule)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(base);
                } else {
                    for name in &rule.resource_names {
                        out.push(PolicyRule {
                            resource_names: one(name),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn resources_cover_all(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, RESOURCE_ALL) {
        return true;
    }
    wanted.iter().all(|w| {
        has(owner, w)
            || w.split_once('/')
                .is_some_and(|(_, sub)| owner.iter().any(|o| o.strip_prefix("*/") == Some(sub)))
    })
}

fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, VERB_ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups =
        has(&owner.api_groups, API_GROUP_ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover_all(&owner.resources, &sub.resources);
    let urls = sub.non_resource_urls.iter().all(|u| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| non_resource_url_covers(o, u))
    });
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// Kubernetes' `ConfirmNoEscalation` error text for the rules [`covers`]
/// reported missing (compacted and sorted as Kubernetes does):
///
/// ```text
/// user "alice" (groups=["dev" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
/// {APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}
/// ```
///
/// kube-apiserver returns it as a 403 Forbidden Status whose message is
/// `clusterroles.rbac.authorization.k8s.io "NAME" is forbidden: ` followed by
/// this text (`roles…`, `rolebindings…`, `clusterrolebindings…` likewise).
pub fn escalation_message(user: &UserInfo, missing: &[PolicyRule]) -> String {
    let descriptions: BTreeSet<String> = compact_rules(missing)
        .iter()
        .map(PolicyRule::compact_string)
        .collect();
    format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_quote_list(&user.groups),
        descriptions.into_iter().collect::<Vec<_>>().join("\n")
    )
}

/// Kubernetes' `CompactRules`: rules with exactly one apiGroup and one
/// resource and nothing but verbs besides are merged per (group, resource).
fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    let mut slot: HashMap<(&str, &str), usize> = HashMap::new();
    for r in rules {
        let is_simple = r.resource_names.is_empty()
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            out.push(r.clone());
            continue;
        }
        let key = (r.api_groups[0].as_str(), r.resources[0].as_str());
        match slot.get(&key) {
            Some(&i) => simple[i].verbs.extend(r.verbs.iter().cloned()),
            None => {
                slot.insert(key, simple.len());
                simple.push(r.clone());
            }
        }
    }
    out.extend(simple);
    out
}

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
/// `reason` is the authorizer's deny reason ([`Decision::reason`]); when
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

/// Go's `%q` for a string (`strconv.Quote`): `"` and `\` escaped, control
/// and other non-printable characters as `\n`, `\x1b`, `\u200b`, ….
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !go_printable(c) => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: no controls, no spaces other
/// than U+0020, no common invisible format characters.
fn go_printable(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{ad}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{feff}'
        ))
}

/// Go's `%q` for a `[]string`: `["a" "b"]`.
fn go_quote_list(list: &[String]) -> String {
    let quoted: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: strings(verbs),
            api_groups: strings(groups),
            resources: strings(resources),
            ..PolicyRule::default()
        }
    }

    fn named(mut r: PolicyRule, names: &[&str]) -> PolicyRule {
        r.resource_names = strings(names);
        r
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: strings(verbs),
            non_resource_urls: strings(urls),
            ..PolicyRule::default()
        }
    }

    fn strings(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    fn cluster_role(name: &str, rules: Value) -> Value {
        json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
    }

    fn role(ns: &str, name: &str, rules: Value) -> Value {
        json!({"kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules})
    }

    fn crb(name: &str, role: &str, subjects: Value) -> Value {
        json!({
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        })
    }

    fn rb(ns: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
        json!({
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": subjects,
        })
    }

    fn user(name: &str) -> Value {
        json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
    }

    fn group(name: &str) -> Value {
        json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
    }

    /// The policy most authorization rows run against.
    fn fixture() -> Policy {
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
                Some((g, r, s)) => {
                    Attributes::resource(&u, row.verb, g, r, s, row.namespace, row.name)
                }
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

    /// (case, owner, requested, expected missing)
    type CoversRow = (
        &'static str,
        Vec<PolicyRule>,
        Vec<PolicyRule>,
        Vec<PolicyRule>,
    );

    #[test]
    fn covers_table() {
        let pods_get = rule(&["get"], &[""], &["pods"]);
        // (case, owner, requested, expected missing)
        let rows: Vec<CoversRow> = vec![
            (
                "equal rules",
                vec![rule(&["get", "list"], &[""], &["pods"])],
                vec![rule(&["get", "list"], &[""], &["pods"])],
                vec![],
            ),
            ("nothing requested", vec![], vec![], vec![]),
            (
                "wildcard owner",
                vec![rule(&["*"], &["*"], &["*"])],
                vec![
                    rule(
                        &["get", "delete"],
                        &["", "apps"],
                        &["pods", "deployments/scale"],
                    ),
                    named(pods_get.clone(), &["p"]),
                ],
                vec![],
            ),
            (
                "wildcard owner does not cover URLs",
                vec![rule(&["*"], &["*"], &["*"])],
                vec![url_rule(&["get"], &["/metrics"])],
                vec![url_rule(&["get"], &["/metrics"])],
            ),
            (
                "narrower owner: missing verb and group broken down",
                vec![rule(&["get"], &[""], &["pods"])],
                vec![rule(&["get", "list"], &["", "apps"], &["pods"])],
                vec![
                    rule(&["list"], &[""], &["pods"]),
                    rule(&["get"], &["apps"], &["pods"]),
                    rule(&["list"], &["apps"], &["pods"]),
                ],
            ),
            (
                "owner */scale covers x/scale",
                vec![rule(&["update"], &["apps"], &["*/scale"])],
                vec![rule(&["update"], &["apps"], &["deployments/scale"])],
                vec![],
            ),
            (
                "owner */scale does not cover x",
                vec![rule(&["update"], &["apps"], &["*/scale"])],
                vec![rule(&["update"], &["apps"], &["deployments"])],
                vec![rule(&["update"], &["apps"], &["deployments"])],
            ),
            (
                "owner pods does not cover pods/log",
                vec![pods_get.clone()],
                vec![rule(&["get"], &[""], &["pods/log"])],
                vec![rule(&["get"], &[""], &["pods/log"])],
            ),
            (
                "owner without names covers named",
                vec![pods_get.clone()],
                vec![named(pods_get.clone(), &["a", "b"])],
                vec![],
            ),
            (
                "owner with names covers only those names",
                vec![named(pods_get.clone(), &["a"])],
                vec![named(pods_get.clone(), &["a", "b"])],
                vec![named(pods_get.clone(), &["b"])],
            ),
            (
                "owner with names does not cover unnamed",
                vec![named(pods_get.clone(), &["a"])],
                vec![pods_get.clone()],
                vec![pods_get.clone()],
            ),
            (
                "URL exact",
                vec![url_rule(&["get"], &["/healthz"])],
                vec![url_rule(&["get"], &["/healthz"])],
                vec![],
            ),
            (
                "URL prefix owner",
                vec![url_rule(&["get"], &["/apis/*"])],
                vec![url_rule(&["get"], &["/apis/metal3.io", "/apis/*"])],
                vec![],
            ),
            (
                "URL star owner",
                vec![url_rule(&["*"], &["*"])],
                vec![url_rule(&["get", "post"], &["/metrics"])],
                vec![],
            ),
            (
                "URL narrower owner",
                vec![url_rule(&["get"], &["/healthz"])],
                vec![url_rule(&["get", "post"], &["/healthz", "/metrics"])],
                vec![
                    url_rule(&["post"], &["/healthz"]),
                    url_rule(&["get"], &["/metrics"]),
                    url_rule(&["post"], &["/metrics"]),
                ],
            ),
            (
                "URL owner does not cover resources",
                vec![url_rule(&["*"], &["*"])],
                vec![pods_get.clone()],
                vec![pods_get.clone()],
            ),
            (
                "union of owner rules",
                vec![
                    rule(&["get"], &[""], &["pods"]),
                    rule(&["list"], &[""], &["pods"]),
                ],
                vec![rule(&["get", "list"], &[""], &["pods"])],
                vec![],
            ),
        ];
        for (case, owner, requested, missing) in rows {
            let got = covers(&owner, &requested);
            if missing.is_empty() {
                assert_eq!(got, Ok(()), "{case}");
            } else {
                assert_eq!(got, Err(missing), "{case}");
            }
        }
    }

    #[test]
    fn escalation_message_format() {
        let missing = vec![
            rule(&["list"], &[""], &["secrets"]),
            url_rule(&["get"], &["/metrics"]),
            rule(&["get"], &[""], &["secrets"]),
        ];
        let u = UserInfo::new("alice", ["dev", "system:authenticated"]);
        assert_eq!(
            escalation_message(&u, &missing),
            "user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\" \"get\"]}\n\
             {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
        );
    }

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

    #[test]
    fn malformed_objects_are_skipped_with_warnings() {
        let good_rules = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
        let crs = vec![
            json!("not an object"),
            json!({"metadata": {}}),
            json!({"metadata": {"name": "bad-rules"}, "rules": {"verbs": ["get"]}}),
            json!({"metadata": {"name": "bad-verbs"}, "rules": [{"verbs": "get", "apiGroups": [""], "resources": ["pods"]}]}),
            json!({"metadata": {"name": "bad-agg"}, "aggregationRule": {"clusterRoleSelectors": [
                {"matchExpressions": [{"key": "a", "operator": "Near"}]}
            ]}, "rules": good_rules.clone()}),
            // nulls read as empty lists, unknown fields are ignored.
            json!({"metadata": {"name": "ok"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": null, "extra": 1}]}),
            json!({"metadata": {"name": "ok"}, "rules": []}),
        ];
        let roles = vec![
            json!({"metadata": {"name": "no-namespace"}, "rules": good_rules.clone()}),
            json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": [7]}),
        ];
        let crbs = vec![
            json!({"metadata": {"name": "no-roleref"}, "subjects": user("u")}),
            json!({"metadata": {"name": "bad-subject"}, "roleRef": {"kind": "ClusterRole", "name": "ok"}, "subjects": [{"kind": "User"}]}),
            json!({"metadata": {"name": "bad-subjects"}, "roleRef": {"kind": "ClusterRole", "name": "ok"}, "subjects": "u"}),
            crb(
                "sa-no-ns",
                "ok",
                json!([{"kind": "ServiceAccount", "name": "x"}, {"kind": "Robot", "name": "r2"}, {"kind": "User", "name": "u"}]),
            ),
            crb("via-bad-agg", "bad-agg", user("agg")),
            crb("via-bad-verbs", "bad-verbs", user("u2")),
            json!(null),
        ];
        let rbs = vec![
            json!({"metadata": {"name": "no-ns"}, "roleRef": {"kind": "ClusterRole", "name": "ok"}, "subjects": user("u")}),
        ];
        let (p, warnings) = Policy::from_objects(&crs, &roles, &crbs, &rbs);
        let expect = [
            "ClusterRole at index 0: metadata.name is missing; skipped",
            "ClusterRole at index 1: metadata.name is missing; skipped",
            "ClusterRole \"bad-rules\": rules is not an array; skipped",
            "ClusterRole \"bad-verbs\": rules[0]: invalid type: string \"get\", expected a sequence; skipped",
            "ClusterRole \"bad-agg\": aggregationRule.clusterRoleSelectors[0]: invalid selector",
            "ClusterRole \"ok\": duplicate name; skipped",
            "Role at index 0: metadata.name or metadata.namespace is missing; skipped",
            "Role \"ns/r\": rules[0]: invalid type: integer `7`, expected struct PolicyRule; skipped",
            "ClusterRoleBinding \"no-roleref\": roleRef is missing; skipped",
            "ClusterRoleBinding \"bad-subject\": subjects[0] needs a string kind and name; skipped",
            "ClusterRoleBinding \"bad-subjects\": subjects is not an array; skipped",
            "ClusterRoleBinding \"sa-no-ns\": ServiceAccount subject \"x\" has no namespace and matches nobody",
            "ClusterRoleBinding \"sa-no-ns\": subject kind \"Robot\" is not User, Group or ServiceAccount and matches nobody",
            "ClusterRoleBinding at index 6: metadata.name is missing; skipped",
            "RoleBinding \"no-ns\": metadata.namespace is missing; skipped",
        ];
        assert_eq!(warnings.len(), expect.len(), "{warnings:#?}");
        for (got, want) in warnings.iter().zip(expect) {
            assert!(got.starts_with(want), "got {got:?}\nwant prefix {want:?}");
        }

        // The valid parts still work: "ok" keeps its first definition, the
        // binding with unusable subjects still serves its User subject, and a
        // bad aggregationRule leaves the own rules.
        let pods = |u: &UserInfo| {
            p.authorize(&Attributes::resource(u, "get", "", "pods", "", "ns", "p"))
                .allowed
        };
        assert!(pods(&UserInfo::new("u", Vec::<String>::new())));
        assert!(pods(&UserInfo::new("agg", Vec::<String>::new())));
        assert!(!pods(&UserInfo::new(
            "system:serviceaccount::x",
            Vec::<String>::new()
        )));
        let skipped = p.authorize(&Attributes::resource(
            &UserInfo::new("u2", Vec::<String>::new()),
            "get",
            "",
            "pods",
            "",
            "ns",
            "p",
        ));
        assert_eq!(
            skipped,
            Decision {
                allowed: false,
                reason: r#"RBAC: clusterrole.rbac.authorization.k8s.io "bad-verbs" not found"#
                    .into()
            }
        );
        assert_eq!(p.role_rules("ClusterRole", "", "ok").unwrap().len(), 1);

        // Total garbage never panics.
        let junk = vec![
            json!(1),
            json!([]),
            json!({"metadata": 3}),
            json!({"metadata": {"name": 5}}),
        ];
        let (p, w) = Policy::from_objects(&junk, &junk, &junk, &junk);
        assert_eq!(w.len(), 16);
        let root = UserInfo::new("root", Vec::<String>::new());
        assert!(
            !p.authorize(&Attributes::non_resource(&root, "get", "/"))
                .allowed
        );
    }

    /// RBAC-shaped objects with random holes and wrong types: never a panic.
    #[test]
    fn random_objects_never_panic() {
        let mut seed: u64 = 0x5eed;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let leaves = [
            json!(null),
            json!(1),
            json!("x"),
            json!(""),
            json!("*"),
            json!(["*"]),
            json!([""]),
            json!(["get", 2]),
            json!({}),
            json!([{}]),
            json!({"a": "b"}),
            json!("ServiceAccount"),
            json!("ClusterRole"),
            json!("Role"),
            json!([{"kind": "ServiceAccount", "name": "x"}]),
            json!([{"matchLabels": {"a": "b"}}, {}, null]),
        ];
        let keys = [
            "metadata",
            "name",
            "namespace",
            "labels",
            "rules",
            "verbs",
            "apiGroups",
            "resources",
            "resourceNames",
            "nonResourceURLs",
            "roleRef",
            "kind",
            "subjects",
            "aggregationRule",
            "clusterRoleSelectors",
            "matchLabels",
            "matchExpressions",
        ];
        fn shape(
            next: &mut dyn FnMut() -> usize,
            leaves: &[Value],
            keys: &[&str],
            depth: u32,
        ) -> Value {
            match next() % if depth == 0 { 1 } else { 3 } {
                0 => leaves[next() % leaves.len()].clone(),
                1 => Value::Array(
                    (0..next() % 3)
                        .map(|_| shape(next, leaves, keys, depth - 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..next() % 5)
                        .map(|_| {
                            (
                                keys[next() % keys.len()].to_string(),
                                shape(next, leaves, keys, depth - 1),
                            )
                        })
                        .collect(),
                ),
            }
        }
        let u = UserInfo::new("system:serviceaccount:x:x", ["b", "x"]);
        for _ in 0..300 {
            let lists: Vec<Vec<Value>> = (0..4)
                .map(|_| {
                    (0..next() % 6)
                        .map(|_| shape(&mut next, &leaves, &keys, 5))
                        .collect()
                })
                .collect();
            let (p, _) = Policy::from_objects(&lists[0], &lists[1], &lists[2], &lists[3]);
            for ns in ["", "x"] {
                let _ = p.authorize(&Attributes::resource(&u, "get", "", "x", "x", ns, "x"));
                let _ = p.authorize(&Attributes::non_resource(&u, "get", "x"));
                let rules = p.rules_for(&u, ns);
                let _ = covers(&rules, &rules);
            }
        }
    }

    #[test]
    fn policy_rule_wire_form() {
        let r: PolicyRule = serde_json::from_value(json!({
            "verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "nonResourceURLs": null
        }))
        .unwrap();
        assert_eq!(r, rule(&["get"], &[""], &["pods"]));
        assert_eq!(
            serde_json::to_value(url_rule(&["get"], &["/healthz"])).unwrap(),
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
        );
        assert_eq!(
            serde_json::to_value(named(rule(&["get"], &[""], &["secrets"]), &["db"])).unwrap(),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["db"]})
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
}
