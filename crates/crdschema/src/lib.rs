//! CRD structural schema handling: defaults, pruning, validation, CEL rules.
//!
//! A [`Schema`] is compiled once from a CustomResourceDefinition version's
//! `openAPIV3Schema`. The API server then runs, on every create and update,
//! [`Schema::default`], [`Schema::prune`] and [`Schema::validate`] in that
//! order, as kube-apiserver's apiextensions does.
//!
//! Field paths and messages follow kube-apiserver: OpenAPI errors carry
//! go-openapi's wording (`spec.x in body should match '...'`) and dotted map
//! keys; CEL errors carry `Invalid value: "<type>": <message>` and bracketed
//! map keys (`spec.labels[env]`).
//!
//! CEL rules see `self` (and `oldSelf` on update) typed by the schema:
//! `integer` as int, `number` as double, `date-time`/`date` strings as
//! timestamps, `duration` as durations, `byte` as bytes. Besides the CEL
//! standard library and the strings and lists extensions, Kubernetes'
//! `isSorted`, `sum`, `min`, `max`, `find`, `findAll` and `isURL` are
//! available. Not provided: the `quantity`, `ip`, `cidr`, `url` and `authz`
//! libraries.
//!
//! Rules are bounded as kube-apiserver bounds them: [`Schema::compile`]
//! refuses rules whose estimated cost, from the sizes the schema allows,
//! exceeds [`STATIC_ESTIMATED_COST_LIMIT`] (times the number of times they
//! may run per object), or that together exceed
//! [`STATIC_ESTIMATED_CRD_COST_LIMIT`]; [`Schema::validate`] estimates each
//! rule against the object's actual values before running it, and refuses
//! the object rather than run one over [`PER_CALL_LIMIT`] or past the
//! object's [`RUNTIME_CEL_COST_BUDGET`].
//!
//! ```
//! use ferrometal_crdschema::{Reason, Schema};
//! use serde_json::json;
//!
//! let schema = Schema::compile(&json!({
//!     "type": "object",
//!     "properties": {"spec": {
//!         "type": "object",
//!         "required": ["online"],
//!         "properties": {
//!             "online": {"type": "boolean"},
//!             "bootMode": {"type": "string", "enum": ["UEFI", "legacy"], "default": "UEFI"}
//!         },
//!         "x-kubernetes-validations": [
//!             {"rule": "oldSelf.online == false || self.online == true", "message": "online can not be unset"}
//!         ]
//!     }}
//! }))
//! .unwrap();
//!
//! let mut obj = json!({"apiVersion": "metal.ferrometal.io/v1alpha1", "kind": "BareMetalHost",
//!                      "metadata": {"name": "worker-0"}, "spec": {"online": true, "extra": 1}});
//! schema.default(&mut obj);
//! schema.prune(&mut obj);
//! assert_eq!(obj["spec"], json!({"online": true, "bootMode": "UEFI"}));
//! assert!(schema.validate(&obj, None).is_empty());
//!
//! let mut update = obj.clone();
//! update["spec"]["online"] = json!(false);
//! let errs = schema.validate(&update, Some(&obj));
//! assert_eq!(errs[0].field, "spec");
//! assert_eq!(errs[0].reason, Reason::FieldValueInvalid);
//! assert_eq!(errs[0].message, r#"Invalid value: "object": online can not be unset"#);
//! ```

// Modules in groups, bottom up; each group imports only from the groups
// above it, so that no two modules import each other:
// leaves shared by every step (errors, field paths, wording, limits,
// formats); the compiled schema tree and regular expressions; what the
// steps ask of values; the steps (cost estimates, defaulting and pruning,
// OpenAPI validation); CEL rules, which use cost estimates; compiling,
// which uses the steps to check a schema; and `Schema`, which runs them.
mod error;
mod formats;
mod limits;
mod path;
mod wording;

mod node;
mod regexes;

mod value;

mod cost;
mod transform;
mod validate;

mod rules;

mod compile;

mod schema;

#[cfg(test)]
mod tests;

pub use error::{FieldError, Reason};
pub use limits::{
    MAX_REQUEST_SIZE_BYTES, PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET, STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
};
pub use schema::{CostLimits, SCHEMA_FIELD_PREFIX, STACK_BYTES, Schema};
