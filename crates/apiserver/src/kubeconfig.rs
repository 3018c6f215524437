//! kubeconfig files: the admin's (bearer token) written at start, and client-certificate ones
//! minted for other users (`ferrometal kubeconfig`).

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::tls;

/// A kubeconfig document with one cluster, one user and one context.
pub fn document(server: &str, ca_pem: Option<&str>, user: Value, namespace: &str) -> String {
    let mut cluster = json!({ "server": server });
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "ferrometal", "cluster": cluster }],
        "users": [{ "name": "ferrometal", "user": user }],
        "contexts": [{
            "name": "ferrometal",
            "context": { "cluster": "ferrometal", "user": "ferrometal", "namespace": namespace },
        }],
        "current-context": "ferrometal",
        "preferences": {},
    });
    serde_yaml::to_string(&doc).expect("kubeconfig serializes")
}

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("reading {path}: {source} (has `ferrometal serve --data-dir` run there?)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} has no server URL")]
    NoServer { path: String },
    #[error("the server in {0} does not use TLS: client certificates need it")]
    NoTls(String),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// A kubeconfig for `user` in `groups` with a client certificate signed by the CA of the
/// server whose data directory is `data_dir`, valid for `valid`. The server URL is taken
/// from the admin kubeconfig that server wrote.
pub fn for_user(
    data_dir: &Path,
    user: &str,
    groups: &[String],
    namespace: &str,
    valid: Duration,
) -> Result<String, KubeconfigError> {
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|source| KubeconfigError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    let admin_path = data_dir.join("kubeconfig");
    let admin: Value = serde_yaml::from_str(&read(&admin_path)?).unwrap_or_default();
    let server = admin
        .pointer("/clusters/0/cluster/server")
        .and_then(Value::as_str)
        .ok_or_else(|| KubeconfigError::NoServer {
            path: admin_path.display().to_string(),
        })?;
    if !server.starts_with("https://") {
        return Err(KubeconfigError::NoTls(admin_path.display().to_string()));
    }
    let ca = read(&tls::TlsFiles::in_dir(data_dir).ca)?;
    let (cert, key) = tls::issue_client_cert(data_dir, user, groups, valid)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let creds = json!({
        "client-certificate-data": b64(&cert),
        "client-key-data": b64(&key),
    });
    Ok(document(server, Some(&ca), creds, namespace))
}
