//! HTTP entry point: parses Kubernetes API paths and query options, and dispatches each verb.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use crate::authn::Requester;
use crate::discovery;
use crate::objects::{self, DeleteOpts, PatchKind, WriteOpts};
use crate::render::{json_response, render_for, render_one, value_response};
use crate::request::{Query, ResPath, Route, parse_path, parse_query};
use crate::state::Core;
use crate::status::ApiError;
use crate::watch;
use ferrometal_apimachinery::rbac::UserInfo;

/// Largest accepted request body, as kube-apiserver (3 MiB); larger ones get 413.
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// How far past [`MAX_BODY`] a body is still read (and dropped) before answering 413.
const DRAIN: usize = 1024 * 1024;

fn flag(q: &Query, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string()
}

/// Decodes a request body as JSON or YAML; malformed input is a 400, another media type a 415.
pub(crate) fn parse_body(ct: &str, body: &[u8]) -> Result<Value, ApiError> {
    let base = ct.split(';').next().unwrap_or_default().trim();
    let known = base.is_empty()
        || base == "*/*"
        || base.ends_with("json")
        || base.ends_with("yaml")
        || base.contains("protobuf");
    if !known {
        return Err(ApiError::unsupported_media_type(ct));
    }
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
        return crate::yaml::document(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

/// Bodies above this are decoded on the blocking pool, one at a time per spare core, so a
/// stream of large bodies never holds the threads that serve every other request.
const OFFLOAD_BODY: usize = 64 * 1024;

static HEAVY_DECODES: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        tokio::sync::Semaphore::new(cores.saturating_sub(1).max(1))
    });

/// [`parse_body`], off the async workers when the body is large.
async fn decode_body(ct: &str, body: &Bytes) -> Result<Value, ApiError> {
    if body.len() <= OFFLOAD_BODY {
        return parse_body(ct, body);
    }
    let _permit = HEAVY_DECODES
        .acquire()
        .await
        .map_err(|_| ApiError::internal("the server is shutting down"))?;
    let (ct, body) = (ct.to_string(), body.clone());
    tokio::task::spawn_blocking(move || parse_body(&ct, &body))
        .await
        .map_err(|e| ApiError::internal(format!("decoding the body: {e}")))?
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
    let too_large = || {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY}"),
        )
        .into_response()
    };
    // A body a little over the limit is read and dropped so the client gets the 413 rather
    // than a connection reset in the middle of its upload; a far larger one is refused at once.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY + DRAIN) {
        return too_large();
    }
    let body = match axum::body::to_bytes(body, MAX_BODY + DRAIN).await {
        Ok(b) if b.len() > MAX_BODY => return too_large(),
        Ok(b) => b,
        Err(e) => {
            let over = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            if over {
                return too_large();
            }
            return ApiError::bad_request(format!("reading body: {e}")).into_response();
        }
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
        Route::Resource(p) => {
            let user = parts
                .extensions
                .get::<Requester>()
                .map(|r| r.0.clone())
                .unwrap_or_default();
            resource(&core, p, &parts.method, &parts.headers, &q, body, user).await
        }
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
    user: Arc<UserInfo>,
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
        Some("token") if res.builtin && res.key == crate::authn::SA_KEY => {
            if method != Method::POST {
                return Err(ApiError::method_not_supported(
                    &res.target(""),
                    method.as_str(),
                ));
            }
            let req = review_body(headers, &body)?;
            let (ns, name) = (p.namespace.unwrap_or_default(), p.name.unwrap_or_default());
            let out = crate::reviews::token_request(&core.authn, &core.store, &ns, &name, req)?;
            return Ok(value_response(StatusCode::CREATED, &out));
        }
        Some(_) => return Err(ApiError::path_not_found()),
    }
    if res.ephemeral {
        if method != Method::POST {
            return Err(ApiError::method_not_supported(
                &res.target(""),
                method.as_str(),
            ));
        }
        let mut obj = review_body(headers, &body)?;
        obj["apiVersion"] = json!(res.api_version());
        obj["kind"] = json!(res.kind);
        let policy = core.policy.get();
        crate::reviews::answer(
            &res.kind,
            &mut obj,
            &user,
            &policy,
            &core.authn,
            &core.store,
            p.namespace.as_deref(),
        )?;
        return Ok(value_response(StatusCode::CREATED, &obj));
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
        requester: Some(user.clone()),
        ..Default::default()
    };
    let name = p.name.clone();
    match (method.clone(), name) {
        (Method::GET, Some(_)) if p.watch => watch::serve(core, &res, &p, q, render).await,
        (Method::GET, Some(name)) => {
            core.wait_for_resource_version(q).await?;
            let store_ns = if res.namespaced { ns.as_str() } else { "" };
            let Some(obj) = core.store.get(&res.key, store_ns, &name) else {
                return Err(ApiError::not_found(&res.target(&name)));
            };
            Ok(render_one(&res, &obj, render))
        }
        (Method::GET, None) if p.watch || flag(q, "watch") => {
            watch::serve(core, &res, &p, q, render).await
        }
        (Method::GET, None) => {
            core.wait_for_resource_version(q).await?;
            objects::list(core, &res, p.namespace.as_deref(), q, render)
        }
        (Method::POST, None) => {
            if p.namespace.is_none() && res.namespaced {
                return Err(ApiError::path_not_found());
            }
            let obj = decode_body(&ct, &body).await?;
            let out = core.create(&res, &ns, obj, &opts).await?;
            Ok(with_warnings(
                json_response(StatusCode::CREATED, out),
                &opts,
            ))
        }
        (Method::PUT, Some(name)) => {
            let obj = decode_body(&ct, &body).await?;
            let out = core.update(&res, &ns, &name, obj, &opts).await?;
            Ok(with_warnings(json_response(StatusCode::OK, out), &opts))
        }
        (Method::PATCH, Some(name)) => {
            let Some(kind) = PatchKind::from_content_type(&ct) else {
                return Err(ApiError::unsupported_media_type(&ct));
            };
            let patch = if kind == PatchKind::Apply {
                decode_body("application/yaml", &body).await?
            } else {
                decode_body("application/json", &body).await?
            };
            let (out, created) = core.patch(&res, &ns, &name, kind, patch, &opts).await?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(with_warnings(json_response(code, out), &opts))
        }
        (Method::DELETE, Some(name)) => {
            let d = delete_opts(q, &body)?;
            let out = core.delete(&res, &ns, &name, &d).await?;
            Ok(json_response(StatusCode::OK, out))
        }
        (Method::DELETE, None) => {
            let d = delete_opts(q, &body)?;
            objects::delete_collection(core, &res, p.namespace.as_deref(), q, &d).await
        }
        (m, _) => Err(ApiError::method_not_supported(&res.target(""), m.as_str())),
    }
}

/// Adds the write's warnings as `Warning: 299 - "text"` headers, as kube-apiserver does (kubectl
/// prints them).
fn with_warnings(mut resp: Response, opts: &WriteOpts) -> Response {
    for w in opts.take_warnings() {
        let text = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// The body of a review or TokenRequest: a JSON object (decoded from protobuf, which kubectl
/// sends for these).
fn review_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let obj = parse_body(&content_type(headers), body)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(obj)
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
