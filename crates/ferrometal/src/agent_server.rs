//! The deploy agent's two HTTP faces, for the agent service in the provisioner crate:
//!
//! - the agent API (HTTPS, certificate from ferrometal's CA): `GET /v1/instruction`,
//!   `POST /v1/report`, `GET /v1/config-drive`, each with the boot's bearer token. A request
//!   with a token that is not (or no longer) a session's gets 401 and a warning in the log
//!   naming the peer, never the token. Every request is audited in `AGENT_DIR/audit/audit.log`
//!   (the API server's format: who, what, code; the host for a valid token, the peer for
//!   a refused one; never a token or a body);
//! - the media server (HTTP, for BMCs, which rarely trust a private CA): `GET /NAME.iso` with
//!   byte ranges, for the unguessable names of running sessions only.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ferrometal_agent::protocol::{MAX_BODY_BYTES, Report};
use ferrometal_provisioner::agent::{AgentOptions, AgentService, Refused};
use tokio::net::TcpListener;

/// Where the agent service listens and what it tells hosts and BMCs.
pub struct AgentServerConfig {
    pub ramdisk: PathBuf,
    pub work_dir: PathBuf,
    pub tls_dir: PathBuf,
    pub listen: SocketAddr,
    pub url: Option<String>,
    pub media_listen: SocketAddr,
    pub media_url: Option<String>,
    /// PEM bundle the agent trusts for image downloads besides the system's roots.
    pub image_ca: Option<PathBuf>,
    pub lldp_wait: Duration,
    pub boot_timeout: Duration,
    pub silence_timeout: Duration,
}

/// The host part of a URL (`https://10.0.2.2:6385/x` -> `10.0.2.2`), for the certificate.
fn url_host(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    match parsed.host()? {
        url::Host::Ipv6(ip) => Some(ip.to_string()),
        host => Some(host.to_string()),
    }
}

/// Binds both listeners, starts serving, and returns the service for the provisioner.
pub async fn start(config: AgentServerConfig) -> anyhow::Result<Arc<AgentService>> {
    let ramdisk = if config.ramdisk.is_dir() {
        config.ramdisk.join("agent.iso")
    } else {
        config.ramdisk.clone()
    };
    anyhow::ensure!(
        ramdisk.is_file(),
        "--agent-ramdisk {}: no agent ISO there (build it with scripts/agent-ramdisk.sh)",
        config.ramdisk.display()
    );
    let api_listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("--agent-listen {}", config.listen))?;
    let media_listener = TcpListener::bind(config.media_listen)
        .await
        .with_context(|| format!("--agent-media-listen {}", config.media_listen))?;
    let api_addr = api_listener.local_addr()?;
    let media_addr = media_listener.local_addr()?;
    let api_url = config
        .url
        .clone()
        .unwrap_or_else(|| format!("https://{api_addr}"));
    let media_url = config
        .media_url
        .clone()
        .unwrap_or_else(|| format!("http://{media_addr}"));
    let host = url_host(&api_url).with_context(|| format!("--agent-url {api_url}: not a URL"))?;
    std::fs::create_dir_all(&config.tls_dir)
        .with_context(|| format!("creating {}", config.tls_dir.display()))?;
    let tls = ferrometal_apiserver::tls::ensure(&config.tls_dir, &[host])
        .context("the agent API's certificate")?;
    let ca_pem = std::fs::read_to_string(&tls.ca).context("reading the CA")?;
    let tls_config = ferrometal_apiserver::tls::server_config(&tls)?;
    let image_ca_pem = match &config.image_ca {
        Some(path) => {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("--agent-image-ca {}", path.display()))?;
            use tokio_rustls::rustls::pki_types::{CertificateDer, pem::PemObject};
            let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("--agent-image-ca {}", path.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "--agent-image-ca {}: no PEM certificate in it",
                path.display()
            );
            Some(pem)
        }
        None => None,
    };
    let service = AgentService::new(AgentOptions {
        ramdisk_iso: ramdisk,
        work_dir: config.work_dir.clone(),
        state_dir: config.tls_dir.join("sessions"),
        api_url: api_url.clone(),
        media_url: media_url.clone(),
        ca_pem,
        image_ca_pem,
        lldp_wait: config.lldp_wait,
        boot_timeout: config.boot_timeout,
        silence_timeout: config.silence_timeout,
    })
    .with_context(|| format!("preparing {}", config.work_dir.display()))?;
    tracing::info!(api = %api_url, media = %media_url, "deploy agent service");

    let audit_dir = config.tls_dir.join("audit");
    let audit = ferrometal_apiserver::audit::Audit::open(&audit_dir).with_context(|| {
        format!(
            "opening the agent API's audit log in {}",
            audit_dir.display()
        )
    })?;
    let api = Router::new()
        .route("/v1/instruction", get(instruction))
        .route("/v1/report", post(report))
        .route("/v1/config-drive", get(config_drive))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(AgentApi {
            service: service.clone(),
            audit: Arc::new(audit),
        });
    crate::tls_serve::spawn(api_listener, tls_config, api);

    let media = Router::new()
        .route("/{name}", get(media_file))
        .with_state(service.clone());
    tokio::spawn(async move {
        let _ = axum::serve(media_listener, media).await;
    });
    Ok(service)
}

fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
}

/// The agent API's handlers' state.
#[derive(Clone)]
struct AgentApi {
    service: Arc<AgentService>,
    audit: Arc<ferrometal_apiserver::audit::Audit>,
}

impl AgentApi {
    /// One audit line: the host the token belongs to (`agent:NAMESPACE~NAME`), or the peer
    /// when the token is nobody's.
    fn audit(&self, token: &str, peer: SocketAddr, verb: &str, resource: &str, code: StatusCode) {
        let host = self.service.host_of(token);
        let (namespace, name) = host
            .as_deref()
            .and_then(|k| k.split_once('~'))
            .map(|(n, h)| (n.to_string(), h.to_string()))
            .unwrap_or_default();
        self.audit.record(ferrometal_apiserver::audit::Entry {
            user: match &host {
                Some(key) => format!("agent:{key}"),
                None => format!("unauthenticated agent at {peer}"),
            },
            impersonated_by: None,
            verb: verb.to_string(),
            group: "agent.ferrometal.io".to_string(),
            resource: resource.to_string(),
            subresource: String::new(),
            namespace,
            name,
            path: format!("/v1/{resource}"),
            code: code.as_u16(),
        });
    }
}

fn refused(peer: SocketAddr, path: &str, why: Refused) -> Response {
    match why {
        Refused::Token => {
            tracing::warn!(%peer, path, "agent API: refused a request with an unknown or expired token");
            (StatusCode::UNAUTHORIZED, "unknown or expired agent token\n").into_response()
        }
        Refused::NoConfigDrive => (StatusCode::NOT_FOUND, format!("{why}\n")).into_response(),
    }
}

async fn instruction(
    State(api): State<AgentApi>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let token = bearer(&headers);
    let response = match api.service.instruction(token) {
        Ok(i) => axum::Json(i).into_response(),
        Err(e) => refused(peer, "/v1/instruction", e),
    };
    api.audit(token, peer, "get", "instruction", response.status());
    response
}

async fn report(
    State(api): State<AgentApi>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let token = bearer(&headers);
    let response = match serde_json::from_slice::<Report>(&body) {
        Ok(report) => match api.service.report(token, report) {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => refused(peer, "/v1/report", e),
        },
        Err(e) => (
            StatusCode::BAD_REQUEST,
            format!("the report is not understood: {e}\n"),
        )
            .into_response(),
    };
    api.audit(token, peer, "create", "report", response.status());
    response
}

async fn config_drive(
    State(api): State<AgentApi>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let token = bearer(&headers);
    let response = match api.service.config_drive(token) {
        Ok(bytes) => bytes.into_response(),
        Err(e) => refused(peer, "/v1/config-drive", e),
    };
    api.audit(token, peer, "get", "config-drive", response.status());
    response
}

async fn media_file(
    State(service): State<Arc<AgentService>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let Some(path) = service.media_path(&name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match crate::file_response::send_file(
        &path,
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_names_the_advertised_host() {
        assert_eq!(
            url_host("https://10.0.2.2:6385").as_deref(),
            Some("10.0.2.2")
        );
        assert_eq!(
            url_host("https://agent.example:443/x").as_deref(),
            Some("agent.example")
        );
        assert_eq!(
            url_host("https://[fd00::1]:6385").as_deref(),
            Some("fd00::1")
        );
        assert_eq!(url_host("nonsense"), None);
    }
}
