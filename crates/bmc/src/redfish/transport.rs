//! The HTTP side of the Redfish client: the shared reqwest clients, requests confined to the
//! BMC's origin with basic auth or a session token, bounded answer bodies, failures mapped to
//! typed errors, and the Redfish session (logged in once, again after a 401, out at the end).

use std::sync::OnceLock;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::parse::{excerpt, redfish_message};
use crate::{AuthMode, BmcAddress, BmcError, BmcOptions, Credentials, Protocol};

pub(super) const SERVICE_ROOT: &str = "/redfish/v1";
/// Largest answer body read from a BMC; a `$expand`ed system of a big server is well under 1 MiB.
const MAX_BODY: usize = 8 << 20;

/// Idle connections kept per BMC endpoint. A server's own BMC keeps one or two (the per-BMC
/// gate bounds its calls); this bounds what an endpoint of many systems keeps.
const IDLE_CONNECTIONS_PER_ENDPOINT: usize = 32;

fn shared_client(verify: bool) -> Result<reqwest::Client, BmcError> {
    static VERIFYING: OnceLock<reqwest::Client> = OnceLock::new();
    static NON_VERIFYING: OnceLock<reqwest::Client> = OnceLock::new();
    let cell = if verify { &VERIFYING } else { &NON_VERIFYING };
    if let Some(client) = cell.get() {
        return Ok(client.clone());
    }
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(!verify)
        // Per endpoint, and an endpoint may serve many systems (a chassis manager, an
        // aggregator, sushy-tools in front of VMs), each with its own calls in flight: with
        // fewer idle connections kept than calls, every call past them connects anew.
        .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_ENDPOINT)
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        // A redirect could send the next request (and its credentials) to another host:
        // never followed, reported instead.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("ferrometal/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| BmcError::Unreachable {
            bmc: "-".into(),
            reason: format!("cannot build the HTTP client: {}", e.without_url()),
        })?;
    Ok(cell.get_or_init(|| client).clone())
}

#[derive(Debug, Clone)]
struct Session {
    token: String,
    location: Option<String>,
}

pub(super) struct Answer {
    status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Value,
}

/// Requests to one BMC, with its credentials and, in session mode, its session.
pub(super) struct Transport {
    http: reqwest::Client,
    /// The BMC's origin (scheme, host, port): every request goes there and nowhere else.
    base: reqwest::Url,
    pub(super) endpoint: String,
    credentials: Credentials,
    options: BmcOptions,
    session: tokio::sync::Mutex<Option<Session>>,
}

impl Transport {
    pub(super) fn new(
        address: &BmcAddress,
        credentials: Credentials,
        options: BmcOptions,
    ) -> Result<Transport, BmcError> {
        let http = shared_client(!options.disable_certificate_verification)?;
        let base = reqwest::Url::parse(&address.base_url()).map_err(|e| BmcError::Unreachable {
            bmc: address.authority(),
            reason: format!("the address does not make a URL: {e}"),
        })?;
        Ok(Transport {
            http,
            base,
            endpoint: address.authority(),
            credentials,
            options,
            session: tokio::sync::Mutex::new(None),
        })
    }

    /// Resolves a path, link, action target or Location the BMC gave against its own origin.
    /// One that names another scheme, host or port is refused: a hostile or misconfigured BMC
    /// must not be able to send our requests, and the credentials on them, anywhere else.
    fn url(&self, method: &Method, path: &str) -> Result<reqwest::Url, BmcError> {
        let refused = |reason: String| BmcError::Protocol {
            bmc: self.endpoint.clone(),
            operation: Self::operation(method, path),
            reason,
        };
        let url = self
            .base
            .join(path)
            .map_err(|e| refused(format!("the link is not a URL: {e}")))?;
        if url.origin() != self.base.origin() {
            return Err(refused(format!(
                "the link points at {}, outside the BMC's origin {}; refused",
                excerpt(&url.origin().ascii_serialization()),
                self.base.origin().ascii_serialization()
            )));
        }
        // reqwest would send a link's user:password in place of ours.
        let mut url = url;
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Ok(url)
    }

    fn operation(method: &Method, path: &str) -> String {
        format!("{method} {}", excerpt(path))
    }

    /// Sends one request with authentication, mapping every failure to a typed error.
    pub(super) async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, BmcError> {
        let mut retried_login = false;
        loop {
            let token = match self.options.auth {
                AuthMode::Session if path != SERVICE_ROOT => Some(self.session_token().await?),
                _ => None,
            };
            let answer = self
                .send_once(&method, path, body, if_match, token.as_deref())
                .await?;
            if answer.status == StatusCode::UNAUTHORIZED && token.is_some() && !retried_login {
                // The session expired or the BMC was reset: log in again once.
                *self.session.lock().await = None;
                retried_login = true;
                continue;
            }
            return self.check(answer, &method, path);
        }
    }

    async fn send_once(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        token: Option<&str>,
    ) -> Result<Answer, BmcError> {
        if let Some(observer) = &self.options.observer {
            observer.on_request(Protocol::Redfish, method_name(method));
        }
        let url = self.url(method, path)?;
        let mut req = self
            .http
            .request(method.clone(), url)
            .timeout(self.options.timeout)
            .header("Accept", "application/json");
        if path != SERVICE_ROOT || token.is_some() {
            req = match token {
                Some(t) => req.header("X-Auth-Token", t),
                None => req.basic_auth(
                    &self.credentials.username,
                    Some(self.credentials.password()),
                ),
            };
        }
        if let Some(etag) = if_match {
            req = req.header("If-Match", etag);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let response = req
            .send()
            .await
            .map_err(|e| self.transport_error(e, method, path))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = self.read_body(response, method, path).await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                // Error pages are often HTML; keep a short excerpt as a string.
                Err(_) if !status.is_success() => {
                    Value::String(String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into())
                }
                Err(e) => {
                    return Err(BmcError::Protocol {
                        bmc: self.endpoint.clone(),
                        operation: Self::operation(method, path),
                        reason: format!("body is not JSON: {e}"),
                    });
                }
            }
        };
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// The answer's body, refused past [`MAX_BODY`] before more than that is read.
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        method: &Method,
        path: &str,
    ) -> Result<Vec<u8>, BmcError> {
        let too_large = |size: String| BmcError::Protocol {
            bmc: self.endpoint.clone(),
            operation: Self::operation(method, path),
            reason: format!(
                "the answer body ({size}) is over the limit of {} MiB",
                MAX_BODY >> 20
            ),
        };
        if let Some(length) = response.content_length()
            && length > MAX_BODY as u64
        {
            return Err(too_large(format!("{length} bytes")));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(e, method, path))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(too_large("unbounded".into()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn check(&self, answer: Answer, method: &Method, path: &str) -> Result<Answer, BmcError> {
        if answer.status.is_success() {
            return Ok(answer);
        }
        if answer.status.is_redirection() {
            let location = answer
                .headers
                .get("Location")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("(no Location)");
            return Err(BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: Self::operation(method, path),
                reason: format!(
                    "it answered HTTP {} redirecting to {}; redirects are not followed (give the BMC's final address)",
                    answer.status.as_u16(),
                    excerpt(location)
                ),
            });
        }
        if answer.status == StatusCode::UNAUTHORIZED {
            return Err(BmcError::Unauthorized {
                bmc: self.endpoint.clone(),
            });
        }
        Err(BmcError::Http {
            bmc: self.endpoint.clone(),
            status: answer.status.as_u16(),
            operation: Self::operation(method, path),
            message: self.scrub(&redfish_message(&answer.body)),
        })
    }

    /// Belt and braces: a BMC could echo the password back in an error body.
    pub(super) fn scrub(&self, text: &str) -> String {
        let password = self.credentials.password();
        if password.is_empty() {
            text.to_string()
        } else {
            text.replace(password, "<redacted>")
        }
    }

    fn transport_error(&self, e: reqwest::Error, method: &Method, path: &str) -> BmcError {
        let operation = Self::operation(method, path);
        if e.is_timeout() {
            BmcError::Timeout {
                bmc: self.endpoint.clone(),
                operation,
                timeout: self.options.timeout,
            }
        } else if e.is_connect() {
            let chain = self.scrub(&error_chain(&e));
            // rustls reads a plain-HTTP answer to its hello as a TLS record of a type that
            // does not exist ("received corrupt message of type InvalidContentType").
            let reason = if chain.contains("InvalidContentType") {
                crate::error::PLAIN_HTTP_TO_HTTPS.to_string()
            } else if chain.contains("certificate") {
                format!(
                    "its TLS certificate is not accepted ({chain}); give a certificate the system trusts or set disableCertificateVerification: true"
                )
            } else {
                chain
            };
            BmcError::Unreachable {
                bmc: self.endpoint.clone(),
                reason: excerpt(&reason),
            }
        } else {
            BmcError::Disconnected {
                bmc: self.endpoint.clone(),
                operation,
            }
        }
    }

    async fn session_token(&self) -> Result<String, BmcError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.token.clone());
        }
        let path = "/redfish/v1/SessionService/Sessions";
        let body =
            json!({"UserName": self.credentials.username, "Password": self.credentials.password()});
        let answer = self
            .send_once(&Method::POST, path, Some(&body), None, None)
            .await?;
        let answer = self.check(answer, &Method::POST, path)?;
        let token = answer
            .headers
            .get("X-Auth-Token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: format!("POST {path}"),
                reason: "no X-Auth-Token in the session answer".into(),
            })?
            .to_string();
        let location = answer
            .headers
            .get("Location")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .or_else(|| {
                answer
                    .body
                    .get("@odata.id")
                    .and_then(Value::as_str)
                    .map(String::from)
            });
        *guard = Some(Session {
            token: token.clone(),
            location,
        });
        Ok(token)
    }

    pub(super) async fn get(&self, path: &str) -> Result<Value, BmcError> {
        Ok(self.request(Method::GET, path, None, None).await?.body)
    }
    /// Logs the session out, when there is one.
    pub(super) async fn logout(&self) -> Result<(), BmcError> {
        let session = self.session.lock().await.take();
        if let Some(Session {
            token,
            location: Some(location),
        }) = session
        {
            let answer = self
                .send_once(&Method::DELETE, &location, None, None, Some(&token))
                .await?;
            self.check(answer, &Method::DELETE, &location)?;
        }
        Ok(())
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        _ => "OTHER",
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    // reqwest's own Display includes the URL; the sources carry the cause.
    let mut parts = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    if parts.is_empty() {
        "connection failed".into()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_confined_to_the_bmc_origin() {
        let address = BmcAddress::parse("redfish+https://10.0.0.1/redfish/v1/Systems/1").unwrap();
        let bmc =
            Transport::new(&address, Credentials::new("u", "p"), BmcOptions::default()).unwrap();
        let url = |p: &str| bmc.url(&Method::GET, p).map(|u| u.to_string());
        for (link, resolved) in [
            (
                "/redfish/v1/Systems/1",
                "https://10.0.0.1/redfish/v1/Systems/1",
            ),
            (
                "https://10.0.0.1:443/redfish/v1",
                "https://10.0.0.1/redfish/v1",
            ),
            (
                "https://10.0.0.1/x?$expand=.",
                "https://10.0.0.1/x?$expand=.",
            ),
            ("redfish/v1/Systems", "https://10.0.0.1/redfish/v1/Systems"),
            // Credentials in a link are never sent in place of ours.
            ("https://evil:pw@10.0.0.1/x", "https://10.0.0.1/x"),
        ] {
            assert_eq!(url(link).unwrap(), resolved, "{link}");
        }
        for link in [
            "http://10.0.0.1/redfish/v1",
            "https://10.0.0.1:8443/redfish/v1",
            "https://10.0.0.2/redfish/v1",
            "//10.0.0.2/redfish/v1",
            "https://10.0.0.1@10.0.0.2/x",
            "file:///etc/passwd",
        ] {
            let err = url(link).unwrap_err().to_string();
            assert!(
                err.contains("outside the BMC's origin https://10.0.0.1"),
                "{link}: {err}"
            );
        }
        let long = format!("/{}", "a".repeat(5000));
        let err = bmc
            .url(&Method::GET, &format!("https://x{long}"))
            .unwrap_err();
        assert!(err.to_string().len() < 1000, "{err}");
    }
}
