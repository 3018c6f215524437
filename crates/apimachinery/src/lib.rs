//! Pure Kubernetes API machinery, with no I/O: label and field selectors, merge/JSON/strategic-merge patches, server-side apply, Table rendering, OpenAPI documents.

pub mod apply;
pub mod openapi;
pub mod patch;
pub mod selector;
pub mod table;
