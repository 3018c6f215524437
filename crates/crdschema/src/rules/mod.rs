//! `x-kubernetes-validations`: CEL rules compiled with the schema and
//! evaluated against each value at the node that declares them.

// In groups, bottom up; each group imports only from the groups above it:
// the CEL environment, the Kubernetes library and the context offering it,
// the schema checks of rule fields, converting values and running one
// expression; parsing, which renames calls into the library, and what rules
// read of their values; compiling a rule, and the walk that evaluates a
// schema's rules.
mod env;
mod field_check;
mod k8s;
mod run;
mod to_cel;

mod parse;
mod reads;

mod compile;
mod walker;

pub(crate) use compile::{RuleAt, compile_rule};
pub(crate) use env::env;
pub(crate) use reads::rule_reads;
pub(crate) use walker::validate_root;
