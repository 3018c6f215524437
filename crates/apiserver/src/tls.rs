//! Optional TLS: a private CA and a server certificate generated at first start under the data
//! directory. The CA goes into the kubeconfig, so clients verify the server as usual.
//!
//! Two certificates rather than one self-signed: rustls-based clients (kube-rs) reject a CA
//! certificate presented as the server's own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("loading certificate: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    pub fn in_dir(dir: &Path) -> Self {
        TlsFiles {
            ca: dir.join("ca.crt"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

/// Creates the CA and server certificate unless they already exist.
pub fn ensure(dir: &Path, extra_names: &[String]) -> Result<TlsFiles, TlsError> {
    let files = TlsFiles::in_dir(dir);
    if files.ca.exists() && files.cert.exists() && files.key.exists() {
        return Ok(files);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { path, source }
    };
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "ferrometal-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut names = vec!["localhost".to_string()];
    names.extend(extra_names.iter().cloned());
    let mut params = CertificateParams::new(names)?;
    for ip in ["127.0.0.1", "::1"] {
        params
            .subject_alt_names
            .push(SanType::IpAddress(ip.parse().expect("literal IP")));
    }
    params
        .distinguished_name
        .push(DnType::CommonName, "ferrometal");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;

    std::fs::write(&files.ca, ca_cert.pem()).map_err(io(&files.ca))?;
    std::fs::write(&files.cert, cert.pem()).map_err(io(&files.cert))?;
    crate::auth::write_private(&files.key, key.serialize_pem().as_bytes())
        .map_err(io(&files.key))?;
    tracing::info!(cert = %files.cert.display(), "generated TLS certificate");
    Ok(files)
}

/// A rustls server configuration (aws-lc-rs provider, HTTP/1.1 only).
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = CertificateDer::pem_file_iter(&files.cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&files.key)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
