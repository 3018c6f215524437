//! The crate's tests, by topic. They drive the crate through `Schema` as
//! the API server does; `fixtures` holds what they share.

mod basics;
mod cel;
mod compile;
mod cost;
mod fixtures;
mod openapi;
mod robustness;
mod transform;
