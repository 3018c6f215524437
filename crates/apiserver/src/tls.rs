//! Optional TLS: a private CA and a server certificate generated at first start under the data
//! directory. The CA goes into the kubeconfig, so clients verify the server as usual.
//!
//! Two certificates rather than one self-signed: rustls-based clients (kube-rs) reject a CA
//! certificate presented as the server's own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
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
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    #[error("{0}")]
    Invalid(String),
}

pub struct TlsFiles {
    pub ca: PathBuf,
    pub ca_key: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    pub fn in_dir(dir: &Path) -> Self {
        TlsFiles {
            ca: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

/// Creates the CA (once) and a server certificate covering `localhost`, the loopback
/// addresses and `extra_names` (DNS names or IP addresses). The server certificate is reissued
/// by the same CA when a name is missing, so kubeconfigs already handed out stay valid.
pub fn ensure(dir: &Path, extra_names: &[String]) -> Result<TlsFiles, TlsError> {
    let files = TlsFiles::in_dir(dir);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { path, source }
    };
    let mut wanted = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    for n in extra_names {
        if !wanted.contains(n) {
            wanted.push(n.clone());
        }
    }
    let names_path = dir.join("tls.names");
    let have: Vec<String> = std::fs::read_to_string(&names_path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    if files.ca.exists()
        && files.ca_key.exists()
        && files.cert.exists()
        && files.key.exists()
        && wanted.iter().all(|n| have.contains(n))
    {
        return Ok(files);
    }
    let mut names = have;
    for n in wanted {
        if !names.contains(&n) {
            names.push(n);
        }
    }

    let ca_params = ca_params()?;
    // The CA's subject is fixed, so its saved key and the same parameters sign exactly as
    // the original certificate would.
    let existing_key = match (files.ca.exists(), std::fs::read_to_string(&files.ca_key)) {
        (true, Ok(key)) => Some(KeyPair::from_pem(&key)?),
        _ => None,
    };
    let issuer = match existing_key {
        Some(key) => Issuer::new(ca_params, key),
        None => {
            let ca_key = KeyPair::generate()?;
            let ca_cert = ca_params.self_signed(&ca_key)?;
            std::fs::write(&files.ca, ca_cert.pem()).map_err(io(&files.ca))?;
            crate::files::write_private(&files.ca_key, ca_key.serialize_pem().as_bytes())
                .map_err(io(&files.ca_key))?;
            Issuer::new(ca_params, ca_key)
        }
    };

    let mut params = CertificateParams::new(names.clone())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "ferrometal");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    std::fs::write(&files.cert, cert.pem()).map_err(io(&files.cert))?;
    crate::files::write_private(&files.key, key.serialize_pem().as_bytes())
        .map_err(io(&files.key))?;
    std::fs::write(&names_path, names.join("\n")).map_err(io(&names_path))?;
    tracing::info!(cert = %files.cert.display(), ?names, "issued TLS certificate");
    Ok(files)
}

/// The CA's parameters: fixed, so its saved key and these sign exactly as the original
/// certificate would.
fn ca_params() -> Result<CertificateParams, TlsError> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name
        .push(DnType::CommonName, "ferrometal-ca");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    Ok(p)
}

/// A rustls server configuration (aws-lc-rs provider, HTTP/1.1 only). Client certificates
/// signed by the CA are verified and name the user; clients without one authenticate
/// otherwise (a bearer token).
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = CertificateDer::pem_file_iter(&files.cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&files.key)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&files.ca)? {
        roots.add(c?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A client certificate and key (PEM) for `user` in `groups`, signed by the CA in `dir`, valid
/// for `valid` from now: CN is the user and each O a group, as kube-apiserver reads them.
pub fn issue_client_cert(
    dir: &Path,
    user: &str,
    groups: &[String],
    valid: std::time::Duration,
) -> Result<(String, String), TlsError> {
    let files = TlsFiles::in_dir(dir);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { path, source }
    };
    if user.is_empty() || user.len() > 256 {
        return Err(TlsError::Invalid(format!(
            "user {user:?}: must be 1 to 256 characters"
        )));
    }
    let ca_key = std::fs::read_to_string(&files.ca_key).map_err(io(&files.ca_key))?;
    let issuer = Issuer::new(ca_params()?, KeyPair::from_pem(&ca_key)?);
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    for g in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, g.as_str());
    }
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::seconds(valid.as_secs() as i64);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn reissues_for_new_names_with_the_same_ca() {
        let dir = tempfile::tempdir().unwrap();
        let f = ensure(dir.path(), &[]).unwrap();
        let ca = std::fs::read_to_string(&f.ca).unwrap();
        let cert = std::fs::read_to_string(&f.cert).unwrap();
        ensure(dir.path(), &[]).unwrap();
        assert_eq!(
            cert,
            std::fs::read_to_string(&f.cert).unwrap(),
            "kept when nothing changes"
        );
        ensure(
            dir.path(),
            &["10.0.0.5".into(), "ferrometal.example".into()],
        )
        .unwrap();
        assert_ne!(cert, std::fs::read_to_string(&f.cert).unwrap(), "reissued");
        assert_eq!(ca, std::fs::read_to_string(&f.ca).unwrap(), "same CA");
        let names = std::fs::read_to_string(dir.path().join("tls.names")).unwrap();
        assert!(names.contains("10.0.0.5") && names.contains("localhost"));
        server_config(&f).unwrap();

        // The reissued certificate still verifies against the CA clients already have.
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&f.ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        let leaf = CertificateDer::pem_file_iter(&f.cert)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        for name in ["10.0.0.5", "localhost", "127.0.0.1"] {
            let sn = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(&leaf, &[], &sn, &[], rustls::pki_types::UnixTime::now())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
