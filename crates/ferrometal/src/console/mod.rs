//! The web console: a page, its script and its style sheet (embedded in the binary, nothing
//! fetched from elsewhere), a sign-in that keeps the person's credentials on the server, and
//! a pass-through to the Kubernetes API as that person (`/k8s/...`). The console holds no
//! identity of its own: what a person sees and may do is what RBAC gives their credentials,
//! and the API server's audit log names them.

pub mod session;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use session::{COOKIE, Info, LIFETIME, Sessions, SignIn};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// Largest request body the console passes on (an object written from a form).
const MAX_BODY: usize = 1 << 20;

pub struct ConsoleConfig {
    pub listen: SocketAddr,
    /// Where the API is and how to trust it; its credentials are not used.
    pub api: kube::Config,
    /// Serve HTTPS with a certificate kept here (required off loopback).
    pub tls_dir: Option<PathBuf>,
}

#[derive(Clone)]
struct App {
    sessions: Sessions,
    api: Arc<kube::Config>,
    secure: bool,
}

/// Binds the console's address and serves it in the background; returns its URL.
pub async fn start(config: ConsoleConfig) -> anyhow::Result<String> {
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("console: listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let mut api = config.api;
    api.auth_info = kube::config::AuthInfo::default();
    let tls = match &config.tls_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let files = ferrometal_apiserver::tls::ensure(dir, &[addr.ip().to_string()])?;
            Some(ferrometal_apiserver::tls::server_config(&files)?)
        }
        None if !addr.ip().is_loopback() => {
            anyhow::bail!("console: {addr} is not a loopback address: the console needs TLS there")
        }
        None => None,
    };
    let app = router(App {
        sessions: Sessions::default(),
        api: Arc::new(api),
        secure: tls.is_some(),
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    match tls {
        None => {
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
        }
        Some(tls) => crate::tls_serve::spawn(listener, tls, app),
    }
    Ok(format!("{scheme}://{addr}/"))
}

fn router(app: App) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route("/session", get(session_info).post(sign_in).delete(sign_out))
        .route("/k8s/{*path}", any(proxy))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(protect))
        .with_state(app)
}

fn asset(text: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], text).into_response()
}

/// On every response: nothing but the console's own script and style runs or loads, no page
/// may frame it, and nothing it returns is cached or sent on as a referrer.
async fn protect(mut r: Response) -> Response {
    let h = r.headers_mut();
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        h,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::REFERRER_POLICY, "no-referrer");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    set(h, header::CACHE_CONTROL, "no-store");
    r
}

fn problem(code: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code.as_u16(), "message": message.into()});
    (code, axum::Json(body)).into_response()
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// A request a page of another site made the browser send: refused before it acts.
fn cross_site(headers: &HeaderMap) -> bool {
    let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    if header("sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none") {
        return true;
    }
    match (header("origin"), header("host")) {
        (None, _) => false,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_none_or(|(_, authority)| authority != host),
        (Some(_), None) => true,
    }
}

/// The session a request belongs to, and whether it may write (the CSRF token matches).
fn session_of(app: &App, headers: &HeaderMap) -> Option<(String, kube::Client, Info)> {
    let id = cookie(headers)?;
    let (client, info) = app.sessions.touch(&id)?;
    Some((id, client, info))
}

fn csrf_ok(headers: &HeaderMap, info: &Info) -> bool {
    headers
        .get("x-console-csrf")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == info.csrf)
        && !cross_site(headers)
}

async fn session_info(State(app): State<App>, headers: HeaderMap) -> Response {
    match session_of(&app, &headers) {
        Some((_, _, info)) => axum::Json(info).into_response(),
        None => problem(StatusCode::UNAUTHORIZED, "not signed in"),
    }
}

async fn sign_in(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    if cross_site(&headers) {
        return problem(StatusCode::FORBIDDEN, "a sign-in from another site");
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return problem(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "sign in with a JSON body",
        );
    }
    let form: SignIn = match serde_json::from_slice(&body) {
        Ok(f) => f,
        Err(e) => return problem(StatusCode::BAD_REQUEST, format!("sign-in: {e}")),
    };
    let (auth, namespace) = match session::credentials(&form) {
        Ok(c) => c,
        Err(e) => return problem(StatusCode::BAD_REQUEST, e),
    };
    let mut config = (*app.api).clone();
    config.auth_info = auth;
    let client = match kube::Client::try_from(config) {
        Ok(c) => c,
        Err(e) => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!("the credentials cannot be used: {e}"),
            );
        }
    };
    // Who the API server says this is: the credentials are checked there, not here.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let request = http_request(
        Method::POST,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some("application/json"),
        serde_json::to_vec(&review).unwrap_or_default(),
    );
    let who: Value = match request {
        Ok(r) => match client.request::<Value>(r).await {
            Ok(v) => v,
            Err(kube::Error::Api(e)) if e.code == 401 => {
                return problem(
                    StatusCode::UNAUTHORIZED,
                    "the API server did not accept these credentials",
                );
            }
            Err(e) => {
                return problem(
                    StatusCode::BAD_GATEWAY,
                    format!("the API server could not be asked who this is: {e}"),
                );
            }
        },
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let user = &who["status"]["userInfo"];
    let info = Info {
        user: user["username"].as_str().unwrap_or_default().to_string(),
        groups: user["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(str::to_string))
            .collect(),
        namespace,
        csrf: session::random_hex(),
        expires_in: LIFETIME.as_secs(),
    };
    tracing::info!(user = %info.user, "console: signed in");
    let id = app.sessions.insert(client, info.clone());
    let secure = if app.secure { "; Secure" } else { "" };
    let cookie = format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        LIFETIME.as_secs()
    );
    let mut r = axum::Json(info).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

async fn sign_out(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some((id, _, info)) = session_of(&app, &headers) else {
        return problem(StatusCode::UNAUTHORIZED, "not signed in");
    };
    if !csrf_ok(&headers, &info) {
        return problem(StatusCode::FORBIDDEN, "missing or wrong X-Console-CSRF");
    }
    app.sessions.remove(&id);
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "ferrometal_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    r
}

fn http_request(
    method: Method,
    path_and_query: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> Result<axum::http::Request<Vec<u8>>, String> {
    let mut b = axum::http::Request::builder()
        .method(method)
        .uri(path_and_query)
        .header(header::ACCEPT, "application/json");
    if let Some(t) = content_type {
        b = b.header(header::CONTENT_TYPE, t);
    }
    b.body(body).map_err(|e| e.to_string())
}

/// The API as the signed-in person: the same paths as kube-apiserver's under `/k8s/`.
async fn proxy(
    State(app): State<App>,
    method: Method,
    UrlPath(path): UrlPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some((_, client, info)) = session_of(&app, &headers) else {
        return problem(
            StatusCode::UNAUTHORIZED,
            "not signed in (or the session ended)",
        );
    };
    let writes = match method {
        Method::GET => false,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE => true,
        _ => return problem(StatusCode::METHOD_NOT_ALLOWED, "not through the console"),
    };
    if writes && !csrf_ok(&headers, &info) {
        return problem(StatusCode::FORBIDDEN, "missing or wrong X-Console-CSRF");
    }
    let api_path =
        path == "api" || path == "apis" || path.starts_with("api/") || path.starts_with("apis/");
    if !api_path
        || path
            .split('/')
            .any(|s| s == ".." || s == "." || s.contains('%'))
    {
        return problem(
            StatusCode::NOT_FOUND,
            "only the Kubernetes API is reached here",
        );
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|t| {
            [
                "application/json",
                "application/merge-patch+json",
                "application/json-patch+json",
                "application/strategic-merge-patch+json",
            ]
            .iter()
            .any(|ok| t.starts_with(ok))
        });
    if writes && method != Method::DELETE && content_type.is_none() {
        return problem(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a JSON body is expected",
        );
    }
    let target = match &query {
        Some(q) => format!("/{path}?{q}"),
        None => format!("/{path}"),
    };
    let request = match http_request(method, &target, content_type, body.to_vec()) {
        Ok(r) => r.map(kube::client::Body::from),
        Err(e) => return problem(StatusCode::BAD_REQUEST, e),
    };
    match client.send(request).await {
        Ok(r) => {
            let (parts, body) = r.into_parts();
            let mut out = Response::new(Body::new(body));
            *out.status_mut() = parts.status;
            if let Some(t) = parts.headers.get(header::CONTENT_TYPE) {
                out.headers_mut().insert(header::CONTENT_TYPE, t.clone());
            }
            out
        }
        Err(e) => problem(StatusCode::BAD_GATEWAY, format!("the API server: {e}")),
    }
}

/// `ferrometal console`: the console alone, in front of any cluster's API.
#[derive(clap::Args)]
pub struct Args {
    /// Where the API is and which CA to trust (its server and certificate authority; the
    /// kubeconfig's credentials are not used: people sign in with their own).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Address to serve the console on (off loopback, HTTPS with `--tls-dir`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Directory for the console's TLS certificate (generated at first start).
    #[arg(long)]
    tls_dir: Option<PathBuf>,
}

/// The API's address and trust from a kubeconfig, without its credentials.
pub async fn api_config(kubeconfig: &std::path::Path) -> anyhow::Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .with_context(|| format!("{}: no usable cluster", kubeconfig.display()))?;
    config.auth_info = kube::config::AuthInfo::default();
    Ok(config)
}

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let api = api_config(&args.kubeconfig).await?;
    let url = start(ConsoleConfig {
        listen: args.listen,
        api,
        tls_dir: args.tls_dir,
    })
    .await?;
    println!("console: {url}");
    tokio::signal::ctrl_c().await?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn requests_from_another_site_are_told_apart() {
        assert!(!cross_site(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(!cross_site(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example")
        ])));
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(cross_site(&headers(&[("origin", "null")])));
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; ferrometal_console=abc; b=2")]);
        assert_eq!(cookie(&h).as_deref(), Some("abc"));
        assert_eq!(cookie(&headers(&[("cookie", "a=1")])), None);
    }
}
