//! How objects are rendered in responses: JSON as stored or converted to the version asked
//! for, tables from printer columns, and partial metadata.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use ferrometal_apimachinery::table::{self, IncludeObject};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::registry::Resource;
use crate::request::Query;
use crate::store::Stored;

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

pub fn render_for(headers: &HeaderMap, q: &Query) -> Render {
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

pub fn render_one(res: &Resource, obj: &Stored, render: Render) -> Response {
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
