//! Slow or greedy clients cannot hold the server: requests in flight are capped (429 with
//! Retry-After), a slow request ends with 504, and connections that never finish their
//! headers or TLS handshake are closed. The server keeps serving throughout.

mod common;

use std::time::Duration;

use common::*;
use ferrometal_apiserver::{Limits, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn config(dir: &std::path::Path, tls: bool, limits: Limits) -> ServerConfig {
    let mut cfg = ServerConfig::new(dir);
    cfg.tls = tls;
    cfg.limits = limits;
    cfg
}

/// Reads until the peer closes (or `guard` passes, which fails the test: the server never
/// closed).
async fn closed_by_server(s: &mut TcpStream, guard: Duration) -> Vec<u8> {
    let mut out = Vec::new();
    let r = tokio::time::timeout(guard, s.read_to_end(&mut out)).await;
    assert!(r.is_ok(), "the server kept the connection open");
    out
}

/// Starts a POST whose body never completes: a request that stays in flight.
async fn stalled_post(addr: std::net::SocketAddr, token: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"apiVersion\""
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_are_capped_with_429() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_in_flight: 1,
        ..Limits::default()
    };
    let srv = start_with(config(dir.path(), false, limits), "127.0.0.1:0").await;
    let token = srv.token();
    // The stalled request must hold the only slot; if it arrived while another held it, it was
    // refused: start it again.
    let mut held = stalled_post(srv.addr, &token).await;
    for _ in 0..100 {
        let mut buf = [0u8; 64];
        match tokio::time::timeout(Duration::from_millis(200), held.read(&mut buf)).await {
            Err(_) => break,
            Ok(_) => held = stalled_post(srv.addr, &token).await,
        }
    }
    let mut answer = (0, String::new());
    for _ in 0..200 {
        answer = raw(srv.addr, "GET", "/api/v1/namespaces", Some(&token), "", b"").await;
        if answer.0 == 429 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(answer.0, 429, "{}", answer.1);
    assert!(answer.1.contains("TooManyRequests"), "{}", answer.1);
    assert!(answer.1.contains("retryAfterSeconds"), "{}", answer.1);
    // The raw exchange also carried the header clients back off on.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(
        format!("GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let reply = String::from_utf8_lossy(&closed_by_server(&mut s, Duration::from_secs(30)).await)
        .to_ascii_lowercase();
    assert!(reply.contains("retry-after: 1"), "{reply}");

    // The slot comes back when the client goes.
    drop(held);
    let mut code = 0;
    for _ in 0..200 {
        code = raw(srv.addr, "GET", "/api/v1/namespaces", Some(&token), "", b"")
            .await
            .0;
        if code == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(code, 200);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_time_out_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        request_timeout: Duration::from_secs(1),
        header_read_timeout: Duration::from_secs(1),
        max_connections: 2,
        ..Limits::default()
    };
    let srv = start_with(config(dir.path(), false, limits), "127.0.0.1:0").await;
    let token = srv.token();

    // A body that never completes: 504 once the request timeout passes.
    let mut s = stalled_post(srv.addr, &token).await;
    let reply = String::from_utf8_lossy(&closed_by_server(&mut s, Duration::from_secs(30)).await)
        .to_string();
    assert!(reply.starts_with("HTTP/1.1 504"), "{reply}");
    assert!(reply.contains("\"reason\":\"Timeout\""), "{reply}");

    // Headers that never complete: the connection is closed.
    let mut idle = TcpStream::connect(srv.addr).await.unwrap();
    idle.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    closed_by_server(&mut idle, Duration::from_secs(30)).await;

    // At the connection cap, a new client waits until a slot frees, then is served.
    let mut a = TcpStream::connect(srv.addr).await.unwrap();
    let mut b = TcpStream::connect(srv.addr).await.unwrap();
    for c in [&mut a, &mut b] {
        c.write_all(b"GET /api HTTP/1.1\r\n").await.unwrap();
    }
    let third = tokio::spawn({
        let token = token.clone();
        let addr = srv.addr;
        async move { raw(addr, "GET", "/api/v1/namespaces", Some(&token), "", b"").await }
    });
    closed_by_server(&mut a, Duration::from_secs(30)).await;
    closed_by_server(&mut b, Duration::from_secs(30)).await;
    let (code, _) = tokio::time::timeout(Duration::from_secs(30), third)
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert_eq!(code, 200);

    // A watch asking for an absurd timeout is served (clamped), not a crash.
    let mut w = TcpStream::connect(srv.addr).await.unwrap();
    w.write_all(
        format!("GET /api/v1/namespaces?watch=true&timeoutSeconds=18446744073709551615 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(30), w.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    drop(w);
    let (code, _) = raw(srv.addr, "GET", "/api/v1/namespaces", Some(&token), "", b"").await;
    assert_eq!(code, 200);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_tls_handshake_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        tls_handshake_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let srv = start_with(config(dir.path(), true, limits), "127.0.0.1:0").await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    // Never say hello.
    closed_by_server(&mut s, Duration::from_secs(30)).await;
    // Others are still served.
    let client = srv.socket_client().await;
    let v = client.apiserver_version().await.unwrap();
    assert!(!v.git_version.is_empty());
    srv.stop().await;
}
