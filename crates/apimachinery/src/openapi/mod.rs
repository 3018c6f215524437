//! OpenAPI v2/v3 documents for `kubectl explain`, client-side validation
//! and kubectl's choice of patch type (it sends strategic merge patches
//! only for kinds whose PATCH operation lists that content type).
//!
//! The parts, each using only those listed before it: `resource` (what a
//! document describes: [`ResourceSchema`]), `builtin` (the built-in kinds'
//! schemas, generated from k8s-openapi), `definitions` (a kind's definition
//! and list definition, plus every definition they refer to), `paths` (the
//! operations of each resource URL), then `v3` and `v2` (the documents and
//! the `/openapi/v3` index), and `v2_protobuf` (the v2 document as kubectl
//! reads it).

mod builtin;
mod definitions;
mod paths;
mod resource;
mod v2;
mod v2_protobuf;
mod v3;

pub use builtin::{builtin_schemas, definition_name};
pub use resource::{ResourceSchema, guess_plural};
pub use v2::{v2_document, v2_document_with_plurals};
pub use v2_protobuf::{V2_PROTOBUF_ACCEPT, V2_PROTOBUF_CONTENT_TYPE, encode_v2, wants_v2_protobuf};
pub use v3::{
    document_hash, v3_document, v3_document_with_plurals, v3_index, v3_index_with_documents,
};

#[cfg(test)]
mod tests;
