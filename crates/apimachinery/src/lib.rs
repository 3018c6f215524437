//! Pure Kubernetes API machinery, with no I/O: label and field selectors,
//! merge/JSON/strategic-merge patches, server-side apply, Table rendering
//! and OpenAPI documents. Everything works on `serde_json::Value` and never
//! panics on arbitrary JSON.
//!
//! - [`selector`]: `LabelSelector` (kubectl `-l`, `metav1.LabelSelector`),
//!   `FieldSelector` (`--field-selector`).
//! - [`patch`]: `merge_patch`, `json_patch`, `strategic_merge_patch` with
//!   the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/…` and
//!   `$setElementOrder/…` directives; `builtin_list_strategy` for the kinds
//!   served here.
//! - [`apply`]: server-side apply and `Update` bookkeeping in FieldsV1
//!   managedFields; `apply_with`/`record_update_with` take list semantics,
//!   e.g. from a CRD schema via `schema_list_strategy` (map lists, including
//!   multi-key ones, and sets; everything else is atomic as for CRDs).
//! - [`table`]: `columns_for_builtin`, `columns_for_crd`, `to_table`,
//!   `jsonpath_get`, kubectl-style ages.
//! - [`openapi`]: `/openapi/v2`, `/openapi/v3` index and per group/version
//!   documents, with built-in kind schemas. Use the `*_with_plurals`
//!   variants when resource names are known (kubectl explain finds a kind
//!   through its resource URL), and `v3_index_with_documents` so the index
//!   hash changes when a schema does.
//! - [`rbac`]: Kubernetes RBAC: `Policy` compiled from Roles, ClusterRoles
//!   (aggregation resolved) and their bindings, `authorize`, `rules_for`
//!   (SelfSubjectRulesReview), `covers` (escalation check) and the 403
//!   `forbidden_message` texts.

pub mod apply;
pub mod openapi;
pub mod patch;
pub mod rbac;
pub mod selector;
pub mod table;
