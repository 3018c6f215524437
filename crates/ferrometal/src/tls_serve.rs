//! Serving an axum router over HTTPS (axum::serve speaks plain HTTP only): accept, a TLS
//! handshake bounded in time, then HTTP/1 or 2 on the connection. Shared by the deploy agent's
//! API and the web console.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// Serves `app` on `listener` with `tls` in the background; each connection's handlers see
/// its peer as `ConnectInfo<SocketAddr>`.
pub fn spawn(listener: TcpListener, tls: Arc<tokio_rustls::rustls::ServerConfig>, app: Router) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let acceptor = acceptor.clone();
            let app = app.clone().layer(axum::Extension(ConnectInfo(peer)));
            tokio::spawn(async move {
                let Ok(Ok(tls)) =
                    tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
                else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    tower::ServiceExt::oneshot(app.clone(), req)
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
}
