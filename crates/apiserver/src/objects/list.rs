//! List and delete-collection: the objects of a resource that pass the selectors, a page at a
//! time (`limit`, `continue`), rendered as the client asked.

use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use bytes::{BufMut, BytesMut};
use ferrometal_apimachinery::selector::{FieldSelector, LabelSelector};
use http::StatusCode;
use serde_json::{Value, json};

use super::DeleteOpts;
use crate::registry::Resource;
use crate::render::{
    Render, json_response, make_table, partial_metadata, value_response, versioned, versioned_json,
};
use crate::request::{Query, selectors};
use crate::state::Core;
use crate::status::ApiError;
use crate::store::Stored;

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

pub fn list(
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

pub async fn delete_collection(
    core: &Core,
    res: &Arc<Resource>,
    ns: Option<&str>,
    q: &Query,
    d: &DeleteOpts,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(q)?;
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
        match core.delete(res, &ns, &name, d).await {
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
