//! Shared test helpers: a server on a free loopback port, clients for it, raw HTTP, and a
//! sample custom resource.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ferrometal_apiserver::{ApiServer, ServerConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
pub struct WidgetSpec {
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The Widget CRD with a few schema constraints and a CEL rule added by hand.
pub fn widget_crd() -> CustomResourceDefinition {
    let mut v = serde_json::to_value(Widget::crd()).unwrap();
    let spec = &mut v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["size"]["minimum"] = serde_json::json!(1);
    spec["properties"]["color"]["enum"] = serde_json::json!(["blue", "red"]);
    spec["properties"]["color"]["default"] = serde_json::json!("blue");
    spec["x-kubernetes-validations"] = serde_json::json!([
        {"rule": "self.size < 100", "message": "size must be below 100"},
        {"rule": "self.size >= oldSelf.size", "message": "size may not shrink"}
    ]);
    serde_json::from_value(v).unwrap()
}

pub struct TestServer {
    pub api: Arc<ApiServer>,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,ferrometal_apiserver=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Opens `dir` and serves it on `addr` (port 0 for a free one).
pub async fn start(dir: &Path, addr: &str, tls: bool) -> TestServer {
    let mut cfg = ServerConfig::new(dir);
    cfg.tls = tls;
    start_with(cfg, addr).await
}

pub async fn start_with(cfg: ServerConfig, addr: &str) -> TestServer {
    init_tracing();
    let dir = cfg.data_dir.clone();
    let dir = dir.as_path();
    let api = Arc::new(ApiServer::open(cfg).await.expect("server opens"));
    // Rebinding the same port right after a restart can briefly fail while the old socket
    // closes.
    let mut listener = None;
    for _ in 0..100 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => {
                listener = Some(l);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let listener = listener.expect("bind");
    let local = listener.local_addr().unwrap();
    api.write_kubeconfig(&api.url_for(local)).unwrap();
    let task = tokio::spawn({
        let api = api.clone();
        async move { api.serve(listener).await.expect("serve") }
    });
    TestServer {
        api,
        addr: local,
        dir: dir.to_path_buf(),
        task,
    }
}

impl TestServer {
    /// A client that goes through the socket, configured from the written kubeconfig.
    pub async fn socket_client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.dir.join("kubeconfig")).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(cfg).unwrap()
    }

    pub async fn stop(self) {
        self.api.shutdown().await;
        let _ = self.task.await;
    }

    pub fn token(&self) -> String {
        self.api.token().to_string()
    }
}

/// Installs the Widget CRD and waits until it is established.
pub async fn install_widgets(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.create(&PostParams::default(), &widget_crd()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating CRD: {e}"),
    }
    let est = kube::runtime::wait::await_condition(
        crds,
        "widgets.example.com",
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(20), est)
        .await
        .expect("CRD established in time")
        .unwrap();
}

pub fn widget(name: &str, size: i64) -> Widget {
    let mut w = Widget::new(name, WidgetSpec { size, color: None });
    w.metadata.namespace = Some("default".into());
    w
}

/// A raw HTTP/1.1 exchange over plain TCP; returns (status, body).
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status: u16 = text[9..12].parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// A JSON answer parsed, or a panic showing it.
pub fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// Content types for [`call`].
pub const JSON: &str = "application/json";
pub const MERGE: &str = "application/merge-patch+json";

/// One request with the admin token and a JSON body (none for `Value::Null`); the status and
/// the JSON answer.
pub async fn call(
    srv: &TestServer,
    method: &str,
    path: &str,
    ct: &str,
    body: &Value,
) -> (u16, Value) {
    let t = srv.token();
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let (code, text) = raw(srv.addr, method, path, Some(&t), ct, &body).await;
    (code, parse(&text))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
