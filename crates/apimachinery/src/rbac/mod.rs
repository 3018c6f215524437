//! Kubernetes RBAC evaluation, with no I/O: the `rbac.authorization.k8s.io/v1`
//! authorizer (`plugin/pkg/auth/authorizer/rbac`), its rule resolver
//! (`pkg/registry/rbac/validation`), the escalation check (`Covers`),
//! ClusterRole aggregation and kube-apiserver's 403 messages.
//!
//! Public API:
//!
//! - [`UserInfo`] (who asks, [`UserInfo::new`]) and [`Attributes`] (what is
//!   asked: [`Attributes::resource`], [`Attributes::non_resource`]); members
//!   of [`PRIVILEGED_GROUP`] are allowed everything.
//! - [`PolicyRule`], a rule in its wire form: [`PolicyRule::allows`]
//!   (`RuleAllows`), [`PolicyRule::compact_string`] (`CompactString`).
//! - [`Policy`] (`Clone`; `Default` = no RBAC objects), compiled by
//!   [`Policy::from_objects`] with its warnings; it answers
//!   [`Policy::authorize`] with a [`Decision`], and [`Policy::rules_for`],
//!   [`Policy::rules_for_with_errors`] and [`Policy::role_rules`].
//! - [`covers`] and [`escalation_message`]: the escalation check and its
//!   error text.
//! - [`forbidden_message`] and [`forbidden_status_message`]: the 403 texts.
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
//!
//! The parts, each using only those listed before it (so no module imports
//! in a circle): `quote` (Go's `%q`, which every message uses), `attributes`
//! (the request), `rule` (one rule against one request), `binding` (compiled
//! bindings and the subject index), `parse` (wire-form objects),
//! `aggregation` (ClusterRole aggregation), `policy` (the compiled policy and
//! its questions), `compile` ([`Policy::from_objects`]), then `escalation`
//! and `forbidden` (the checks and texts for writes and 403s).

mod aggregation;
mod attributes;
mod binding;
mod compile;
mod escalation;
mod forbidden;
mod parse;
mod policy;
mod quote;
mod rule;

pub use attributes::{Attributes, PRIVILEGED_GROUP, UserInfo};
pub use escalation::{covers, escalation_message};
pub use forbidden::{forbidden_message, forbidden_status_message};
pub use policy::{Decision, Policy};
pub use rule::PolicyRule;

#[cfg(test)]
mod tests;
