//! OpenAPI 3.0: per group/version documents and the `/openapi/v3` index with content
//! hashes.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::builtin::definition_name;
use super::definitions::build_definitions;
use super::paths::{Flavor, add_paths};
use super::resource::ResourceSchema;

/// The OpenAPI 3.0 document for one group/version (`/openapi/v3/apis/{group}/{version}`,
/// or `/openapi/v3/api/v1` for the core group), with resource URLs guessed
/// from the kinds. See [`v3_document_with_plurals`].
pub fn v3_document(group: &str, version: &str, resources: &[ResourceSchema]) -> Value {
    v3_document_with_plurals(group, version, resources, &|r| r.guessed_plural())
}

/// [`v3_document`] with the resource (URL) names supplied by the caller.
pub fn v3_document_with_plurals(
    group: &str,
    version: &str,
    resources: &[ResourceSchema],
    plural: &dyn Fn(&ResourceSchema) -> String,
) -> Value {
    let selected: Vec<&ResourceSchema> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    let owned: Vec<ResourceSchema> = selected.iter().map(|r| (*r).clone()).collect();
    let mut paths = Map::new();
    for r in &owned {
        let name = definition_name(&r.group, &r.version, &r.kind);
        add_paths(Flavor::V3, &mut paths, r, &plural(r), &name);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": build_definitions(&owned)},
    })
}

/// The `/openapi/v3` index. Without the documents at hand the hash only
/// reflects the group/version; prefer [`v3_index_with_documents`] so clients
/// that cache by URL notice schema changes.
pub fn v3_index(group_versions: &[(String, String)]) -> Value {
    let entries: Vec<(String, String, String)> = group_versions
        .iter()
        .map(|(g, v)| (g.clone(), v.clone(), content_hash(&format!("{g}/{v}"))))
        .collect();
    index_from(&entries)
}

/// The `/openapi/v3` index with each URL's hash taken from its document.
pub fn v3_index_with_documents(docs: &[(String, String, &Value)]) -> Value {
    let entries: Vec<(String, String, String)> = docs
        .iter()
        .map(|(g, v, d)| (g.clone(), v.clone(), document_hash(d)))
        .collect();
    index_from(&entries)
}

fn index_from(entries: &[(String, String, String)]) -> Value {
    let mut paths = BTreeMap::new();
    for (g, v, hash) in entries {
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// A stable hex digest of a document (for `?hash=` and ETags).
pub fn document_hash(doc: &Value) -> String {
    content_hash(&doc.to_string())
}

/// Two FNV-1a passes with different offsets give 128 bits: plenty to tell
/// documents apart, and no hashing dependency.
fn content_hash(s: &str) -> String {
    let fnv = |seed: u64| {
        let mut h = seed;
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    format!(
        "{:016X}{:016X}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}
