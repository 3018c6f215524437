//! The hostile BMCs: answers that try to send the client elsewhere or to exhaust it. Each is a
//! [`crate::Fault`] on one system, so a test can aim it at exactly one client.

use bytes::Bytes;
use http::header::LOCATION;
use http::{StatusCode, Uri};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::fault::Fault;
use crate::resp::{Resp, empty, error, json_bytes};

/// A 307 to the same path and query at `origin`.
pub fn redirect(origin: &str, uri: &Uri) -> Resp {
    let target = format!(
        "{}{}",
        origin.trim_end_matches('/'),
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut resp = empty(StatusCode::TEMPORARY_REDIRECT);
    if let Ok(value) = target.parse() {
        resp.headers_mut().insert(LOCATION, value);
    }
    resp
}

/// A 200 whose JSON body is `bytes` long.
pub fn huge_body(bytes: u64) -> Resp {
    let pad = usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .saturating_sub(10);
    let mut body = Vec::with_capacity(pad + 10);
    body.extend_from_slice(b"{\"pad\":\"");
    body.resize(body.len() + pad, b'x');
    body.extend_from_slice(b"\"}");
    json_bytes(StatusCode::OK, Bytes::from(body))
}

/// A 500 whose Redfish error message is `bytes` long.
pub fn long_error(bytes: u64) -> Resp {
    let message = "e".repeat(usize::try_from(bytes).unwrap_or(usize::MAX));
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Base.1.8.InternalError",
        &message,
    )
}

/// Rewrites a normal answer the way `fault` wants it; other faults leave it as it is.
pub async fn rewrite(resp: Resp, fault: &Fault) -> Resp {
    let (parts, body) = resp.into_parts();
    let Ok(collected) = body.collect().await;
    let bytes = collected.to_bytes();
    let bytes = match fault {
        Fault::ForeignLinks(origin) => {
            let text = String::from_utf8_lossy(&bytes);
            let origin = origin.trim_end_matches('/');
            Bytes::from(text.replace("\"/redfish/v1", &format!("\"{origin}/redfish/v1")))
        }
        Fault::ManyMembers(count) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(mut doc) => {
                multiply_members(&mut doc, usize::try_from(*count).unwrap_or(usize::MAX));
                Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
            }
            Err(_) => bytes,
        },
        _ => bytes,
    };
    let mut resp = Resp::from_parts(parts, http_body_util::Full::new(bytes));
    resp.headers_mut().remove(http::header::CONTENT_LENGTH);
    resp
}

/// Every `Members` and `Drives` list, at any depth, becomes `count` copies of its first entry.
fn multiply_members(doc: &mut Value, count: usize) {
    match doc {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::Array(list) if key == "Members" || key == "Drives" => {
                        if let Some(first) = list.first().cloned() {
                            *list = vec![first; count];
                        }
                    }
                    _ => multiply_members(value, count),
                }
            }
            if let Some(Value::Array(list)) = map.get("Members") {
                let n = list.len();
                map.insert("Members@odata.count".into(), n.into());
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| multiply_members(v, count)),
        _ => {}
    }
}
