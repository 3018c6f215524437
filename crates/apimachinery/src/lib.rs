//! Pure Kubernetes API machinery, with no I/O: label and field selectors,
//! merge/JSON/strategic-merge patches, server-side apply, Table rendering
//! and OpenAPI documents. Everything works on `serde_json::Value` and never
//! panics on arbitrary JSON.
//!
//! - [`selector`]: the selectors [`LabelSelector`](selector::LabelSelector) (kubectl `-l`,
//!   `metav1.LabelSelector`), [`FieldSelector`](selector::FieldSelector)
//!   (`--field-selector`).
//! - [`patch`]: the patch functions [`merge_patch`](patch::merge_patch),
//!   [`json_patch`](patch::json_patch()),
//!   [`strategic_merge_patch`](patch::strategic_merge_patch) with the
//!   `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/…` and
//!   `$setElementOrder/…` directives;
//!   [`builtin_list_strategy`](patch::builtin_list_strategy) for the kinds
//!   served here.
//! - [`apply`]: server-side apply and `Update` bookkeeping in FieldsV1
//!   managedFields; [`apply_with`](apply::apply_with) and
//!   [`record_update_with`](apply::record_update_with) take list semantics,
//!   e.g. from a CRD schema via
//!   [`schema_list_strategy`](apply::schema_list_strategy) (map lists,
//!   including multi-key ones, and sets; everything else is atomic as for
//!   CRDs).
//! - [`table`]: Table rendering with
//!   [`columns_for_builtin`](table::columns_for_builtin),
//!   [`columns_for_crd`](table::columns_for_crd),
//!   [`to_table`](table::to_table), [`jsonpath_get`](table::jsonpath_get),
//!   kubectl-style ages.
//! - [`openapi`]: `/openapi/v2`, `/openapi/v3` index and per group/version
//!   documents, with built-in kind schemas. Use the `*_with_plurals`
//!   variants when resource names are known (kubectl explain finds a kind
//!   through its resource URL), and
//!   [`v3_index_with_documents`](openapi::v3_index_with_documents) so the
//!   index hash changes when a schema does.
//! - [`rbac`]: Kubernetes RBAC: [`Policy`](rbac::Policy) compiled from
//!   Roles, ClusterRoles (aggregation resolved) and their bindings,
//!   [`authorize`](rbac::Policy::authorize),
//!   [`rules_for`](rbac::Policy::rules_for) (SelfSubjectRulesReview),
//!   [`covers`](rbac::covers) (escalation check) and the 403
//!   [`forbidden_message`](rbac::forbidden_message) texts.

pub mod apply;
pub mod openapi;
pub mod patch;
pub mod rbac;
pub mod selector;
pub mod table;
