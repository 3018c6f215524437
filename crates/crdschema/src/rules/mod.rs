//! `x-kubernetes-validations`: CEL rules compiled with the schema and
//! evaluated against each value at the node that declares them.

// Bottom up: the Kubernetes library and the environment; parsing; the
// schema checks and compiling a rule; converting values, running one
// expression, and the walk that evaluates a schema's rules.
mod compile;
mod env;
mod field_check;
mod k8s;
mod parse;
mod run;
mod to_cel;
mod walker;

pub(crate) use compile::{RuleAt, compile_rule};
pub(crate) use env::env;
pub(crate) use walker::validate_root;
