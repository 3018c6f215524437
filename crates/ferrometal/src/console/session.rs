//! Console sessions: what a person signed in with (a bearer token, or a kubeconfig's token or
//! client certificate), kept in memory only and never sent back to the browser. The browser
//! holds an opaque, HttpOnly, SameSite=Strict cookie naming the session; every API call the
//! console makes goes through the session's own `kube::Client`, so the API server
//! authenticates, authorizes and audits the person, not the console.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::config::{AuthInfo, Kubeconfig};
use serde::{Deserialize, Serialize};

/// A session unused this long ends.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// Every session ends this long after sign-in, used or not.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions held at once; the oldest go first past it.
const MAX_SESSIONS: usize = 1000;

pub const COOKIE: &str = "ferrometal_console";

/// What the sign-in form sends: a token, or a whole kubeconfig (its current context's
/// credentials; its server address is ignored: the console talks to its own API only).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    #[serde(default)]
    pub token: String,
    #[serde(default)]
    pub kubeconfig: String,
    /// The namespace the tenant views start in (default: the kubeconfig context's).
    #[serde(default)]
    pub namespace: String,
}

/// What the browser may know of its session.
#[derive(Serialize, Clone)]
pub struct Info {
    pub user: String,
    pub groups: Vec<String>,
    pub namespace: String,
    /// Sent back in `X-Console-CSRF` on every write: a page of another site cannot read it.
    pub csrf: String,
    /// Seconds until the session ends, idle or not.
    pub expires_in: u64,
}

pub struct Session {
    pub client: kube::Client,
    pub info: Info,
    created: Instant,
    used: Instant,
}

#[derive(Clone, Default)]
pub struct Sessions {
    inner: Arc<Mutex<HashMap<String, Session>>>,
}

impl Sessions {
    /// Stores a new session and returns its id (the cookie's value).
    pub fn insert(&self, client: kube::Client, info: Info) -> String {
        let id = random_hex();
        let now = Instant::now();
        let mut map = self.inner.lock().unwrap();
        map.retain(|_, s| live(s.created, s.used, now));
        while map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        map.insert(
            id.clone(),
            Session {
                client,
                info,
                created: now,
                used: now,
            },
        );
        id
    }

    /// The session's client and info, marking it used; `None` when unknown or expired.
    pub fn touch(&self, id: &str) -> Option<(kube::Client, Info)> {
        let now = Instant::now();
        let mut map = self.inner.lock().unwrap();
        let s = map.get_mut(id)?;
        if !live(s.created, s.used, now) {
            map.remove(id);
            return None;
        }
        s.used = now;
        let mut info = s.info.clone();
        info.expires_in = LIFETIME.saturating_sub(now - s.created).as_secs();
        Some((s.client.clone(), info))
    }

    pub fn remove(&self, id: &str) {
        self.inner.lock().unwrap().remove(id);
    }
}

fn live(created: Instant, used: Instant, now: Instant) -> bool {
    now - used < IDLE && now - created < LIFETIME
}

pub fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The credentials of a sign-in, checked for what the console may use: inline data only
/// (a path, a command or a plugin in an uploaded kubeconfig would run or read on the console's
/// machine, not the user's). Returns them with the namespace to start in.
pub fn credentials(form: &SignIn) -> Result<(AuthInfo, String), String> {
    let token = form.token.trim();
    match (token.is_empty(), form.kubeconfig.trim().is_empty()) {
        (false, false) => Err("give a token or a kubeconfig, not both".into()),
        (true, true) => Err("give a token or a kubeconfig".into()),
        (false, true) => {
            if token.len() > 16 * 1024 || token.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err("token: not a bearer token (one line, at most 16 KiB)".into());
            }
            let auth = AuthInfo {
                token: Some(token.to_string().into()),
                ..AuthInfo::default()
            };
            Ok((auth, form.namespace.trim().to_string()))
        }
        (true, false) => {
            let kc = Kubeconfig::from_yaml(&form.kubeconfig)
                .map_err(|e| format!("kubeconfig: not a kubeconfig ({e})"))?;
            let context_name = kc
                .current_context
                .clone()
                .or_else(|| kc.contexts.first().map(|c| c.name.clone()))
                .ok_or("kubeconfig: no context")?;
            let context = kc
                .contexts
                .iter()
                .find(|c| c.name == context_name)
                .and_then(|c| c.context.clone())
                .ok_or_else(|| format!("kubeconfig: context {context_name:?} is not defined"))?;
            let user = context.user.clone().unwrap_or_default();
            let auth = kc
                .auth_infos
                .iter()
                .find(|a| a.name == user)
                .and_then(|a| a.auth_info.clone())
                .ok_or_else(|| format!("kubeconfig: user {user:?} is not defined"))?;
            let refused = [
                (auth.token_file.is_some(), "tokenFile"),
                (auth.client_certificate.is_some(), "client-certificate"),
                (auth.client_key.is_some(), "client-key"),
                (auth.exec.is_some(), "exec"),
                (auth.auth_provider.is_some(), "auth-provider"),
                (auth.impersonate.is_some(), "as"),
                (auth.username.is_some(), "username"),
            ];
            if let Some((_, field)) = refused.iter().find(|(set, _)| *set) {
                return Err(format!(
                    "kubeconfig: user {user:?} uses {field}; the console accepts inline credentials only (token, client-certificate-data with client-key-data)"
                ));
            }
            let cert = auth.client_certificate_data.is_some() && auth.client_key_data.is_some();
            if auth.token.is_none() && !cert {
                return Err(format!(
                    "kubeconfig: user {user:?} has no token and no client-certificate-data with client-key-data"
                ));
            }
            let auth = AuthInfo {
                token: auth.token,
                client_certificate_data: auth.client_certificate_data,
                client_key_data: auth.client_key_data,
                ..AuthInfo::default()
            };
            let namespace = match form.namespace.trim() {
                "" => context.namespace.unwrap_or_default(),
                ns => ns.to_string(),
            };
            Ok((auth, namespace))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(token: &str, kubeconfig: &str) -> SignIn {
        SignIn {
            token: token.into(),
            kubeconfig: kubeconfig.into(),
            namespace: String::new(),
        }
    }

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: 'https://10.0.0.1:6443'}}]\ncontexts: [{name: c, context: {cluster: k, user: u, namespace: tenant-a}}]\nusers: [{name: u, user: USER}]\n";

    #[test]
    fn a_token_or_a_kubeconfig_with_inline_credentials() {
        let (auth, ns) = credentials(&form(" abc.def ", "")).unwrap();
        assert!(auth.token.is_some());
        assert_eq!(ns, "");
        let kc = KUBECONFIG.replace("USER", "{token: t0k}");
        let (auth, ns) = credentials(&form("", &kc)).unwrap();
        assert!(auth.token.is_some());
        assert_eq!(ns, "tenant-a");
        let kc = KUBECONFIG.replace(
            "USER",
            "{client-certificate-data: Y2VydA==, client-key-data: a2V5}",
        );
        let (auth, _) = credentials(&form("", &kc)).unwrap();
        assert!(auth.client_certificate_data.is_some() && auth.token.is_none());
    }

    #[test]
    fn what_would_run_or_read_on_the_console_machine_is_refused() {
        for (user, field) in [
            ("{tokenFile: /etc/shadow}", "tokenFile"),
            (
                "{client-certificate: /a, client-key: /b}",
                "client-certificate",
            ),
            (
                "{exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}}",
                "exec",
            ),
        ] {
            let kc = KUBECONFIG.replace("USER", user);
            let e = credentials(&form("", &kc)).err().unwrap();
            assert!(e.contains(field), "{e}");
        }
        assert!(credentials(&form("", "")).is_err());
        assert!(credentials(&form("a", "b")).is_err());
        assert!(credentials(&form("two words", "")).is_err());
        let e = credentials(&form("", "{{{")).err().unwrap();
        assert!(e.starts_with("kubeconfig:"), "{e}");
    }

    #[test]
    fn sessions_end_when_idle_and_after_their_lifetime() {
        let now = Instant::now() + LIFETIME + IDLE;
        let minute = Duration::from_secs(60);
        assert!(live(now - minute, now - minute, now));
        assert!(!live(now - IDLE - minute, now - IDLE - minute, now));
        // Used a minute ago, but signed in longer ago than a session lives.
        assert!(!live(now - LIFETIME - minute, now - minute, now));
        let a = random_hex();
        assert_eq!(a.len(), 64);
        assert_ne!(a, random_hex());
    }
}
