//! What a request asks for, from its method and URL alone (kube-apiserver's RequestInfo): the
//! resource path for the handlers, and the verb and attributes the authorizer checks.

use std::collections::HashMap;

use ferrometal_apimachinery::selector::{FieldSelector, LabelSelector};
use http::Method;

use crate::status::ApiError;

/// A discovery or OpenAPI document.
pub enum Doc {
    Root,
    Version,
    Health,
    /// `/readyz`: not ready while the store refuses writes.
    Ready,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiV2,
    OpenApiV3,
    OpenApiV3Gv(String, String),
}

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

pub enum Route {
    Discovery(Doc),
    Resource(ResPath),
    NotFound,
}

pub fn parse_path(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        [""] => return Route::Discovery(Doc::Root),
        ["version"] => return Route::Discovery(Doc::Version),
        ["healthz" | "livez"] => return Route::Discovery(Doc::Health),
        ["readyz"] => return Route::Discovery(Doc::Ready),
        ["api"] => return Route::Discovery(Doc::Api),
        ["apis"] => return Route::Discovery(Doc::Apis),
        ["openapi", "v2"] => return Route::Discovery(Doc::OpenApiV2),
        ["openapi", "v3"] => return Route::Discovery(Doc::OpenApiV3),
        ["openapi", "v3", "api", v] => {
            return Route::Discovery(Doc::OpenApiV3Gv(String::new(), v.to_string()));
        }
        ["openapi", "v3", "apis", g, v] => {
            return Route::Discovery(Doc::OpenApiV3Gv(g.to_string(), v.to_string()));
        }
        ["api", v] => {
            return Route::Discovery(Doc::GroupVersion(String::new(), v.to_string()));
        }
        ["apis", g] => return Route::Discovery(Doc::Group(g.to_string())),
        ["apis", g, v] => {
            return Route::Discovery(Doc::GroupVersion(g.to_string(), v.to_string()));
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

pub fn parse_query(q: Option<&str>) -> Query {
    url::form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// The Kubernetes verb of a request: `get`, `list`, `watch`, `create`, `update`, `patch`,
/// `delete`, `deletecollection` for resources; the lower-cased method for other paths.
pub fn verb(method: &Method, p: Option<&ResPath>, q: &Query) -> String {
    let Some(p) = p else {
        return method.as_str().to_ascii_lowercase();
    };
    let watch = p.watch || q.get("watch").is_some_and(|v| v == "true" || v == "1");
    match (method.as_str(), p.name.is_some()) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (m, _) => return m.to_ascii_lowercase(),
    }
    .to_string()
}

/// The namespace a request is scoped to for authorization: a namespace's own name when the
/// resource is `namespaces`, as kube-apiserver does.
pub fn authz_namespace(p: &ResPath) -> &str {
    match (&p.namespace, p.group.as_str(), p.resource.as_str(), &p.name) {
        (Some(ns), _, _, _) => ns,
        (None, "", "namespaces", Some(name)) => name,
        _ => "",
    }
}

/// The `resourceVersion` a read asks for: `None` when absent, empty or "0" (any version will
/// do); a non-number is a 400.
pub fn resource_version(q: &Query) -> Result<Option<u64>, ApiError> {
    match q.get("resourceVersion").map(String::as_str) {
        None | Some("" | "0") => Ok(None),
        Some(rv) => rv
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}"))),
    }
}

/// Label and field selectors from the query; malformed ones are a 400.
pub fn selectors(q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
    Ok((labels, fields))
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
