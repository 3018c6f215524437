//! A cache of the BMC credentials of Secrets that hosts reference, fed by the Secret watch the
//! controller already runs, so a reconcile does not GET its Secret every time. Only Secrets some
//! host uses are kept, and only their `username` and `password`. [`read_credentials`] is how
//! the host and BMCJob controllers get a host's credentials through it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferrometal_api::BareMetalHost;
use ferrometal_bmc::Credentials;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;

use crate::error::Error;

#[derive(Clone, PartialEq, Eq)]
pub struct CachedCredentials {
    pub resource_version: String,
    pub username: Option<String>,
    pub password: Option<String>,
}

// Never print the values.
impl std::fmt::Debug for CachedCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedCredentials")
            .field("resource_version", &self.resource_version)
            .field("username", &self.username.as_ref().map(|_| "<set>"))
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .finish()
    }
}

type Key = (String, String);

#[derive(Default)]
pub struct SecretCache {
    live: Mutex<HashMap<Key, CachedCredentials>>,
    /// Filled during a relist, swapped in when it is complete (drops Secrets deleted meanwhile).
    relist: Mutex<Option<HashMap<Key, CachedCredentials>>>,
}

fn key_of(s: &Secret) -> Key {
    (s.namespace().unwrap_or_default(), s.name_any())
}

fn field(s: &Secret, k: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(k))
        .map(|v| {
            String::from_utf8_lossy(&v.0)
                .trim_end_matches('\n')
                .to_string()
        })
        .filter(|v| !v.is_empty())
}

pub fn credentials_of(s: &Secret) -> CachedCredentials {
    CachedCredentials {
        resource_version: s.metadata.resource_version.clone().unwrap_or_default(),
        username: field(s, "username"),
        password: field(s, "password"),
    }
}

/// Newer of two versions of one Secret; resourceVersions that are not numbers are opaque, and
/// then the one already cached (from the watch) wins.
fn newer(existing: &CachedCredentials, candidate: &CachedCredentials) -> bool {
    match (
        existing.resource_version.parse::<u64>(),
        candidate.resource_version.parse::<u64>(),
    ) {
        (Ok(a), Ok(b)) => b > a,
        _ => false,
    }
}

impl SecretCache {
    pub fn get(&self, namespace: &str, name: &str) -> Option<CachedCredentials> {
        self.live
            .lock()
            .unwrap()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Records a Secret read directly (a cache miss).
    pub fn insert_read(&self, s: &Secret) {
        let c = credentials_of(s);
        let mut live = self.live.lock().unwrap();
        match live.get(&key_of(s)) {
            Some(existing) if !newer(existing, &c) => {}
            _ => {
                live.insert(key_of(s), c);
            }
        }
    }

    /// Applies one watch event; `referenced` says whether some host uses the Secret.
    pub fn observe(
        &self,
        event: &watcher::Event<Arc<Secret>>,
        referenced: impl Fn(&Secret) -> bool,
    ) {
        match event {
            watcher::Event::Apply(s) => {
                let mut live = self.live.lock().unwrap();
                if referenced(s) {
                    live.insert(key_of(s), credentials_of(s));
                } else {
                    live.remove(&key_of(s));
                }
            }
            watcher::Event::Delete(s) => {
                self.live.lock().unwrap().remove(&key_of(s));
            }
            watcher::Event::Init => {
                *self.relist.lock().unwrap() = Some(HashMap::new());
            }
            watcher::Event::InitApply(s) => {
                if referenced(s)
                    && let Some(m) = self.relist.lock().unwrap().as_mut()
                {
                    m.insert(key_of(s), credentials_of(s));
                }
            }
            watcher::Event::InitDone => {
                if let Some(m) = self.relist.lock().unwrap().take() {
                    *self.live.lock().unwrap() = m;
                }
            }
        }
    }
}

/// What the reconciler found when reading the BMC credentials Secret.
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialsObservation {
    /// The host has no BMC.
    NotNeeded,
    Missing {
        secret: String,
    },
    MissingKey {
        secret: String,
        key: &'static str,
    },
    Found {
        secret: String,
        version: String,
    },
}

/// A host's BMC credentials: from the cache, else read from its Secret (and then cached).
pub async fn read_credentials(
    client: &kube::Client,
    cache: &SecretCache,
    host: &BareMetalHost,
) -> Result<(CredentialsObservation, Option<Credentials>), Error> {
    let Some(bmc) = host.spec.bmc.as_ref().filter(|b| !b.address.is_empty()) else {
        return Ok((CredentialsObservation::NotNeeded, None));
    };
    let secret = bmc.credentials_name.clone();
    let ns = host.namespace_or_default();
    let cached = match cache.get(ns, &secret) {
        Some(c) => c,
        None => {
            let api: Api<Secret> = Api::namespaced(client.clone(), ns);
            let Some(s) = api.get_opt(&secret).await? else {
                return Ok((CredentialsObservation::Missing { secret }, None));
            };
            cache.insert_read(&s);
            credentials_of(&s)
        }
    };
    let Some(username) = cached.username else {
        return Ok((
            CredentialsObservation::MissingKey {
                secret,
                key: "username",
            },
            None,
        ));
    };
    let Some(password) = cached.password else {
        return Ok((
            CredentialsObservation::MissingKey {
                secret,
                key: "password",
            },
            None,
        ));
    };
    Ok((
        CredentialsObservation::Found {
            secret,
            version: cached.resource_version,
        },
        Some(Credentials::new(username, password)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(name: &str, rv: &str, password: &str) -> Arc<Secret> {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some("ns".into());
        s.metadata.resource_version = Some(rv.into());
        s.data = Some(BTreeMap::from([
            ("username".into(), ByteString(b"admin".to_vec())),
            ("password".into(), ByteString(password.as_bytes().to_vec())),
        ]));
        Arc::new(s)
    }

    #[test]
    fn keeps_referenced_secrets_and_the_newest_version() {
        let c = SecretCache::default();
        c.observe(&watcher::Event::Apply(secret("a", "5", "p5")), |_| true);
        c.observe(&watcher::Event::Apply(secret("b", "6", "x")), |_| false);
        assert_eq!(c.get("ns", "a").unwrap().password.as_deref(), Some("p5"));
        assert!(
            c.get("ns", "b").is_none(),
            "unreferenced Secrets are not kept"
        );
        // An older direct read does not replace what the watch delivered.
        c.insert_read(&secret("a", "4", "p4"));
        assert_eq!(c.get("ns", "a").unwrap().resource_version, "5");
        c.insert_read(&secret("a", "7", "p7"));
        assert_eq!(c.get("ns", "a").unwrap().resource_version, "7");
        c.observe(&watcher::Event::Delete(secret("a", "8", "")), |_| true);
        assert!(c.get("ns", "a").is_none());
        assert!(!format!("{:?}", credentials_of(&secret("a", "1", "hunter2"))).contains("hunter2"));
    }

    #[test]
    fn relist_drops_secrets_deleted_while_disconnected() {
        let c = SecretCache::default();
        c.observe(&watcher::Event::Apply(secret("gone", "1", "p")), |_| true);
        c.observe(&watcher::Event::Init, |_| true);
        c.observe(&watcher::Event::InitApply(secret("kept", "2", "p")), |_| {
            true
        });
        assert!(
            c.get("ns", "gone").is_some(),
            "served until the relist completes"
        );
        c.observe(&watcher::Event::InitDone, |_| true);
        assert!(c.get("ns", "gone").is_none());
        assert!(c.get("ns", "kept").is_some());
    }
}
