//! Discovery and OpenAPI documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}`,
//! `/openapi/v2`, `/openapi/v3`.
//!
//! kubectl first asks `/api` and `/apis` for aggregated discovery (apidiscovery.k8s.io/v2),
//! which answers everything in two requests; clients that do not ask get the plain
//! `APIVersions`/`APIGroupList` and then fetch each group version.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use ferrometal_apimachinery::openapi::{self, ResourceSchema};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::registry::Snapshot;
use crate::render::value_response;
use crate::state::Core;
use crate::status::ApiError;

pub use crate::request::Doc;

fn verbs(r: &crate::registry::Resource) -> &'static [&'static str] {
    if r.ephemeral { &["create"] } else { VERBS }
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn serve(core: &Core, doc: Doc, headers: &HeaderMap) -> Result<Response, ApiError> {
    let snap = core.registry.snapshot();
    let ok = |v: Value| Ok(value_response(StatusCode::OK, &v));
    match doc {
        Doc::Health => Ok((StatusCode::OK, "ok").into_response()),
        Doc::Ready => Ok(match core.store.unwritable() {
            None => (StatusCode::OK, "ok").into_response(),
            Some(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("[-]store failed: cannot write ({why})\nreadyz check failed\n"),
            )
                .into_response(),
        }),
        Doc::Root => {
            let mut paths = vec![
                "/api".to_string(),
                "/api/v1".into(),
                "/apis".into(),
                "/openapi/v2".into(),
                "/openapi/v3".into(),
                "/version".into(),
                "/healthz".into(),
            ];
            for (g, vs) in snap.group_versions() {
                if g.is_empty() {
                    continue;
                }
                paths.push(format!("/apis/{g}"));
                paths.extend(vs.iter().map(|v| format!("/apis/{g}/{v}")));
            }
            ok(json!({ "paths": paths }))
        }
        Doc::Version => ok(json!({
            "major": "1",
            "minor": "32",
            "gitVersion": format!("v1.32.0+ferrometal-{}", env!("CARGO_PKG_VERSION")),
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        })),
        Doc::Api if wants_aggregated(headers) => Ok(aggregated(&snap, true)),
        Doc::Apis if wants_aggregated(headers) => Ok(aggregated(&snap, false)),
        Doc::Api => ok(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [],
        })),
        Doc::Apis => {
            let groups: Vec<Value> = snap
                .group_versions()
                .into_iter()
                .filter(|(g, _)| !g.is_empty())
                .map(|(g, vs)| group_json(&g, &vs))
                .collect();
            ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        Doc::Group(g) => match snap.group_versions().into_iter().find(|(n, _)| *n == g) {
            Some((g, vs)) if !g.is_empty() => {
                let mut v = group_json(&g, &vs);
                v["kind"] = json!("APIGroup");
                v["apiVersion"] = json!("v1");
                ok(v)
            }
            _ => Err(ApiError::path_not_found()),
        },
        Doc::GroupVersion(g, v) => {
            resource_list(&snap, &g, &v).map_or_else(|| Err(ApiError::path_not_found()), ok)
        }
        Doc::OpenApiV2 => {
            let doc =
                openapi::v2_document_with_plurals(&schemas(&snap, None), &|r| plural_of(&snap, r));
            let accept = headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            // kubectl only parses the protobuf form; other clients get JSON.
            if openapi::wants_v2_protobuf(accept) {
                Ok((
                    StatusCode::OK,
                    [(
                        http::header::CONTENT_TYPE,
                        openapi::V2_PROTOBUF_CONTENT_TYPE,
                    )],
                    openapi::encode_v2(&doc),
                )
                    .into_response())
            } else {
                ok(doc)
            }
        }
        Doc::OpenApiV3 => {
            let gvs: Vec<(String, String)> = snap
                .group_versions()
                .into_iter()
                .flat_map(|(g, vs)| vs.into_iter().map(move |v| (g.clone(), v)))
                .collect();
            // The index hashes each document, so a changed CRD schema gets a new URL and kubectl
            // does not keep using a cached one.
            let docs: Vec<(String, String, Value)> = gvs
                .into_iter()
                .map(|(g, v)| {
                    let doc = v3_document(&snap, &g, &v);
                    (g, v, doc)
                })
                .collect();
            let refs: Vec<(String, String, &Value)> = docs
                .iter()
                .map(|(g, v, d)| (g.clone(), v.clone(), d))
                .collect();
            ok(openapi::v3_index_with_documents(&refs))
        }
        Doc::OpenApiV3Gv(g, v) => {
            if !snap
                .resources
                .iter()
                .any(|r| r.group == g && r.version == v)
            {
                return Err(ApiError::path_not_found());
            }
            ok(v3_document(&snap, &g, &v))
        }
    }
}

/// One group version's OpenAPI v3 document, with the resources' real plurals (a guessed one,
/// e.g. "hardwaredatas", makes `kubectl explain` miss the resource).
fn v3_document(snap: &Arc<Snapshot>, group: &str, version: &str) -> Value {
    let mut doc = openapi::v3_document_with_plurals(
        group,
        version,
        &schemas(snap, Some((group, version))),
        &|r| plural_of(snap, r),
    );
    add_write_params(&mut doc);
    doc
}

fn plural_of(snap: &Snapshot, r: &ResourceSchema) -> String {
    snap.resources
        .iter()
        .find(|x| x.group == r.group && x.version == r.version && x.kind == r.kind)
        .map(|x| x.plural.clone())
        .unwrap_or_else(|| r.guessed_plural())
}

/// Declares the write query parameters on every write operation. kubectl looks for
/// `fieldValidation` on PATCH to decide it may leave validation to the server; without it, it
/// falls back to the protobuf-only OpenAPI v2 document.
fn add_write_params(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for item in paths.values_mut() {
        for method in ["post", "put", "patch"] {
            let Some(op) = item.get_mut(method).and_then(Value::as_object_mut) else {
                continue;
            };
            let params = op.entry("parameters").or_insert_with(|| json!([]));
            let Some(params) = params.as_array_mut() else {
                continue;
            };
            for name in ["dryRun", "fieldManager", "fieldValidation"] {
                if !params.iter().any(|p| p.get("name") == Some(&json!(name))) {
                    params.push(json!({
                        "name": name, "in": "query", "uniqueItems": true,
                        "schema": {"type": "string"},
                    }));
                }
            }
            if method == "patch"
                && !params
                    .iter()
                    .any(|p| p.get("name") == Some(&json!("force")))
            {
                params.push(json!({
                    "name": "force", "in": "query", "uniqueItems": true,
                    "schema": {"type": "boolean"},
                }));
            }
        }
    }
}

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client's first choice is aggregated discovery v2.
fn wants_aggregated(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<&str> = first.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

/// The APIGroupDiscoveryList for the core group (`/api`) or all named groups (`/apis`).
fn aggregated(snap: &Snapshot, core: bool) -> Response {
    let mut items = Vec::new();
    for (g, versions) in snap.group_versions() {
        if g.is_empty() != core {
            continue;
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources: Vec<Value> = snap
                    .resources
                    .iter()
                    .filter(|r| r.group == g && r.version == *v)
                    .map(|r| {
                        let kind = json!({"group": g, "version": v, "kind": r.kind});
                        let mut entry = json!({
                            "resource": r.plural,
                            "responseKind": kind,
                            "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": r.singular,
                            "verbs": verbs(r),
                        });
                        if !r.short_names.is_empty() {
                            entry["shortNames"] = json!(r.short_names);
                        }
                        if !r.categories.is_empty() {
                            entry["categories"] = json!(r.categories);
                        }
                        if r.status_subresource {
                            entry["subresources"] = json!([{
                                "subresource": "status",
                                "responseKind": kind,
                                "verbs": ["get", "patch", "update"],
                            }]);
                        }
                        entry
                    })
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        items.push(json!({"metadata": {"name": g}, "versions": versions}));
    }
    let body = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    });
    let mut resp = value_response(StatusCode::OK, &body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(AGGREGATED),
    );
    resp
}

fn group_json(g: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({
        "name": g,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(json!({})),
    })
}

fn resource_list(snap: &Snapshot, g: &str, v: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in snap
        .resources
        .iter()
        .filter(|r| r.group == g && r.version == v)
    {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs(r),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

/// Schemas for the OpenAPI documents: built-ins from apimachinery, CRDs from their spec.
fn schemas(snap: &Arc<Snapshot>, only: Option<(&str, &str)>) -> Vec<ResourceSchema> {
    let builtin = openapi::builtin_schemas();
    let mut out = Vec::new();
    for r in &snap.resources {
        if only.is_some_and(|(g, v)| r.group != g || r.version != v) {
            continue;
        }
        let schema = match &r.openapi {
            Some(s) => s.clone(),
            None => match builtin
                .iter()
                .find(|b| b.group == r.group && b.version == r.version && b.kind == r.kind)
            {
                Some(b) => b.schema.clone(),
                None => continue,
            },
        };
        out.push(ResourceSchema {
            group: r.group.clone(),
            version: r.version.clone(),
            kind: r.kind.clone(),
            namespaced: r.namespaced,
            schema,
        });
    }
    out
}
