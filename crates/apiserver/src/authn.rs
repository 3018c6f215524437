//! Bearer-token authentication. The token lives in `DATA_DIR/token`; in-process requests are
//! marked by an extension that only the in-process transport sets.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header;
use rand::Rng;

use crate::server::Core;
use crate::status::ApiError;

/// Set on requests that come through [`crate::ApiServer::client`]; never from the network.
#[derive(Debug, Clone, Copy)]
pub struct InProcess;

/// Reads the token, creating a random one (mode 0600) on first start.
pub fn load_or_create_token(path: &Path) -> std::io::Result<String> {
    if let Ok(t) = std::fs::read_to_string(path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(path, token.as_bytes())?;
    Ok(token)
}

/// Writes a file readable only by its owner.
pub fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Constant-time comparison so the token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub async fn authenticate(State(core): State<Arc<Core>>, req: Request, next: Next) -> Response {
    if req.extensions().get::<InProcess>().is_some() {
        return next.run(req).await;
    }
    let Some(token) = &core.token else {
        return next.run(req).await;
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(p) if same(p.as_bytes(), token.as_bytes()) => next.run(req).await,
        _ => ApiError::unauthorized().into_response(),
    }
}
