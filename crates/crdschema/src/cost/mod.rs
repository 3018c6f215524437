//! Bounds on the work CEL rules may do, as kube-apiserver bounds it.
//!
//! kube-apiserver relies on cel-go's cost tracking; the `cel` crate has
//! none, so costs are estimated here from the rule's expression tree, in
//! cel-go's units (one unit is roughly one simple operation; string work
//! costs 0.1 per character, `matches` the product of string and pattern
//! length, a comprehension the size of its range times its body).
//!
//! * When a CRD is written, every rule is estimated against the sizes its
//!   schema allows (`maxItems`, `maxLength`, `maxProperties`; what is
//!   unbounded is assumed as large as a request can make it), times the
//!   number of times it may run per object. A rule over
//!   [`STATIC_ESTIMATED_COST_LIMIT`], or a schema whose rules add up to over
//!   [`STATIC_ESTIMATED_CRD_COST_LIMIT`], is refused with kube-apiserver's
//!   messages.
//! * When an object is validated, the same estimate is made against the
//!   largest values the object (and its old version) actually holds at each
//!   place of the schema, before a rule runs. A rule estimated over
//!   [`PER_CALL_LIMIT`], or over what is left of the object's
//!   [`RUNTIME_CEL_COST_BUDGET`], is not run and the object is refused.
//!
//! The estimate is an upper bound: it follows every branch, assumes no
//! short-circuit, and charges every element of a list the largest element's
//! cost. Regular expressions that are not literals in the rule are compiled
//! while the rule runs, and metered then (see `regexes::Meter`).
//!
//! [`STATIC_ESTIMATED_COST_LIMIT`]: crate::limits::STATIC_ESTIMATED_COST_LIMIT
//! [`STATIC_ESTIMATED_CRD_COST_LIMIT`]: crate::limits::STATIC_ESTIMATED_CRD_COST_LIMIT
//! [`PER_CALL_LIMIT`]: crate::limits::PER_CALL_LIMIT
//! [`RUNTIME_CEL_COST_BUDGET`]: crate::limits::RUNTIME_CEL_COST_BUDGET

// In groups, bottom up; each group imports only from the groups above it:
// the abstract values estimates work on, the sizes a schema allows and the
// sizes an object holds; where an estimate takes sizes from; what each
// function costs; the estimator; and the check made when a CRD is written.
mod abstract_value;
mod bounds;
mod stats;

mod sizes;

mod functions;

mod estimate;

mod static_check;

pub(crate) use estimate::estimate;
pub(crate) use sizes::Sizes;
pub(crate) use static_check::check_static;
#[cfg(test)]
pub(crate) use static_check::cost_error_message;
pub(crate) use stats::Stats;
