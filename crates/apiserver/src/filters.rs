//! The request filters every request passes, in kube-apiserver's order: authentication, then
//! impersonation, then authorization; the audit line is written once the answer is known.
//! Handlers (admission, registry) run only for authorized requests and find the effective
//! user in the request's [`Requester`] extension.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::audit::Entry;
use crate::authn::{self, Requester};
use crate::authz::{self, RequestAttrs};
use crate::request::{self, Route};
use crate::shares::ConnOwner;
use crate::state::Core;
use crate::status::ApiError;

pub async fn gate(State(core): State<Arc<Core>>, mut req: Request, next: Next) -> Response {
    let q = request::parse_query(req.uri().query());
    let path = req.uri().path().to_string();
    let resource = match request::parse_path(&path) {
        Route::Resource(p) => Some(p),
        _ => None,
    };
    let attrs = RequestAttrs {
        verb: request::verb(req.method(), resource.as_ref(), &q),
        resource,
        path,
    };
    let in_process = req.extensions().get::<crate::authn::InProcess>().is_some();
    let audit = |user: &str, by: Option<&str>, code: u16| {
        // The controllers' own traffic would drown the log; what people and tools do is what
        // it is for.
        if in_process {
            return;
        }
        if let Some(a) = &core.audit {
            let p = attrs.resource.as_ref();
            a.record(Entry {
                user: user.into(),
                impersonated_by: by.map(String::from),
                verb: attrs.verb.clone(),
                group: p.map(|p| p.group.clone()).unwrap_or_default(),
                resource: p.map(|p| p.resource.clone()).unwrap_or_default(),
                subresource: p.and_then(|p| p.subresource.clone()).unwrap_or_default(),
                namespace: p.and_then(|p| p.namespace.clone()).unwrap_or_default(),
                name: p.and_then(|p| p.name.clone()).unwrap_or_default(),
                path: attrs.path.clone(),
                code,
            });
        }
    };
    let caller = match core
        .authn
        .authenticate(&core.store, req.headers(), req.extensions())
    {
        Ok(u) => u,
        Err(e) => {
            audit("system:anonymous", None, e.code);
            return e.into_response();
        }
    };
    // The connection counts against its first user's share (the caller who holds it, not
    // whom they impersonate). Over the share: 429, and the connection is closed so the
    // seat is free again at once.
    if !in_process
        && core.authn.required()
        && !caller.groups.iter().any(|g| g == authn::MASTERS)
        && let Some(owner) = req.extensions().get::<ConnOwner>()
        && !owner.admit(&core.connections, &caller.name, core.limits.shares())
    {
        tracing::debug!(user = %caller.name, "over the per-user connection share");
        audit(&caller.name, None, 429);
        let mut resp =
            ApiError::too_many_connections(core.limits.max_connections_per_user).into_response();
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
        return resp;
    }
    let policy = core.policy.get();
    let caller_name = caller.name.clone();
    let user = match authz::impersonate(&policy, caller, req.headers()) {
        Ok(u) => u,
        Err(e) => {
            audit(&caller_name, None, e.code);
            return e.into_response();
        }
    };
    let by = (user.name != caller_name).then_some(caller_name.as_str());
    if let Err(e) = authz::authorize(&policy, &user, &attrs) {
        tracing::debug!(user = %user.name, verb = %attrs.verb, path = %attrs.path, "forbidden");
        audit(&user.name, by, e.code);
        return e.into_response();
    }
    let name = user.name.clone();
    req.extensions_mut().insert(Requester(Arc::new(user)));
    // Watches are long-running by design; the server's own controllers are not throttled
    // by the clients they serve.
    let long_running = attrs.verb == "watch";
    let _slot = if long_running || in_process {
        None
    } else {
        match InFlight::take(&core) {
            Some(slot) => Some(slot),
            None => {
                let e = ApiError::too_many_requests();
                audit(&name, by, e.code);
                return e.into_response();
            }
        }
    };
    let resp = if long_running {
        next.run(req).await
    } else {
        match tokio::time::timeout(core.limits.request_timeout, next.run(req)).await {
            Ok(r) => r,
            Err(_) => ApiError::timeout().into_response(),
        }
    };
    audit(&name, by, resp.status().as_u16());
    resp
}

/// One of [`crate::Limits::max_in_flight`] request slots, given back on drop.
struct InFlight<'a>(&'a Core);

impl<'a> InFlight<'a> {
    fn take(core: &'a Core) -> Option<InFlight<'a>> {
        let n = core.in_flight.fetch_add(1, Ordering::AcqRel);
        if n >= core.limits.max_in_flight {
            core.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(InFlight(core))
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
