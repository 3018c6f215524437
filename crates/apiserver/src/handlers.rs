//! HTTP entry point: parses Kubernetes API paths and query options, and dispatches each verb.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use ferrometal_apimachinery::selector::{FieldSelector, LabelSelector};
use ferrometal_apimachinery::table::{self, IncludeObject};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use crate::discovery;
use crate::objects::{DeleteOpts, PatchKind, WriteOpts};
use crate::registry::Resource;
use crate::server::Core;
use crate::status::ApiError;
use crate::store::Stored;
use crate::watch;

/// Largest accepted request body (kube-apiserver allows ~3 MiB objects; patches of large lists
/// can be bigger).
const MAX_BODY: usize = 32 * 1024 * 1024;

/// A parsed resource URL.
#[derive(Debug, Clone, Default)]
pub struct ResPath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Legacy `/watch/` path prefix.
    pub watch: bool,
}

enum Route {
    Discovery(discovery::Doc),
    Resource(ResPath),
    NotFound,
}

fn parse_path(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        [""] => return Route::Discovery(discovery::Doc::Root),
        ["version"] => return Route::Discovery(discovery::Doc::Version),
        ["healthz"] | ["livez"] | ["readyz"] => return Route::Discovery(discovery::Doc::Health),
        ["api"] => return Route::Discovery(discovery::Doc::Api),
        ["apis"] => return Route::Discovery(discovery::Doc::Apis),
        ["openapi", "v2"] => return Route::Discovery(discovery::Doc::OpenApiV2),
        ["openapi", "v3"] => return Route::Discovery(discovery::Doc::OpenApiV3),
        ["openapi", "v3", "api", v] => {
            return Route::Discovery(discovery::Doc::OpenApiV3Gv(String::new(), v.to_string()));
        }
        ["openapi", "v3", "apis", g, v] => {
            return Route::Discovery(discovery::Doc::OpenApiV3Gv(g.to_string(), v.to_string()));
        }
        ["api", v] => {
            return Route::Discovery(discovery::Doc::GroupVersion(String::new(), v.to_string()));
        }
        ["apis", g] => return Route::Discovery(discovery::Doc::Group(g.to_string())),
        ["apis", g, v] => {
            return Route::Discovery(discovery::Doc::GroupVersion(g.to_string(), v.to_string()));
        }
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return Route::NotFound,
    };
    let mut rest = rest;
    let mut watch = false;
    if rest.first() == Some(&"watch") {
        watch = true;
        rest = &rest[1..];
    }
    let mut namespace = None;
    if rest.len() >= 3
        && rest[0] == "namespaces"
        && !(rest.len() == 3 && matches!(rest[2], "status" | "finalize"))
    {
        namespace = Some(rest[1].to_string());
        rest = &rest[2..];
    }
    let p = match rest {
        [r] => ResPath {
            resource: r.to_string(),
            ..Default::default()
        },
        [r, n] => ResPath {
            resource: r.to_string(),
            name: Some(n.to_string()),
            ..Default::default()
        },
        [r, n, s] => ResPath {
            resource: r.to_string(),
            name: Some(n.to_string()),
            subresource: Some(s.to_string()),
            ..Default::default()
        },
        _ => return Route::NotFound,
    };
    if p.resource.is_empty() || p.name.as_deref() == Some("") {
        return Route::NotFound;
    }
    Route::Resource(ResPath {
        group,
        version,
        namespace,
        watch,
        ..p
    })
}

pub type Query = HashMap<String, String>;

fn parse_query(q: Option<&str>) -> Query {
    url::form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn flag(q: &Query, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

pub fn json_response(code: StatusCode, body: Bytes) -> Response {
    let mut r = (code, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub fn value_response(code: StatusCode, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).expect("serializes").into())
}

/// How the client wants objects rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    Full,
    Table(IncludeObject),
    Metadata,
}

fn render_for(headers: &HeaderMap, q: &Query) -> Render {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // The first acceptable media type wins; JSON is the fallback for everything.
    for part in accept.split(',') {
        if part.contains("as=Table") {
            let inc = match q.get("includeObject").map(String::as_str) {
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                _ => IncludeObject::Metadata,
            };
            return Render::Table(inc);
        }
        if part.contains("as=PartialObjectMetadata") {
            return Render::Metadata;
        }
        if part.contains("application/json") || part.contains("*/*") {
            return Render::Full;
        }
    }
    Render::Full
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string()
}

/// Decodes a request body as JSON or YAML; malformed input is a 400.
fn parse_body(ct: &str, body: &[u8]) -> Result<Value, ApiError> {
    if ct.contains("protobuf") {
        return match crate::protobuf::decode(body) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(ApiError::unsupported_media_type(ct)),
            Err(e) => Err(ApiError::bad_request(e.to_string())),
        };
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if ct.contains("yaml") {
        let v: Value = serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        return Ok(v);
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn field_manager(q: &Query, headers: &HeaderMap) -> String {
    if let Some(m) = q.get("fieldManager") {
        return m.clone();
    }
    // Like kube-apiserver: default to the user agent's program name.
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|ua| ua.split('/').next().unwrap_or(ua).to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

pub async fn dispatch(State(core): State<Arc<Core>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad_request(format!("reading body: {e}")).into_response(),
    };
    let q = parse_query(parts.uri.query());
    let result = match parse_path(parts.uri.path()) {
        Route::Discovery(doc) => {
            if parts.method != Method::GET {
                Err(ApiError::new(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                ))
            } else {
                discovery::serve(&core, doc, &parts.headers)
            }
        }
        Route::Resource(p) => resource(&core, p, &parts.method, &parts.headers, &q, body).await,
        Route::NotFound => Err(ApiError::path_not_found()),
    };
    match result {
        Ok(r) => {
            tracing::trace!(method = %parts.method, uri = %parts.uri, code = r.status().as_u16(), "request");
            r
        }
        Err(e) => {
            tracing::debug!(method = %parts.method, uri = %parts.uri, code = e.code, message = %e.message, "request failed");
            e.into_response()
        }
    }
}

async fn resource(
    core: &Arc<Core>,
    p: ResPath,
    method: &Method,
    headers: &HeaderMap,
    q: &Query,
    body: Bytes,
) -> Result<Response, ApiError> {
    let snap = core.registry.snapshot();
    let Some(res) = snap.find(&p.group, &p.version, &p.resource).cloned() else {
        return Err(ApiError::path_not_found());
    };
    // Scope must fit the URL: cluster resources have no namespace, named namespaced ones need one.
    if p.namespace.is_some() && !res.namespaced {
        return Err(ApiError::path_not_found());
    }
    if res.namespaced && p.name.is_some() && p.namespace.is_none() {
        return Err(ApiError::path_not_found());
    }
    match p.subresource.as_deref() {
        None => {}
        Some("status") if res.status_subresource => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    if res.ephemeral {
        return review(&res, method, headers, &body);
    }
    let ns = p.namespace.clone().unwrap_or_default();
    let render = render_for(headers, q);
    let ct = content_type(headers);
    let opts = WriteOpts {
        manager: field_manager(q, headers),
        dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
        force: flag(q, "force"),
        subresource: p.subresource.clone(),
        strict: q.get("fieldValidation").is_some_and(|v| v == "Strict"),
    };
    let name = p.name.clone();
    match (method.clone(), name) {
        (Method::GET, Some(_)) if p.watch => watch::serve(core, &res, &p, q, render),
        (Method::GET, Some(name)) => {
            let store_ns = if res.namespaced { ns.as_str() } else { "" };
            let Some(obj) = core.store.get(&res.key, store_ns, &name) else {
                return Err(ApiError::not_found(&res.target(&name)));
            };
            Ok(render_one(&res, &obj, render))
        }
        (Method::GET, None) if p.watch || flag(q, "watch") => {
            watch::serve(core, &res, &p, q, render)
        }
        (Method::GET, None) => list(core, &res, p.namespace.as_deref(), q, render),
        (Method::POST, None) => {
            if p.namespace.is_none() && res.namespaced {
                return Err(ApiError::path_not_found());
            }
            let obj = parse_body(&ct, &body)?;
            let out = core.create(&res, &ns, obj, &opts).await?;
            Ok(json_response(StatusCode::CREATED, out))
        }
        (Method::PUT, Some(name)) => {
            let obj = parse_body(&ct, &body)?;
            let out = core.update(&res, &ns, &name, obj, &opts).await?;
            Ok(json_response(StatusCode::OK, out))
        }
        (Method::PATCH, Some(name)) => {
            let Some(kind) = PatchKind::from_content_type(&ct) else {
                return Err(ApiError::unsupported_media_type(&ct));
            };
            let patch = if kind == PatchKind::Apply {
                parse_body("application/yaml", &body)?
            } else {
                parse_body("application/json", &body)?
            };
            let out = core.patch(&res, &ns, &name, kind, patch, &opts).await?;
            Ok(json_response(StatusCode::OK, out))
        }
        (Method::DELETE, Some(name)) => {
            let d = delete_opts(q, &body)?;
            let out = core.delete(&res, &ns, &name, &d).await?;
            Ok(json_response(StatusCode::OK, out))
        }
        (Method::DELETE, None) => {
            delete_collection(core, &res, p.namespace.as_deref(), q, &body).await
        }
        (m, _) => Err(ApiError::method_not_supported(&res.target(""), m.as_str())),
    }
}

/// Answers an access or rules review: everything is allowed to the token holder.
fn review(
    res: &Resource,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    if method != Method::POST {
        return Err(ApiError::method_not_supported(
            &res.target(""),
            method.as_str(),
        ));
    }
    // kubectl posts these as protobuf; the answer does not depend on the question, so an
    // undecodable body just yields an answer without the echoed spec.
    let ct = content_type(headers);
    let mut obj = if ct.contains("protobuf") {
        json!({})
    } else {
        parse_body(&ct, body)?
    };
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    obj["apiVersion"] = json!(res.api_version());
    obj["kind"] = json!(res.kind);
    obj["status"] = if res.kind == "SelfSubjectRulesReview" {
        json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        })
    } else {
        json!({"allowed": true, "reason": "the token holder may do everything"})
    };
    Ok(value_response(StatusCode::CREATED, &obj))
}

fn delete_opts(q: &Query, body: &[u8]) -> Result<DeleteOpts, ApiError> {
    let mut d = DeleteOpts {
        propagation: q.get("propagationPolicy").cloned(),
        dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
        ..Default::default()
    };
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            d.propagation = Some(p.into());
        }
        if let Some(u) = v.pointer("/preconditions/uid").and_then(Value::as_str) {
            d.uid = Some(u.into());
        }
        if let Some(r) = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
        {
            d.resource_version = Some(r.into());
        }
        if v.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"))
        {
            d.dry_run = true;
        }
    }
    Ok(d)
}

/// Whether the stored JSON can be served as is through `res` (no relabelling or conversion).
pub fn served_as_stored(res: &Resource, obj: &Stored) -> bool {
    !crate::convert::converts(res) && *obj.api_version == res.api_version()
}

/// The whole object as `res` serves it: relabelled or converted when read through another
/// version.
pub fn versioned(res: &Resource, obj: &Stored) -> Value {
    let v = obj.value();
    if served_as_stored(res, obj) {
        v
    } else {
        crate::convert::from_storage(res, &v)
    }
}

pub fn versioned_json(res: &Resource, obj: &Stored) -> Bytes {
    if served_as_stored(res, obj) {
        obj.json.clone()
    } else {
        serde_json::to_vec(&versioned(res, obj))
            .expect("serializes")
            .into()
    }
}

pub fn partial_metadata(v: &Value) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": v.get("metadata").cloned().unwrap_or(json!({})),
    })
}

fn render_one(res: &Resource, obj: &Stored, render: Render) -> Response {
    match render {
        Render::Full => json_response(StatusCode::OK, versioned_json(res, obj)),
        Render::Metadata => value_response(StatusCode::OK, &partial_metadata(&obj.value())),
        Render::Table(inc) => value_response(
            StatusCode::OK,
            &make_table(res, &[versioned(res, obj)], inc, json!({})),
        ),
    }
}

pub fn make_table(res: &Resource, objs: &[Value], inc: IncludeObject, list_meta: Value) -> Value {
    // Built-in columns are defined on the stored form (core Events).
    if crate::convert::converts(res) {
        let stored: Vec<Value> = objs
            .iter()
            .map(|o| {
                let mut o = o.clone();
                crate::convert::to_storage(res, &mut o);
                o
            })
            .collect();
        return table::to_table(
            &stored,
            &res.columns,
            inc,
            std::time::SystemTime::now(),
            list_meta,
        );
    }
    table::to_table(
        objs,
        &res.columns,
        inc,
        std::time::SystemTime::now(),
        list_meta,
    )
}

/// The `continue` token: where the previous page stopped.
fn encode_continue(ns: &str, name: &str, rv: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"ns": ns, "name": name, "rv": rv}).to_string())
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((
        v.get("ns").and_then(Value::as_str).ok_or_else(bad)?.into(),
        v.get("name")
            .and_then(Value::as_str)
            .ok_or_else(bad)?
            .into(),
    ))
}

/// Label and field selectors from the query; malformed ones are a 400.
pub fn selectors(q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
    Ok((labels, fields))
}

/// Whether an object passes the selectors; the whole object is parsed only for field
/// selectors on fields the stored metadata view does not carry.
fn selected(labels: &LabelSelector, fields: &FieldSelector, o: &Stored) -> bool {
    if labels.is_empty() && fields.is_empty() {
        return true;
    }
    let meta = o.meta();
    if !labels.matches_object(&meta) {
        return false;
    }
    if fields.is_empty() {
        return true;
    }
    let in_meta = fields.fields().iter().all(|f| {
        let top = f.split('.').next().unwrap_or_default();
        (top == "metadata" && !f.starts_with("metadata.annotations")) || meta.get(top).is_some()
    });
    if in_meta {
        fields.matches(&meta)
    } else {
        fields.matches(&o.value())
    }
}

fn list(
    core: &Core,
    res: &Resource,
    ns: Option<&str>,
    q: &Query,
    render: Render,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(q)?;
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let after = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(decode_continue(c)?),
        None => None,
    };
    let (rev, items, more) = core.store.read(|s| {
        let after_ref = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        let mut items: Vec<Arc<Stored>> = Vec::new();
        let mut more = false;
        for obj in s.list(&res.key, ns, after_ref) {
            if !selected(&labels, &fields, obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more = true;
                break;
            }
            items.push(obj.clone());
        }
        (s.revision(), items, more)
    });
    let continue_token = if more {
        items.last().map(|last| {
            let meta = last.meta();
            encode_continue(
                meta.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                crate::meta::name_of(&meta),
                rev,
            )
        })
    } else {
        None
    };
    let mut list_meta = json!({"resourceVersion": rev.to_string()});
    if let Some(c) = &continue_token {
        list_meta["continue"] = json!(c);
    }
    match render {
        Render::Table(inc) => {
            let objs: Vec<Value> = items.iter().map(|o| versioned(res, o)).collect();
            Ok(value_response(
                StatusCode::OK,
                &make_table(res, &objs, inc, list_meta),
            ))
        }
        Render::Metadata => {
            let v = json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadataList",
                "metadata": list_meta,
                "items": items.iter().map(|o| partial_metadata(&o.value())).collect::<Vec<_>>(),
            });
            Ok(value_response(StatusCode::OK, &v))
        }
        Render::Full => {
            // Objects are already serialized; splice them into the list without re-encoding.
            let head = json!({
                "apiVersion": res.api_version(),
                "kind": res.list_kind,
                "metadata": list_meta,
            })
            .to_string();
            let mut buf = BytesMut::with_capacity(
                head.len() + 16 + items.iter().map(|o| o.json.len() + 1).sum::<usize>(),
            );
            buf.put_slice(&head.as_bytes()[..head.len() - 1]);
            buf.put_slice(b",\"items\":[");
            for (i, o) in items.iter().enumerate() {
                if i > 0 {
                    buf.put_u8(b',');
                }
                buf.put_slice(&versioned_json(res, o));
            }
            buf.put_slice(b"]}");
            Ok(json_response(StatusCode::OK, buf.freeze()))
        }
    }
}

async fn delete_collection(
    core: &Core,
    res: &Arc<Resource>,
    ns: Option<&str>,
    q: &Query,
    body: &[u8],
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(q)?;
    let d = delete_opts(q, body)?;
    let names: Vec<(String, String)> = core.store.read(|s| {
        s.list(&res.key, ns, None)
            .filter(|o| selected(&labels, &fields, o))
            .map(|o| {
                let meta = o.meta();
                (
                    meta.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    crate::meta::name_of(&meta).to_string(),
                )
            })
            .collect()
    });
    let mut items = Vec::new();
    for (ns, name) in names {
        match core.delete(res, &ns, &name, &d).await {
            Ok(json) => items.push(serde_json::from_slice::<Value>(&json).unwrap_or_default()),
            // Gone meanwhile: nothing left to do for it.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let v = json!({
        "apiVersion": res.api_version(),
        "kind": res.list_kind,
        "metadata": {"resourceVersion": core.store.revision().to_string()},
        "items": items,
    });
    Ok(value_response(StatusCode::OK, &v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResPath {
        match parse_path(path) {
            Route::Resource(p) => p,
            _ => panic!("not a resource path: {path}"),
        }
    }

    #[test]
    fn paths() {
        let p = res("/api/v1/namespaces/default/secrets/s1");
        assert_eq!(
            (
                p.group.as_str(),
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref()
            ),
            ("", Some("default"), "secrets", Some("s1"))
        );
        let p = res("/api/v1/namespaces/foo");
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref()),
            ("namespaces", Some("foo"))
        );
        let p = res("/api/v1/namespaces/foo/status");
        assert_eq!(
            (
                p.resource.as_str(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            ("namespaces", Some("foo"), Some("status"))
        );
        let p = res("/apis/metal3.io/v1alpha1/namespaces/x/baremetalhosts/h/status");
        assert_eq!(p.subresource.as_deref(), Some("status"));
        assert_eq!(p.group, "metal3.io");
        let p = res("/apis/metal3.io/v1alpha1/baremetalhosts");
        assert!(p.namespace.is_none() && p.name.is_none());
        let p = res("/api/v1/watch/namespaces/default/configmaps");
        assert!(p.watch);
        assert!(matches!(parse_path("/apis/a/b/c/d/e/f/g"), Route::NotFound));
        assert!(matches!(parse_path("/foo"), Route::NotFound));
    }
}
