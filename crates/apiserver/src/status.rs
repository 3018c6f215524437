//! API errors rendered as `metav1.Status`, with the codes, reasons and message shapes of
//! kube-apiserver (clients match on them).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::store::StoreError;

/// One `details.causes` entry.
#[derive(Debug, Clone)]
pub struct Cause {
    pub field: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// (name, group, kind) for `details`; boxed to keep errors small on the happy path.
    pub details: Option<Box<(String, String, String)>>,
    pub causes: Vec<Cause>,
    pub retry_after: Option<u64>,
}

/// Identifies the resource in messages like `secrets "x" not found`.
pub struct Target<'a> {
    /// "secrets" or "baremetalhosts.metal3.io".
    pub resource: &'a str,
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
            retry_after: None,
        }
    }

    pub fn with_name_kind(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(Box::new((name.into(), group.into(), kind.into())));
        self
    }

    fn with_details(mut self, t: &Target) -> Self {
        self.details = Some(Box::new((t.name.into(), t.group.into(), t.kind_plural())));
        self
    }

    pub fn not_found(t: &Target) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", t.resource, t.name),
        )
        .with_details(t)
    }

    pub fn already_exists(t: &Target) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", t.resource, t.name),
        )
        .with_details(t)
    }

    pub fn conflict(t: &Target) -> Self {
        Self::conflict_msg(
            t,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn conflict_msg(t: &Target, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {why}",
                t.resource, t.name
            ),
        )
        .with_details(t)
    }

    /// 422 with one cause per field, message `Kind.group "name" is invalid: f: msg, f2: msg`.
    pub fn invalid(t: &Target, causes: Vec<Cause>) -> Self {
        let qualified = if t.group.is_empty() {
            t.kind.to_string()
        } else {
            format!("{}.{}", t.kind, t.group)
        };
        let list = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{qualified} \"{}\" is invalid: {joined}", t.name),
        );
        e.details = Some(Box::new((t.name.into(), t.group.into(), t.kind.into())));
        e.causes = causes;
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn method_not_supported(t: &Target, verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{verb} is not supported on resources of kind \"{}\"",
                t.resource
            ),
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {content_type})"
            ),
        )
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 429 with Retry-After, as kube-apiserver's max-in-flight filter.
    pub fn too_many_requests() -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        e.retry_after = Some(1);
        e
    }

    /// 429 for a user who already holds their share of the server's connections.
    pub fn too_many_connections(share: usize) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            format!(
                "Too many requests, please try again later: this user already holds {share} connections (watches included), its share of the server"
            ),
        );
        e.retry_after = Some(1);
        e
    }

    /// 504 for a request that did not finish within the request timeout.
    pub fn timeout() -> Self {
        Self::new(
            504,
            "Timeout",
            "the request did not complete within the allowed timeout",
        )
    }

    /// 504 for a `resourceVersion` the store has not reached, as kube-apiserver's watch cache
    /// answers after its wait: clients recognise it by the cause and retry.
    pub fn too_large_resource_version(want: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {want}, current: {current}"),
        );
        e.causes = vec![Cause {
            field: String::new(),
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
        }];
        e.retry_after = Some(1);
        e
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.details.is_some() || !self.causes.is_empty() || self.retry_after.is_some() {
            let mut d = serde_json::Map::new();
            if let Some(details) = &self.details {
                let (name, group, kind) = details.as_ref();
                d.insert("name".into(), json!(name));
                if !group.is_empty() {
                    d.insert("group".into(), json!(group));
                }
                d.insert("kind".into(), json!(kind));
            }
            if !self.causes.is_empty() {
                d.insert(
                    "causes".into(),
                    Value::Array(
                        self.causes
                            .iter()
                            .map(|c| {
                                let mut v = json!({"reason": c.reason, "message": c.message});
                                // Omitted when empty, as metav1.StatusCause's omitempty.
                                if !c.field.is_empty() {
                                    v["field"] = json!(c.field);
                                }
                                v
                            })
                            .collect(),
                    ),
                );
            }
            if let Some(s) = self.retry_after {
                d.insert("retryAfterSeconds".into(), json!(s));
            }
            status["details"] = Value::Object(d);
        }
        status
    }
}

impl Target<'_> {
    fn kind_plural(&self) -> String {
        // kube-apiserver puts the plural resource name (without group) in details.kind for
        // NotFound/AlreadyExists/Conflict.
        self.resource
            .split('.')
            .next()
            .unwrap_or(self.resource)
            .to_string()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::Closed => {
                return ApiError::new(503, "ServiceUnavailable", "the server is shutting down");
            }
            // The client's input, not a server failure: nothing was written.
            StoreError::TooLarge { .. } => {
                return ApiError::new(413, "RequestEntityTooLarge", e.to_string());
            }
            StoreError::TooDeep { .. } => return ApiError::new(422, "Invalid", e.to_string()),
            // Temporary: the recovery task accepts writes again once the disk can take them.
            StoreError::Unwritable(_) => {
                return ApiError::new(503, "ServiceUnavailable", e.to_string());
            }
            _ => {}
        }
        tracing::error!(error = %e, "store failure");
        ApiError::internal(format!("storage error: {e}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.to_status()).expect("status serializes");
        let mut resp = (
            StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body,
        )
            .into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}
