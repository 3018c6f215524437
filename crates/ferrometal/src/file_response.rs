//! Files sent over HTTP with byte ranges (BMCs fetch virtual media in pieces): the deploy
//! agent's media server and the directory a supervised Ironic publishes into.

use std::path::{Component, Path, PathBuf};

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// `bytes=A-B`, `bytes=A-` or `bytes=-N` of a file of `len` bytes, as (start, end inclusive).
pub fn range(value: &str, len: u64) -> Option<(u64, u64)> {
    let spec = value.strip_prefix("bytes=")?;
    if spec.contains(',') || len == 0 {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => (len.saturating_sub(n.parse().ok()?), len - 1),
        (a, "") => (a.parse().ok()?, len - 1),
        (a, b) => (a.parse().ok()?, b.parse::<u64>().ok()?.min(len - 1)),
    };
    (start <= end && start < len).then_some((start, end))
}

/// The file at `path`, whole or the range asked for.
pub async fn send_file(path: &Path, range_header: Option<&str>) -> std::io::Result<Response> {
    let mut file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    let (status, start, end) = match range_header.map(|h| range(h, len)) {
        None => (StatusCode::OK, 0, len.saturating_sub(1)),
        Some(Some((s, e))) => (StatusCode::PARTIAL_CONTENT, s, e),
        Some(None) => {
            return Ok((
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{len}"))],
            )
                .into_response());
        }
    };
    file.seek(std::io::SeekFrom::Start(start)).await?;
    let count = if len == 0 { 0 } else { end - start + 1 };
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file.take(count)));
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, count)
        .header(header::ACCEPT_RANGES, "bytes");
    if status == StatusCode::PARTIAL_CONTENT {
        response = response.header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{len}"));
    }
    Ok(response.body(body).expect("valid response"))
}

/// `relative` under `root`, if it is a plain relative path (no `..`, no root, no prefix).
pub fn under(root: &Path, relative: &str) -> Option<PathBuf> {
    let rel = Path::new(relative);
    if relative.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(root.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges_are_read_as_http_says() {
        assert_eq!(range("bytes=0-99", 1000), Some((0, 99)));
        assert_eq!(range("bytes=900-", 1000), Some((900, 999)));
        assert_eq!(range("bytes=-100", 1000), Some((900, 999)));
        assert_eq!(range("bytes=990-2000", 1000), Some((990, 999)));
        assert_eq!(range("bytes=1000-", 1000), None);
        assert_eq!(range("bytes=5-1", 1000), None);
        assert_eq!(range("bytes=0-1,5-6", 1000), None);
        assert_eq!(range("items=0-1", 1000), None);
    }

    #[test]
    fn only_plain_relative_paths_stay_under_the_root() {
        let root = Path::new("/srv/http");
        assert_eq!(
            under(root, "redfish/boot-1.iso"),
            Some(PathBuf::from("/srv/http/redfish/boot-1.iso"))
        );
        assert_eq!(under(root, "../etc/passwd"), None);
        assert_eq!(under(root, "redfish/../../x"), None);
        assert_eq!(under(root, "/etc/passwd"), None);
        assert_eq!(under(root, ""), None);
    }
}
