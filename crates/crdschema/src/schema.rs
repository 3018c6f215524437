//! [`Schema`], the compiled schema the API server holds, and how it runs
//! each step: compiling, defaulting, pruning, OpenAPI validation and CEL
//! rules. The steps themselves live in their own modules.

use std::fmt;
use std::sync::Arc;

use crate::compile::compile_root;
use crate::error::{FieldError, Reason};
use crate::node::{Node, ROOT_PATH};
use crate::path::Path;
use crate::regexes::Table;
use crate::rules;
use crate::transform;
use crate::validate;

/// The prefix of every field path [`Schema::compile`] reports, as
/// kube-apiserver reports schema errors of a CRD. A caller that reports
/// them under another path (e.g. `spec.versions[0].schema.openAPIV3Schema`)
/// strips it and puts its own in front.
pub const SCHEMA_FIELD_PREFIX: &str = ROOT_PATH;

/// Whether [`Schema::compile_with`] enforces the static cost limits of
/// CEL rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CostLimits {
    /// Refuse rules whose estimated cost exceeds
    /// [`STATIC_ESTIMATED_COST_LIMIT`](crate::limits::STATIC_ESTIMATED_COST_LIMIT),
    /// or together
    /// [`STATIC_ESTIMATED_CRD_COST_LIMIT`](crate::limits::STATIC_ESTIMATED_CRD_COST_LIMIT),
    /// and literal regular expressions too costly to compile: for a CRD
    /// being created, or a version whose schema an update changes.
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
    literals: Arc<Table>,
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
            let enforce = limits == CostLimits::Enforce;
            let (root, literals) = compile_root(open_api_v3_schema, &env, enforce)?;
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
    /// One estimated over [`PER_CALL_LIMIT`](crate::limits::PER_CALL_LIMIT),
    /// or over what remains of the object's
    /// [`RUNTIME_CEL_COST_BUDGET`](crate::limits::RUNTIME_CEL_COST_BUDGET),
    /// is not run: an error at the rule's node (`Invalid value: "object": validation failed due to
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
///
/// A thread with this much stack left runs compilation and validation on
/// its own stack; any other maps one of this size for the call and unmaps
/// it after, which costs more than validating a small object (the unmap
/// flushes the TLB of every core the process runs on). A server that
/// validates on every write gives its threads this much more than they use.
pub const STACK_BYTES: usize = 256 << 20;

/// Runs `f` on a [`STACK_BYTES`] stack (only the pages used are
/// committed), switched to on the calling thread, unless that much remains
/// on the current one. `None` if `f` panicked, which the CEL calls inside
/// guard against already.
///
/// A stack of the calling thread rather than a new thread: spawning and
/// joining one per compile and per validation cost more than compiling or
/// validating a small schema, and waited on the scheduler on a busy machine.
fn on_big_stack<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stacker::maybe_grow(STACK_BYTES, STACK_BYTES, f)
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
