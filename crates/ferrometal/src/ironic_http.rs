//! The HTTP server for what a supervised Ironic publishes (the ISOs it builds for virtual
//! media boots, config drives): BMCs download them from here, as from metal3's httpd.
//! Read-only, files only, nothing outside the directory.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::file_response::{send_file, under};

/// Binds `listen` now (so the URL is known before Ironic starts) and serves `root` there in
/// the background. Returns the bound address.
pub async fn start(root: PathBuf, listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("--ironic-http-listen {listen}"))?;
    let addr = listener.local_addr()?;
    let app = Router::new().route("/{*path}", get(file)).with_state(root);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

async fn file(
    State(root): State<PathBuf>,
    UrlPath(path): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let Some(file) = under(&root, &path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    // Files only (a directory would open and then fail mid-body); without blocking a worker.
    if !tokio::fs::metadata(&file).await.is_ok_and(|m| m.is_file()) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    match send_file(&file, range).await {
        Ok(r) => r,
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}
