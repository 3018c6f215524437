//! Admission: what a write must pass after authorization and before the store. Identity,
//! metadata and schema checks (validation.rs), built-in kinds' defaults and typed decoding
//! (builtin.rs), and RBAC escalation prevention (rbac.rs).

mod builtin;
mod rbac;
mod validation;

pub use builtin::{
    builtin_prepare, check_builtin_types, check_builtin_update, keep_transition_times,
};
pub use rbac::check as check_rbac;
pub use validation::{api_version_ok, cause, check_metadata, validate_cr};
