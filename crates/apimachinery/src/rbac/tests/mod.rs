//! Tests of the RBAC evaluation, by topic; the shared policy fixture and object
//! builders are in `fixtures`.

mod aggregation;
mod authorize;
mod escalation;
mod fixtures;
mod forbidden;
mod objects;
