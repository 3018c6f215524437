//! A small client for Ironic's REST API: a fixed microversion on every request, optional HTTP
//! basic auth, bounded retries while a node is locked, and errors reduced to Ironic's own
//! `faultstring`. Request bodies are never logged: they carry BMC passwords.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// The API microversion every request asks for. Fixed so a newer Ironic cannot change what the
/// answers look like; 1.81 brings the node inventory endpoint used by inspection.
pub const API_VERSION: &str = "1.81";

/// Where Ironic listens and how to authenticate to it.
#[derive(Clone)]
pub struct IronicEndpoint {
    /// Base URL without `/v1`, e.g. `http://127.0.0.1:6385`.
    pub url: String,
    /// HTTP basic credentials when Ironic runs with `auth_strategy = http_basic`.
    pub basic_auth: Option<(String, String)>,
}

impl IronicEndpoint {
    pub fn new(url: impl Into<String>) -> IronicEndpoint {
        IronicEndpoint {
            url: url.into().trim_end_matches('/').to_string(),
            basic_auth: None,
        }
    }

    /// An Ironic that is already running (`--ironic-url`), with HTTP basic credentials from
    /// `FERROMETAL_IRONIC_USERNAME` / `FERROMETAL_IRONIC_PASSWORD` when both are set.
    pub fn existing(url: impl Into<String>) -> IronicEndpoint {
        let endpoint = IronicEndpoint::new(url);
        match (
            std::env::var("FERROMETAL_IRONIC_USERNAME"),
            std::env::var("FERROMETAL_IRONIC_PASSWORD"),
        ) {
            (Ok(user), Ok(password)) if !user.is_empty() => {
                endpoint.with_basic_auth(user, password)
            }
            _ => endpoint,
        }
    }

    pub fn with_basic_auth(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> IronicEndpoint {
        self.basic_auth = Some((user.into(), password.into()));
        self
    }
}

impl std::fmt::Debug for IronicEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IronicEndpoint")
            .field("url", &self.url)
            .field("basic_auth", &self.basic_auth.as_ref().map(|(u, _)| u))
            .finish()
    }
}

/// What went wrong with one request.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// 404: the node (or port) does not exist.
    NotFound,
    /// 409 because another action holds the node's lock, still so after the retries.
    Locked(String),
    /// Ironic answered with an error status; `message` is its faultstring.
    Status { status: u16, message: String },
    /// Ironic could not be reached or did not answer in time.
    Transport(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::NotFound => write!(f, "not found"),
            ApiError::Locked(m) => write!(f, "node locked: {m}"),
            ApiError::Status { status, message } => write!(f, "HTTP {status}: {message}"),
            ApiError::Transport(m) => write!(f, "{m}"),
        }
    }
}

/// Retries of a request that met a locked node, and the first pause (doubled each time).
#[derive(Debug, Clone, Copy)]
pub struct LockRetry {
    pub attempts: u32,
    pub first_backoff: Duration,
}

impl Default for LockRetry {
    fn default() -> Self {
        LockRetry {
            attempts: 4,
            first_backoff: Duration::from_millis(100),
        }
    }
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    endpoint: IronicEndpoint,
    retry: LockRetry,
}

impl Client {
    pub fn new(endpoint: IronicEndpoint, timeout: Duration, retry: LockRetry) -> Client {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .build()
            .expect("HTTP client");
        Client {
            http,
            endpoint,
            retry,
        }
    }

    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    /// One request with the lock retries; `Ok(None)` for an empty answer (202/204).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ApiError> {
        self.call_at(API_VERSION, method, path, body).await
    }

    /// [`call`](Self::call) at another API version, for the one request that needs a newer
    /// one (so an older Ironic still serves everything else).
    pub async fn call_at(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ApiError> {
        let mut backoff = self.retry.first_backoff;
        let mut attempt = 0;
        loop {
            match self.once(version, method.clone(), path, body).await {
                Err(ApiError::Locked(_)) if attempt < self.retry.attempts => {
                    tracing::debug!(%path, attempt, "ironic node locked; retrying");
                    attempt += 1;
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                other => return other,
            }
        }
    }

    async fn once(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ApiError> {
        let url = format!("{}{}", self.endpoint.url, path);
        let mut req = self
            .http
            .request(method.clone(), &url)
            .header("X-OpenStack-Ironic-API-Version", version)
            .header("Accept", "application/json");
        if let Some((user, password)) = &self.endpoint.basic_auth {
            req = req.basic_auth(user, Some(password));
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.map_err(|e| {
            ApiError::Transport(format!(
                "Ironic at {} unreachable: {}",
                self.endpoint.url,
                error_chain(&e)
            ))
        })?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| {
            ApiError::Transport(format!(
                "Ironic at {}: answer cut short: {}",
                self.endpoint.url,
                error_chain(&e)
            ))
        })?;
        if status.is_success() {
            if bytes.is_empty() {
                return Ok(None);
            }
            return serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                ApiError::Transport(format!(
                    "Ironic at {}: {method} {path}: not JSON: {e}",
                    self.endpoint.url
                ))
            });
        }
        let message = fault_string(&bytes);
        Err(match status {
            StatusCode::NOT_FOUND => ApiError::NotFound,
            StatusCode::CONFLICT if is_lock_message(&message) => ApiError::Locked(message),
            StatusCode::SERVICE_UNAVAILABLE if is_lock_message(&message) => {
                ApiError::Locked(message)
            }
            _ => ApiError::Status {
                status: status.as_u16(),
                message,
            },
        })
    }

    pub async fn get(&self, path: &str) -> Result<Value, ApiError> {
        self.call(Method::GET, path, None)
            .await
            .map(|v| v.unwrap_or(Value::Null))
    }

    /// Every item of a paginated collection (`key` is e.g. `nodes`), following `next` markers
    /// with a positive page size (Ironic rejects `limit=0`).
    pub async fn list(&self, path: &str, key: &str, page: usize) -> Result<Vec<Value>, ApiError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut url = format!("{path}{sep}limit={}", page.max(1));
            if let Some(m) = &marker {
                url.push_str("&marker=");
                url.push_str(m);
            }
            let answer = self.get(&url).await?;
            let batch = answer
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let full = batch.len() >= page.max(1);
            marker = batch
                .last()
                .and_then(|n| n.get("uuid"))
                .and_then(Value::as_str)
                .map(String::from);
            items.extend(batch);
            if !full || marker.is_none() || answer.get("next").is_none() {
                return Ok(items);
            }
        }
    }
}

fn is_lock_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("locked") || m.contains("reserved")
}

/// Ironic wraps errors as `{"error_message": "<JSON with faultstring>"}`; older paths send the
/// object itself. Anything else is shown cut short.
pub fn fault_string(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let inner = parsed.as_ref().and_then(|v| v.get("error_message"));
    let fault = match inner {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .ok()
            .and_then(|v| {
                v.get("faultstring")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .unwrap_or_else(|| s.clone()),
        Some(v) => v
            .get("faultstring")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| v.to_string()),
        None => parsed
            .as_ref()
            .and_then(|v| v.get("faultstring"))
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| text.to_string()),
    };
    let fault = fault.trim();
    if fault.chars().count() > 500 {
        let cut: String = fault.chars().take(500).collect();
        format!("{cut}…")
    } else {
        fault.to_string()
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faultstrings_are_unwrapped() {
        let body = br#"{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Limit must be positive\", \"debuginfo\": null}"}"#;
        assert_eq!(fault_string(body), "Limit must be positive");
        let body = br#"{"error_message": {"faultstring": "Node x is locked by host y"}}"#;
        assert_eq!(fault_string(body), "Node x is locked by host y");
        assert!(is_lock_message(&fault_string(body)));
        assert_eq!(fault_string(b"plain"), "plain");
        assert_eq!(fault_string(&[b'x'; 900]).chars().count(), 501);
    }

    /// A raw HTTP server answering the given responses in order, one per connection.
    fn serve(answers: Vec<(u16, &'static str)>) -> (u16, std::thread::JoinHandle<usize>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let mut served = 0;
            for (status, body) in answers {
                let (mut conn, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                conn.write_all(reply.as_bytes()).unwrap();
                served += 1;
            }
            served
        });
        (port, handle)
    }

    const LOCKED: &str = r#"{"error_message": "{\"faultstring\": \"Node n is locked by host h, please retry after the current operation is completed.\"}"}"#;

    #[tokio::test]
    async fn locked_nodes_are_retried_a_bounded_number_of_times() {
        let retry = LockRetry {
            attempts: 2,
            first_backoff: Duration::from_millis(1),
        };
        let (port, server) = serve(vec![(409, LOCKED), (409, LOCKED), (200, r#"{"ok": 1}"#)]);
        let c = Client::new(
            IronicEndpoint::new(format!("http://127.0.0.1:{port}")),
            Duration::from_secs(5),
            retry,
        );
        assert_eq!(c.get("/v1/nodes/n").await.unwrap()["ok"], 1);
        assert_eq!(server.join().unwrap(), 3);

        let (port, server) = serve(vec![(409, LOCKED), (409, LOCKED), (409, LOCKED)]);
        let c = Client::new(
            IronicEndpoint::new(format!("http://127.0.0.1:{port}")),
            Duration::from_secs(5),
            retry,
        );
        assert!(matches!(
            c.get("/v1/nodes/n").await,
            Err(ApiError::Locked(_))
        ));
        assert_eq!(server.join().unwrap(), 3);

        // Other conflicts are not retried.
        let (port, server) = serve(vec![(409, r#"{"faultstring": "MAC already exists"}"#)]);
        let c = Client::new(
            IronicEndpoint::new(format!("http://127.0.0.1:{port}")),
            Duration::from_secs(5),
            retry,
        );
        let err = c.get("/v1/ports").await.unwrap_err();
        assert_eq!(
            err,
            ApiError::Status {
                status: 409,
                message: "MAC already exists".into()
            }
        );
        assert_eq!(server.join().unwrap(), 1);
    }
}
