//! Listener, connections and shared application state.
//!
//! The accept loop is our own (not `axum::serve`) so a fault can drop a
//! connection without answering, and so shutdown can drop hung requests.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::state::{MethodCells, RESET_TYPES, SystemCell};
use crate::{Counters, EmulatorConfig, inventory};

/// Returned by the service to make hyper drop the connection unanswered.
#[derive(Debug)]
pub struct ResetConnection;

impl std::fmt::Display for ResetConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by fault injection")
    }
}

impl std::error::Error for ResetConnection {}

#[derive(Default)]
pub struct Sessions {
    next_id: u64,
    by_token: HashMap<String, u64>,
    by_id: HashMap<u64, String>,
}

impl Sessions {
    pub fn create(&mut self) -> (u64, String) {
        self.next_id += 1;
        let id = self.next_id;
        let token = format!("{:032x}", rand::random::<u128>());
        self.by_token.insert(token.clone(), id);
        self.by_id.insert(id, token.clone());
        (id, token)
    }

    pub fn valid(&self, token: &str) -> bool {
        self.by_token.contains_key(token)
    }

    pub fn exists(&self, id: u64) -> bool {
        self.by_id.contains_key(&id)
    }

    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.by_id.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn remove(&mut self, id: u64) -> bool {
        match self.by_id.remove(&id) {
            Some(token) => {
                self.by_token.remove(&token);
                true
            }
            None => false,
        }
    }
}

pub struct App {
    pub systems: Vec<SystemCell>,
    pub power_delay: Duration,
    pub username: String,
    password: String,
    /// `base64(user:password)`, compared against the Basic credentials as is.
    basic_credentials: String,
    pub reset_types: Vec<&'static str>,
    /// `reset_types` as a JSON array, spliced into every system document.
    pub reset_types_json: String,
    pub by_method: MethodCells,
    pub sessions: Mutex<Sessions>,
    /// Documents that never change, rendered once.
    pub service_root: Bytes,
    pub systems_collection: Bytes,
    pub managers_collection: Bytes,
}

impl App {
    pub fn new(config: EmulatorConfig) -> Self {
        let basic_credentials = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", config.username, config.password));
        let reset_types: Vec<&'static str> = RESET_TYPES
            .iter()
            .copied()
            .filter(|t| !(config.omit_power_cycle && *t == "PowerCycle"))
            .collect();
        let reset_types_json =
            serde_json::to_string(&reset_types).expect("a list of strings serialises");
        Self {
            systems: (0..config.systems)
                .map(|_| SystemCell::new(config.initial_power))
                .collect(),
            power_delay: config.power_delay,
            basic_credentials,
            username: config.username,
            password: config.password,
            reset_types,
            reset_types_json,
            by_method: MethodCells::default(),
            sessions: Mutex::new(Sessions::default()),
            service_root: inventory::service_root().into(),
            systems_collection: inventory::systems_collection(config.systems).into(),
            managers_collection: inventory::managers_collection(config.systems).into(),
        }
    }

    pub fn check_password(&self, username: &str, password: &str) -> bool {
        username == self.username && password == self.password
    }

    /// Basic credentials or a live session token.
    pub fn authorized(&self, headers: &http::HeaderMap) -> bool {
        if let Some(value) = headers.get(http::header::AUTHORIZATION)
            && let Ok(value) = value.to_str()
            && let Some((scheme, creds)) = value.split_once(' ')
            && scheme.eq_ignore_ascii_case("basic")
            && creds.trim() == self.basic_credentials
        {
            return true;
        }
        if let Some(token) = headers.get("x-auth-token")
            && let Ok(token) = token.to_str()
        {
            return self.sessions().valid(token);
        }
        false
    }

    pub fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn counters(&self) -> Counters {
        let by_method = self.by_method.load();
        Counters {
            total: by_method.total(),
            by_method,
            systems: self.systems.iter().map(|s| s.counts.load()).collect(),
            open_sessions: self.sessions().by_id.len() as u64,
        }
    }

    pub fn reset_counters(&self) {
        self.by_method.clear();
        for s in &self.systems {
            s.counts.clear();
        }
    }
}

pub async fn accept_loop(listener: TcpListener, app: Arc<App>) {
    // Owning the connection tasks here means aborting this task (shutdown or
    // drop of the handle) aborts every connection, hung requests included.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Small request/response exchanges: don't wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    conns.spawn(serve_connection(stream, app.clone()));
                }
                Err(err) => {
                    // Usually fd exhaustion under load; back off instead of spinning.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve_connection(stream: TcpStream, app: Arc<App>) {
    let reset = Arc::new(AtomicBool::new(false));
    let io = TokioIo::new(ResettableStream {
        inner: stream,
        reset: reset.clone(),
    });
    let service = service_fn(move |req: http::Request<Incoming>| {
        let app = app.clone();
        let reset = reset.clone();
        async move {
            let result = crate::redfish::handle(&app, req).await;
            if result.is_err() {
                reset.store(true, Ordering::Relaxed);
            }
            result
        }
    });
    if let Err(err) = http1::Builder::new().serve_connection(io, service).await {
        tracing::debug!(%err, "connection ended");
    }
}

/// A TCP stream that, when flagged, closes with RST instead of FIN, the way a
/// crashing BMC web server looks to a client.
struct ResettableStream {
    inner: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.load(Ordering::Relaxed) {
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
