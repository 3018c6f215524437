//! Fetching an inserted image, as real BMCs do: a URL nothing serves is refused at InsertMedia.
//!
//! Only the answer and its first bytes are read (the emulator never boots anything), and a URL
//! that answered recently is not fetched again: a fleet inserting one ISO costs one request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::StatusCode;

/// How long a URL that answered is trusted without fetching it again.
const FRESH: Duration = Duration::from_secs(300);
/// Whole fetch, connection to first bytes; a BMC gives up on an image server too.
const TIMEOUT: Duration = Duration::from_secs(20);
/// URLs remembered at most; older entries are dropped when it is reached.
const MAX_ENTRIES: usize = 1024;

/// Why an image could not be fetched: the status and message the BMC answers InsertMedia with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

#[derive(Default)]
struct Entry {
    /// When the URL last answered 2xx.
    fetched: Option<Instant>,
}

pub struct MediaFetcher {
    client: reqwest::Client,
    /// One lock per URL: concurrent inserts of one URL wait for a single fetch.
    urls: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Entry>>>>,
}

impl MediaFetcher {
    pub fn new() -> MediaFetcher {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .expect("a client with rustls and a timeout builds");
        MediaFetcher {
            client,
            urls: Mutex::new(HashMap::new()),
        }
    }

    /// Fetches `url` unless it answered within [`FRESH`]; a failure is never remembered, so a
    /// fixed image server is seen at the next insert.
    pub async fn check(&self, url: &str) -> Result<(), Refusal> {
        let entry = {
            let mut urls = self.urls.lock().unwrap_or_else(|e| e.into_inner());
            if urls.len() >= MAX_ENTRIES && !urls.contains_key(url) {
                urls.clear();
            }
            urls.entry(url.to_owned()).or_default().clone()
        };
        let mut entry = entry.lock().await;
        if entry.fetched.is_some_and(|at| at.elapsed() < FRESH) {
            return Ok(());
        }
        self.fetch(url).await?;
        entry.fetched = Some(Instant::now());
        Ok(())
    }

    async fn fetch(&self, url: &str) -> Result<(), Refusal> {
        // Status codes as sushy-tools answers them: the image server's 4xx -> 400, its
        // 5xx -> 502, no answer at all -> 500.
        let refused = |status, why: String| Refusal {
            status,
            message: format!("Failed fetching image from URL {url}: {why}"),
        };
        let mut resp = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| refused(StatusCode::INTERNAL_SERVER_ERROR, describe(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            let code = if status.is_server_error() {
                StatusCode::BAD_GATEWAY
            } else {
                StatusCode::BAD_REQUEST
            };
            return Err(refused(
                code,
                format!(
                    "Cannot download virtual media: got error {} from the server",
                    status.as_u16()
                ),
            ));
        }
        // The first bytes prove the image is being served; the rest is not needed.
        resp.chunk()
            .await
            .map_err(|e| refused(StatusCode::INTERNAL_SERVER_ERROR, describe(&e)))?;
        Ok(())
    }
}

/// The error and its causes, e.g. "error sending request: connection refused".
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
