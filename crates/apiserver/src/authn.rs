//! Authentication: who is asking. The mechanisms kubectl and client libraries already speak:
//! the admin bearer token, X.509 client certificates signed by the server's CA, and signed
//! ServiceAccount tokens (TokenRequest). Anonymous requests are refused.

use std::path::Path;
use std::sync::Arc;

use aws_lc_rs::hmac;
use base64::Engine;
use ferrometal_apimachinery::rbac::UserInfo;
use http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::status::ApiError;
use crate::store::Store;

pub const ADMIN_USER: &str = "ferrometal:admin";
/// The controllers inside `serve`, through the in-process transport.
pub const IN_PROCESS_USER: &str = "ferrometal:controllers";
pub const MASTERS: &str = "system:masters";
pub const AUTHENTICATED: &str = "system:authenticated";
pub const SA_PREFIX: &str = "system:serviceaccount:";
/// Audiences this server accepts in ServiceAccount tokens; the first is the default a
/// TokenRequest without audiences gets (kube-apiserver's default issuer audience).
pub const AUDIENCES: &[&str] = &["https://kubernetes.default.svc.cluster.local", "ferrometal"];
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Storage key of ServiceAccounts.
pub const SA_KEY: &str = "serviceaccounts";

/// Set on requests that come through [`crate::ApiServer::client`]; never from the network.
#[derive(Debug, Clone, Copy)]
pub struct InProcess;

/// Set on every request of a TLS connection: the user its client certificate names, if it
/// presented one our CA signed (checked during the handshake).
#[derive(Debug, Clone)]
pub struct PeerIdentity(pub Option<Arc<UserInfo>>);

/// The authenticated (and, after impersonation, effective) user of a request.
#[derive(Debug, Clone)]
pub struct Requester(pub Arc<UserInfo>);

pub fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

/// Every way in, with the secrets they check against.
pub struct Authenticator {
    /// `None` when authentication is off (loopback only): everyone is the admin.
    admin_token: Option<String>,
    signer: TokenSigner,
}

impl Authenticator {
    pub fn new(admin_token: Option<String>, signer: TokenSigner) -> Self {
        Authenticator {
            admin_token,
            signer,
        }
    }

    /// Whether requests must carry credentials (false: loopback only, everyone is the admin).
    pub fn required(&self) -> bool {
        self.admin_token.is_some()
    }

    pub fn signer(&self) -> &TokenSigner {
        &self.signer
    }

    /// The user behind a request's credentials; 401 when there are none or they are not
    /// valid.
    pub fn authenticate(
        &self,
        store: &Store,
        headers: &HeaderMap,
        ext: &http::Extensions,
    ) -> Result<UserInfo, ApiError> {
        if ext.get::<InProcess>().is_some() {
            return Ok(user(IN_PROCESS_USER, &[MASTERS, AUTHENTICATED]));
        }
        let Some(admin) = &self.admin_token else {
            return Ok(user(ADMIN_USER, &[MASTERS, AUTHENTICATED]));
        };
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if let Some(token) = bearer {
            if same(token.as_bytes(), admin.as_bytes()) {
                return Ok(user(ADMIN_USER, &[MASTERS, AUTHENTICATED]));
            }
            return self
                .service_account(store, token)
                .ok_or_else(ApiError::unauthorized);
        }
        if let Some(PeerIdentity(Some(u))) = ext.get::<PeerIdentity>() {
            return Ok((**u).clone());
        }
        Err(ApiError::unauthorized())
    }

    /// A ServiceAccount token: signature, expiry and audience, and the ServiceAccount it names
    /// must still exist with the same uid (deleting it revokes its tokens).
    pub fn service_account(&self, store: &Store, token: &str) -> Option<UserInfo> {
        let claims = self.signer.verify(token)?;
        let k = claims.get("kubernetes.io")?;
        let ns = k.get("namespace")?.as_str()?;
        let name = k.pointer("/serviceaccount/name")?.as_str()?;
        let uid = k.pointer("/serviceaccount/uid")?.as_str()?;
        let sa = store.get(SA_KEY, ns, name)?;
        if &*sa.uid != uid || sa.deleting {
            return None;
        }
        Some(service_account_user(ns, name))
    }
}

pub fn service_account_user(ns: &str, name: &str) -> UserInfo {
    UserInfo {
        name: format!("{SA_PREFIX}{ns}:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            AUTHENTICATED.into(),
        ],
    }
}

/// Constant-time comparison so a token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user a client certificate names: CN is the user, each O a group (as kube-apiserver).
/// The certificate was already verified against the CA during the TLS handshake.
pub fn identity_from_cert(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    groups.push(AUTHENTICATED.into());
    Some(UserInfo { name, groups })
}

/// Signs and checks ServiceAccount tokens: compact JWTs (HS256) with the claims
/// kube-apiserver puts in bound tokens, so clients that look inside find what they expect.
pub struct TokenSigner {
    key: hmac::Key,
}

impl TokenSigner {
    /// The key lives in `DATA_DIR/sa.key` (0600), created at first start.
    pub fn load_or_create(path: &Path) -> std::io::Result<TokenSigner> {
        let secret = crate::files::load_or_create_secret(path, 32)?;
        Ok(TokenSigner {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()),
        })
    }

    /// A token for ServiceAccount `ns/name` (uid `uid`) valid for `seconds`, for `audiences`.
    pub fn mint(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        seconds: i64,
        now: i64,
    ) -> String {
        let b64 = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        let header = b64(&json!({"alg": "HS256", "typ": "JWT"}));
        let claims = b64(&json!({
            "iss": ISSUER,
            "sub": format!("{SA_PREFIX}{ns}:{name}"),
            "aud": audiences,
            "iat": now,
            "nbf": now,
            "exp": now + seconds,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
        }));
        let signing_input = format!("{header}.{claims}");
        let sig = hmac::sign(&self.key, signing_input.as_bytes());
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig.as_ref());
        format!("{signing_input}.{sig}")
    }

    /// The claims of a token this signer issued that is current and meant for this server.
    pub fn verify(&self, token: &str) -> Option<Value> {
        // Far larger than any token we issue: do not parse what cannot be ours.
        if token.len() > 4096 {
            return None;
        }
        let (signing_input, sig) = token.rsplit_once('.')?;
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig)
            .ok()?;
        hmac::verify(&self.key, signing_input.as_bytes(), &sig).ok()?;
        let (_, claims) = signing_input.split_once('.')?;
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .ok()?;
        let claims: Value = serde_json::from_slice(&claims).ok()?;
        let now = jiff::Timestamp::now().as_second();
        let exp = claims.get("exp")?.as_i64()?;
        let nbf = claims.get("nbf").and_then(Value::as_i64).unwrap_or(0);
        if now >= exp || now + 60 < nbf {
            return None;
        }
        let aud_ok = claims
            .get("aud")?
            .as_array()?
            .iter()
            .any(|a| a.as_str().is_some_and(|a| AUDIENCES.contains(&a)));
        aud_ok.then_some(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> (tempfile::TempDir, TokenSigner) {
        let dir = tempfile::tempdir().unwrap();
        let s = TokenSigner::load_or_create(&dir.path().join("sa.key")).unwrap();
        (dir, s)
    }

    #[test]
    fn tokens_verify_only_when_signed_current_and_for_us() {
        let (dir, s) = signer();
        let now = jiff::Timestamp::now().as_second();
        let aud = vec![AUDIENCES[0].to_string()];
        let t = s.mint("ns", "sa", "u1", &aud, 600, now);
        let c = s.verify(&t).expect("valid");
        assert_eq!(c["kubernetes.io"]["serviceaccount"]["uid"], "u1");
        assert_eq!(c["sub"], "system:serviceaccount:ns:sa");

        // Expired, wrong audience, tampered, other key.
        assert!(
            s.verify(&s.mint("ns", "sa", "u1", &aud, 600, now - 700))
                .is_none()
        );
        let other = vec!["https://elsewhere".to_string()];
        assert!(
            s.verify(&s.mint("ns", "sa", "u1", &other, 600, now))
                .is_none()
        );
        let mut parts: Vec<String> = t.split('.').map(String::from).collect();
        let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            json!({"sub": "system:serviceaccount:kube-system:admin", "exp": now + 600, "aud": aud,
                   "kubernetes.io": {"namespace": "kube-system", "serviceaccount": {"name": "admin", "uid": "x"}}})
            .to_string(),
        );
        parts[1] = forged;
        assert!(s.verify(&parts.join(".")).is_none());
        let other_key = TokenSigner::load_or_create(&dir.path().join("other.key")).unwrap();
        assert!(other_key.verify(&t).is_none());
        assert!(s.verify("not-a-token").is_none());
        // The key survives a restart: tokens stay valid.
        let again = TokenSigner::load_or_create(&dir.path().join("sa.key")).unwrap();
        assert!(again.verify(&t).is_some());
    }
}
