//! The operations of each resource URL (list, create, get, replace, patch, delete,
//! deletecollection, watch, status), in v3 or v2 form.

use serde_json::{Map, Value, json};

use super::builtin::{DELETE_OPTIONS, PATCH, STATUS, builtin_name};
use super::definitions::{V2_REF, V3_REF, gvk};
use super::resource::ResourceSchema;

fn api_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

fn supports_strategic_merge(r: &ResourceSchema) -> bool {
    builtin_name(&r.group, &r.version, &r.kind).is_some()
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Flavor {
    V2,
    V3,
}

fn reference(flavor: Flavor, name: &str) -> Value {
    let base = if flavor == Flavor::V3 { V3_REF } else { V2_REF };
    json!({"$ref": format!("{base}{name}")})
}

/// One operation object; v3 uses requestBody/content, v2 consumes/produces.
fn operation(
    flavor: Flavor,
    r: &ResourceSchema,
    action: &str,
    verb_desc: String,
    op_id: String,
    body: Option<(&str, Vec<&str>)>,
    response: &str,
) -> Value {
    let mut op = Map::new();
    op.insert("description".into(), verb_desc.into());
    op.insert("operationId".into(), op_id.into());
    let tag = if r.group.is_empty() {
        format!("core_{}", r.version)
    } else {
        format!("{}_{}", r.group.replace('.', "_"), r.version)
    };
    op.insert("tags".into(), json!([tag]));
    let produces = ["application/json", "application/yaml"];
    let mut params = query_params(flavor, action);
    match flavor {
        Flavor::V3 => {
            if let Some((schema, types)) = body {
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| (t.to_string(), json!({"schema": reference(flavor, schema)})))
                    .collect();
                op.insert(
                    "requestBody".into(),
                    json!({"content": content, "required": true}),
                );
            }
            let content: Map<String, Value> = produces
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        json!({"schema": reference(flavor, response)}),
                    )
                })
                .collect();
            op.insert(
                "responses".into(),
                json!({"200": {"description": "OK", "content": content}, "401": {"description": "Unauthorized"}}),
            );
        }
        Flavor::V2 => {
            if let Some((schema, types)) = body {
                op.insert("consumes".into(), json!(types));
                params.push(
                    json!({"in": "body", "name": "body", "required": true, "schema": reference(flavor, schema)}),
                );
            } else {
                op.insert("consumes".into(), json!(["*/*"]));
            }
            op.insert("produces".into(), json!(produces));
            op.insert("schemes".into(), json!(["https"]));
            op.insert(
                "responses".into(),
                json!({"200": {"description": "OK", "schema": reference(flavor, response)}, "401": {"description": "Unauthorized"}}),
            );
        }
    }
    if !params.is_empty() {
        op.insert("parameters".into(), Value::Array(params));
    }
    op.insert("x-kubernetes-action".into(), action.into());
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk(&r.group, &r.version, &r.kind),
    );
    Value::Object(op)
}

/// The query parameters kube-apiserver documents per action. kubectl
/// looks for `fieldValidation` on PATCH to decide that the server validates
/// fields itself (otherwise it falls back to client-side validation).
fn query_params(flavor: Flavor, action: &str) -> Vec<Value> {
    const LIST: &[(&str, &str, &str)] = &[
        (
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
        ),
        (
            "continue",
            "string",
            "The continue option should be set when retrieving more results from the server.",
        ),
        (
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
        ),
        (
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
        ),
        (
            "limit",
            "integer",
            "limit is a maximum number of responses to return for a list call.",
        ),
        (
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        (
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        ),
        (
            "sendInitialEvents",
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true`.",
        ),
        (
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call.",
        ),
        (
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
        ),
    ];
    const DRY_RUN: (&str, &str, &str) = (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
    );
    const FIELD_MANAGER: (&str, &str, &str) = (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    );
    const FIELD_VALIDATION: (&str, &str, &str) = (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
    );
    const FORCE: (&str, &str, &str) = (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
    );
    const GRACE: (&str, &str, &str) = (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    );
    const PROPAGATION: (&str, &str, &str) = (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'.",
    );
    let list: Vec<(&str, &str, &str)> = match action {
        "list" => LIST.to_vec(),
        "post" | "put" => vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION],
        "patch" => vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE],
        "delete" => vec![DRY_RUN, GRACE, PROPAGATION],
        "deletecollection" => {
            let mut v = LIST.to_vec();
            v.extend([DRY_RUN, GRACE, PROPAGATION]);
            v
        }
        _ => Vec::new(),
    };
    list.into_iter()
        .map(|(name, ty, desc)| {
            let mut p = json!({"name": name, "in": "query", "description": desc});
            match flavor {
                Flavor::V3 => p["schema"] = json!({"type": ty, "uniqueItems": true}),
                Flavor::V2 => {
                    p["type"] = ty.into();
                    p["uniqueItems"] = true.into();
                }
            }
            p
        })
        .collect()
}

fn path_params(flavor: Flavor, names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| {
            let mut p = json!({"name": n, "in": "path", "required": true, "description": format!("{n} of the resource")});
            match flavor {
                Flavor::V3 => p["schema"] = json!({"type": "string", "uniqueItems": true}),
                Flavor::V2 => {
                    p["type"] = "string".into();
                    p["uniqueItems"] = true.into();
                }
            }
            p
        })
        .collect()
}

pub(super) fn add_paths(
    flavor: Flavor,
    paths: &mut Map<String, Value>,
    r: &ResourceSchema,
    plural: &str,
    name: &str,
) {
    let prefix = api_prefix(&r.group, &r.version);
    let list_name = format!("{name}List");
    let kind = &r.kind;
    let id_kind = format!("{}{kind}", camel(&r.group, &r.version));
    let ns_seg = if r.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let collection = format!("{prefix}{ns_seg}/{plural}");
    let item = format!("{collection}/{{name}}");
    let mut patch_types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if supports_strategic_merge(r) {
        patch_types.push("application/strategic-merge-patch+json");
    }
    if flavor == Flavor::V3 {
        patch_types.push("application/apply-patch+cbor");
    }
    let ns_param: &[&str] = if r.namespaced { &["namespace"] } else { &[] };
    let mut coll = Map::new();
    coll.insert(
        "get".into(),
        operation(
            flavor,
            r,
            "list",
            format!("list or watch objects of kind {kind}"),
            format!("list{scope}{id_kind}"),
            None,
            &list_name,
        ),
    );
    coll.insert(
        "post".into(),
        operation(
            flavor,
            r,
            "post",
            format!("create a {kind}"),
            format!("create{scope}{id_kind}"),
            Some((name, vec!["application/json", "application/yaml"])),
            name,
        ),
    );
    coll.insert(
        "delete".into(),
        operation(
            flavor,
            r,
            "deletecollection",
            format!("delete collection of {kind}"),
            format!("deleteCollection{scope}{id_kind}"),
            None,
            STATUS,
        ),
    );
    coll.insert("parameters".into(), path_params(flavor, ns_param));
    paths.insert(collection, Value::Object(coll));

    let mut one = Map::new();
    one.insert(
        "get".into(),
        operation(
            flavor,
            r,
            "get",
            format!("read the specified {kind}"),
            format!("read{scope}{id_kind}"),
            None,
            name,
        ),
    );
    one.insert(
        "put".into(),
        operation(
            flavor,
            r,
            "put",
            format!("replace the specified {kind}"),
            format!("replace{scope}{id_kind}"),
            Some((name, vec!["application/json", "application/yaml"])),
            name,
        ),
    );
    one.insert(
        "patch".into(),
        operation(
            flavor,
            r,
            "patch",
            format!("partially update the specified {kind}"),
            format!("patch{scope}{id_kind}"),
            Some((PATCH, patch_types)),
            name,
        ),
    );
    one.insert(
        "delete".into(),
        operation(
            flavor,
            r,
            "delete",
            format!("delete a {kind}"),
            format!("delete{scope}{id_kind}"),
            Some((DELETE_OPTIONS, vec!["application/json", "application/yaml"])),
            STATUS,
        ),
    );
    let mut params = ns_param.to_vec();
    params.insert(0, "name");
    one.insert("parameters".into(), path_params(flavor, &params));
    paths.insert(item, Value::Object(one));

    if r.namespaced {
        let mut all = Map::new();
        all.insert(
            "get".into(),
            operation(
                flavor,
                r,
                "list",
                format!("list or watch objects of kind {kind}"),
                format!("list{id_kind}ForAllNamespaces"),
                None,
                &list_name,
            ),
        );
        paths.insert(format!("{prefix}/{plural}"), Value::Object(all));
    }
}

/// "metal3.io", "v1alpha1" -> "Metal3IoV1alpha1", for operation ids.
fn camel(group: &str, version: &str) -> String {
    let mut out = String::new();
    let group = if group.is_empty() { "core" } else { group };
    for part in group.split(['.', '-']).chain(std::iter::once(version)) {
        let mut cs = part.chars();
        if let Some(f) = cs.next() {
            out.extend(f.to_uppercase());
            out.push_str(cs.as_str());
        }
    }
    out
}
