//! Response builders shared by the Redfish and control handlers, and the bounded reading of a
//! request's JSON body.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::Serialize;
use serde_json::Value;

pub type Resp = Response<Full<Bytes>>;

const JSON: HeaderValue = HeaderValue::from_static("application/json; charset=utf-8");
const ODATA_VERSION: HeaderValue = HeaderValue::from_static("4.0");

/// A JSON response with the headers Redfish services send.
pub fn json_bytes(status: StatusCode, body: impl Into<Bytes>) -> Resp {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, JSON);
    headers.insert("odata-version", ODATA_VERSION);
    resp
}

pub fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Resp {
    match serde_json::to_vec(value) {
        Ok(body) => json_bytes(status, body),
        Err(err) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Base.1.8.InternalError",
            &format!("serialising the response failed: {err}"),
        ),
    }
}

pub fn empty(status: StatusCode) -> Resp {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    resp.headers_mut().insert("odata-version", ODATA_VERSION);
    resp
}

/// A Redfish error body: `{"error":{"code","message","@Message.ExtendedInfo"}}`.
pub fn error(status: StatusCode, code: &str, message: &str) -> Resp {
    let body = serde_json::json!({
        "error": {
            "code": code,
            "message": message,
            "@Message.ExtendedInfo": [{
                "@odata.type": "#Message.v1_1_1.Message",
                "MessageId": code,
                "Message": message,
                "Severity": if status.is_server_error() { "Critical" } else { "Warning" },
                "Resolution": "None.",
            }],
        }
    });
    json(status, &body)
}

pub fn not_found(path: &str) -> Resp {
    error(
        StatusCode::NOT_FOUND,
        "Base.1.8.ResourceMissingAtURI",
        &format!("The resource at the URI {path} was not found."),
    )
}

pub fn method_not_allowed(allow: &'static str) -> Resp {
    let mut resp = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "Base.1.8.OperationNotAllowed",
        "The HTTP method is not allowed on this resource.",
    );
    resp.headers_mut()
        .insert(http::header::ALLOW, HeaderValue::from_static(allow));
    resp
}

pub fn unauthorized() -> Resp {
    let mut resp = error(
        StatusCode::UNAUTHORIZED,
        "Base.1.8.InsufficientPrivilege",
        "Authentication is required: use Basic auth or an X-Auth-Token session.",
    );
    resp.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"ferrometal-emulator\""),
    );
    resp
}

pub fn bad_request(code: &str, message: &str) -> Resp {
    error(StatusCode::BAD_REQUEST, code, message)
}

/// Request bodies are bounded: no Redfish request this service takes is near this.
const MAX_BODY: usize = 64 * 1024;

/// The request's JSON body (an empty body reads as `{}`), or the 400 to answer.
pub async fn read_json(req: Request<Incoming>) -> Result<Value, Resp> {
    let body = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|err| {
            bad_request(
                "Base.1.8.MalformedJSON",
                &format!("The request body could not be read: {err}"),
            )
        })?
        .to_bytes();
    if body.iter().all(u8::is_ascii_whitespace) {
        // Several actions (EjectMedia) are commonly posted with no body at all.
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(&body).map_err(|err| {
        bad_request(
            "Base.1.8.MalformedJSON",
            &format!("The request body is not valid JSON: {err}"),
        )
    })
}
