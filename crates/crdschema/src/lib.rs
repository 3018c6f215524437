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

mod compile;
mod cost;
mod formats;
mod regexes;
mod rules;
mod transform;
mod validate;

#[cfg(test)]
mod cost_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

pub(crate) use compile::Node;
pub use cost::{
    MAX_REQUEST_SIZE_BYTES, PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET, STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
};

/// The prefix of every field path [`Schema::compile`] reports, as
/// kube-apiserver reports schema errors of a CRD. A caller that reports
/// them under another path (e.g. `spec.versions[0].schema.openAPIV3Schema`)
/// strips it and puts its own in front.
pub const SCHEMA_FIELD_PREFIX: &str = compile::ROOT_PATH;

/// One validation failure, shaped like a Kubernetes `StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Kubernetes field path, e.g. `spec.bmc.address` or `spec.ports[0].name`.
    pub field: String,
    pub reason: Reason,
    /// The error body as kube-apiserver words it, e.g. `Required value`.
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(
        field: impl Into<String>,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            reason,
            message: message.into(),
        }
    }
}

/// The Kubernetes `CauseType` of a [`FieldError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Reason {
    FieldValueRequired,
    FieldValueInvalid,
    FieldValueNotSupported,
    FieldValueTypeInvalid,
    FieldValueDuplicate,
    FieldValueTooLong,
    FieldValueTooMany,
    FieldValueForbidden,
}

impl Reason {
    /// The `CauseType` string Kubernetes puts in `status.details.causes[].reason`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::FieldValueRequired => "FieldValueRequired",
            Reason::FieldValueInvalid => "FieldValueInvalid",
            Reason::FieldValueNotSupported => "FieldValueNotSupported",
            Reason::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            Reason::FieldValueDuplicate => "FieldValueDuplicate",
            Reason::FieldValueTooLong => "FieldValueTooLong",
            Reason::FieldValueTooMany => "FieldValueTooMany",
            Reason::FieldValueForbidden => "FieldValueForbidden",
        }
    }

    /// Parses the reasons a CEL rule may name (`x-kubernetes-validations[].reason`).
    pub(crate) fn from_rule_reason(s: &str) -> Option<Reason> {
        match s {
            "FieldValueInvalid" => Some(Reason::FieldValueInvalid),
            "FieldValueForbidden" => Some(Reason::FieldValueForbidden),
            "FieldValueRequired" => Some(Reason::FieldValueRequired),
            "FieldValueDuplicate" => Some(Reason::FieldValueDuplicate),
            _ => None,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether [`Schema::compile_with`] enforces the static cost limits of
/// CEL rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CostLimits {
    /// Refuse rules whose estimated cost exceeds
    /// [`STATIC_ESTIMATED_COST_LIMIT`], or together
    /// [`STATIC_ESTIMATED_CRD_COST_LIMIT`], and literal regular expressions
    /// too costly to compile: for a CRD being created, or a version whose
    /// schema an update changes.
    #[default]
    Enforce,
    /// Accept them, as kube-apiserver accepts CRDs it stored already (it
    /// checks costs only when a schema is written, and skips the check for
    /// versions whose schema an update leaves as it was). Evaluation is
    /// bounded all the same.
    Ignore,
}

/// A compiled structural schema of one CRD version.
///
/// Cheap to clone and safe to share between threads.
#[derive(Clone)]
pub struct Schema {
    root: Arc<Node>,
    env: Arc<cel::Env>,
    /// The literal patterns of the rules, compiled.
    literals: Arc<regexes::Table>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema").finish_non_exhaustive()
    }
}

impl Schema {
    /// Compiles an `openAPIV3Schema`, rejecting what kube-apiserver rejects
    /// as non-structural, CEL rules that do not compile, and rules whose
    /// estimated cost exceeds kube-apiserver's limits
    /// ([`CostLimits::Enforce`]).
    ///
    /// Cost errors are `FieldValueForbidden` causes worded as
    /// kube-apiserver's, e.g. at
    /// `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`:
    /// `Forbidden: estimated rule cost exceeds budget by factor of more
    /// than 100x (try simplifying the rule, or adding maxItems,
    /// maxProperties, and maxLength where arrays, maps, and strings are
    /// declared)`.
    pub fn compile(open_api_v3_schema: &serde_json::Value) -> Result<Schema, Vec<FieldError>> {
        Schema::compile_with(open_api_v3_schema, CostLimits::Enforce)
    }

    /// [`Schema::compile`], choosing whether static cost limits apply: a
    /// server loading CRDs it stored before, or validating an update that
    /// leaves this version's schema unchanged, passes
    /// [`CostLimits::Ignore`], so that a CRD accepted once stays usable.
    pub fn compile_with(
        open_api_v3_schema: &serde_json::Value,
        limits: CostLimits,
    ) -> Result<Schema, Vec<FieldError>> {
        on_big_stack(|| {
            let env = rules::env();
            let (root, literals) = compile::compile_root(open_api_v3_schema, &env, limits)?;
            Ok(Schema {
                root: Arc::new(root),
                env,
                literals: Arc::new(literals),
            })
        })
        .unwrap_or_else(|| Err(vec![internal_error("compiling the schema")]))
    }

    /// Applies `default`s where fields are missing, recursively, and drops
    /// nulls of non-nullable fields without a default, as the apiserver does
    /// when it decodes a custom resource.
    pub fn default(&self, obj: &mut serde_json::Value) {
        transform::default(&self.root, obj, 0);
    }

    /// Drops fields that the schema does not specify, except under
    /// `x-kubernetes-preserve-unknown-fields`. `apiVersion`, `kind` and
    /// `metadata` at the root are left to the server.
    pub fn prune(&self, obj: &mut serde_json::Value) {
        self.prune_reporting(obj);
    }

    /// [`Schema::prune`], returning the paths of the fields it dropped
    /// (e.g. `spec.bmc.password`, `spec.ports[0].vlan`), so that the server
    /// can honour `fieldValidation=Strict` (`unknown field "spec.foo"`) or
    /// `Warn`.
    pub fn prune_reporting(&self, obj: &mut serde_json::Value) -> Vec<String> {
        let mut dropped = Vec::new();
        transform::prune(&self.root, obj, true, 0, &Path::default(), &mut dropped);
        dropped
    }

    /// Validates `obj` against the OpenAPI schema, then against its CEL
    /// rules. `old` is the stored object on update; transition rules (those
    /// reading `oldSelf`) run only when it is given.
    ///
    /// With `old`, validation ratchets as in kube-apiserver: values equal to
    /// the old value at the same path (list items correlated by key for map
    /// lists, by value for sets) are not re-checked, except by transition
    /// rules, so objects stored under a looser schema stay updatable.
    ///
    /// Each rule is estimated against the object's values before it runs.
    /// One estimated over [`PER_CALL_LIMIT`], or over what remains of the
    /// object's [`RUNTIME_CEL_COST_BUDGET`], is not run: an error at the
    /// rule's node (`Invalid value: "object": validation failed due to
    /// running out of cost budget, no further validation rules will be
    /// run`, or `... call cost exceeds limit for rule: ...`) ends the CEL
    /// validation, and the server answers 422 as for any other error.
    pub fn validate(
        &self,
        obj: &serde_json::Value,
        old: Option<&serde_json::Value>,
    ) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate::validate_root(&self.root, obj, old, &mut errs);
        if self.root.has_rules() {
            let run = || rules::validate_root(&self.root, &self.env, &self.literals, obj, old);
            match on_big_stack(run) {
                Some(mut rule_errs) => errs.append(&mut rule_errs),
                None => errs.push(internal_error("evaluating validation rules")),
            }
        }
        errs
    }
}

/// The stack CEL parsing and evaluation run on. cel's interpreter recurses
/// once per level of the expression, with large frames in debug builds, so
/// even rules within the nesting limit could exhaust a default 2 MiB thread
/// stack; a stack overflow aborts the process, which no input may cause.
const CEL_STACK_BYTES: usize = 256 << 20;

/// Runs `f` on a [`CEL_STACK_BYTES`] stack (only the pages used are
/// committed), switched to on the calling thread, unless that much remains
/// on the current one. `None` if `f` panicked, which the CEL calls inside
/// guard against already.
///
/// A stack of the calling thread rather than a new thread: spawning and
/// joining one per compile and per validation cost more than compiling or
/// validating a small schema, and waited on the scheduler on a busy machine.
fn on_big_stack<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stacker::maybe_grow(CEL_STACK_BYTES, CEL_STACK_BYTES, f)
    }))
    .ok()
}

fn internal_error(what: &str) -> FieldError {
    FieldError::new(
        "",
        Reason::FieldValueInvalid,
        format!("Invalid value: internal error while {what}"),
    )
}

/// A field path, rendered the way Kubernetes renders it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Path(Vec<Seg>);

#[derive(Debug, Clone)]
enum Seg {
    Field(String),
    Index(usize),
    Key(String),
}

impl Path {
    pub(crate) fn field(&self, name: &str) -> Path {
        self.with(Seg::Field(name.to_string()))
    }

    pub(crate) fn index(&self, i: usize) -> Path {
        self.with(Seg::Index(i))
    }

    pub(crate) fn key(&self, k: &str) -> Path {
        self.with(Seg::Key(k.to_string()))
    }

    fn with(&self, seg: Seg) -> Path {
        let mut segs = self.0.clone();
        segs.push(seg);
        Path(segs)
    }

    /// `field.Path` style: map keys in brackets (`spec.labels[foo]`).
    pub(crate) fn render(&self) -> String {
        self.render_with(true)
    }

    /// go-openapi style, which kube-apiserver reports for OpenAPI errors:
    /// map keys joined with dots (`spec.labels.foo`).
    pub(crate) fn render_openapi(&self) -> String {
        self.render_with(false)
    }

    fn render_with(&self, bracket_keys: bool) -> String {
        let mut out = String::new();
        for seg in &self.0 {
            match seg {
                Seg::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
                Seg::Key(k) if bracket_keys => {
                    out.push('[');
                    out.push_str(k);
                    out.push(']');
                }
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
            }
        }
        out
    }
}

/// Formats a value as kube-apiserver does in `Invalid value: ...` bodies;
/// objects and arrays by their type only, which keeps messages short.
pub(crate) fn fmt_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => quote(s),
        serde_json::Value::Object(_) => quote("object"),
        serde_json::Value::Array(_) => quote("array"),
        other => other.to_string(),
    }
}

pub(crate) fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Formats a number as Go's `%v` does for a float64 holding it.
pub(crate) fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}
