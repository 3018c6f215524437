//! Swagger 2.0 (`/openapi/v2`): the v3 definitions rewritten for 2.0.

use serde_json::{Map, Value, json};

use super::builtin::definition_name;
use super::definitions::{V2_REF, V3_REF, build_definitions};
use super::paths::{Flavor, add_paths};
use super::resource::ResourceSchema;

/// Swagger 2.0 (`/openapi/v2`) for all resources: definitions with GVK
/// extensions and the resource paths. Constructs 2.0 lacks (nullable,
/// oneOf/anyOf/not) are dropped, as kube-apiserver does for CRDs.
pub fn v2_document(resources: &[ResourceSchema]) -> Value {
    v2_document_with_plurals(resources, &|r| r.guessed_plural())
}

/// [`v2_document`] with the resource (URL) names supplied by the caller.
pub fn v2_document_with_plurals(
    resources: &[ResourceSchema],
    plural: &dyn Fn(&ResourceSchema) -> String,
) -> Value {
    let mut paths = Map::new();
    for r in resources {
        let name = definition_name(&r.group, &r.version, &r.kind);
        add_paths(Flavor::V2, &mut paths, r, &plural(r), &name);
    }
    let mut defs = Value::Object(build_definitions(resources));
    to_v2_inner(&mut defs, true);
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "definitions": defs,
    })
}

/// `names_map` marks maps keyed by property/definition names, whose keys
/// are names rather than schema keywords.
fn to_v2_inner(v: &mut Value, names_map: bool) {
    match v {
        Value::Object(m) => {
            if !names_map {
                for k in ["nullable", "oneOf", "anyOf", "not"] {
                    m.remove(k);
                }
                if let Some(Value::String(r)) = m.get_mut("$ref")
                    && let Some(name) = r.strip_prefix(V3_REF)
                {
                    *r = format!("{V2_REF}{name}");
                }
            }
            for (k, c) in m.iter_mut() {
                let child_names = !names_map
                    && matches!(
                        k.as_str(),
                        "properties" | "patternProperties" | "definitions"
                    );
                to_v2_inner(c, child_names);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| to_v2_inner(c, false)),
        _ => {}
    }
}
