//! Links to other clusters: a `kube::Client` built from a claim's kubeconfig Secret, kept per
//! Secret while its content is unchanged, with a watch on the mirrors and HardwareData there
//! that wakes the claims they belong to.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrometal_api::claim::{REMOTE_KUBECONFIG, REMOTE_KUBECONFIG_KEYS, REMOTE_MIRROR_LABEL};
use ferrometal_api::{HardwareData, HostClaim};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::UnboundedSender;

use crate::remote_servers::ServerPolicy;

/// The largest kubeconfig read from a Secret.
const MAX_KUBECONFIG: usize = 256 * 1024;
/// A silent remote API server fails a connection attempt after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A usable connection to the remote cluster.
pub struct Link {
    pub client: kube::Client,
    /// Where the mirrors live: the kubeconfig context's namespace.
    pub namespace: String,
    /// The API server's URL, for messages (never credentials).
    pub server: String,
    fingerprint: u64,
    watch: tokio::task::AbortHandle,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// Why no link could be made; the message names the Secret and the field, never its content.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct LinkError {
    pub message: String,
    /// The Secret itself is gone.
    pub missing: bool,
}

fn link_error(message: String) -> LinkError {
    LinkError {
        message,
        missing: false,
    }
}

/// The links of this process, one per kubeconfig Secret.
pub struct Links {
    links: Mutex<HashMap<(String, String), Arc<Link>>>,
    wake: UnboundedSender<ObjectRef<HostClaim>>,
    /// This cluster's claims, to wake the ones using a link that fails.
    claims: Store<HostClaim>,
    servers: ServerPolicy,
}

impl Links {
    pub fn new(
        wake: UnboundedSender<ObjectRef<HostClaim>>,
        claims: Store<HostClaim>,
        servers: ServerPolicy,
    ) -> Links {
        Links {
            links: Mutex::default(),
            wake,
            claims,
            servers,
        }
    }

    /// The link for the Secret `name` in `namespace` (read from this cluster now), made anew when
    /// its content changed.
    pub async fn get(
        &self,
        local: &kube::Client,
        namespace: &str,
        name: &str,
        claim_namespace: &str,
    ) -> Result<Arc<Link>, LinkError> {
        let secret = Api::<Secret>::namespaced(local.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|e| link_error(format!("reading Secret {name:?}: {e}")))?
            .ok_or_else(|| {
                // Its link goes with it (and the watch it holds).
                self.links
                    .lock()
                    .unwrap()
                    .remove(&(namespace.to_string(), name.to_string()));
                LinkError {
                    message: format!(
                        "Secret {name:?} (annotation {}) not found",
                        ferrometal_api::claim::REMOTE_KUBECONFIG
                    ),
                    missing: true,
                }
            })?;
        let text = kubeconfig_text(&secret, name)?;
        let fingerprint = {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            h.finish()
        };
        let key = (namespace.to_string(), name.to_string());
        if let Some(l) = self.links.lock().unwrap().get(&key)
            && l.fingerprint == fingerprint
        {
            return Ok(l.clone());
        }
        let (config, mirror_ns) = client_config(&text, name, claim_namespace).await?;
        let server = config.cluster_url.to_string();
        self.servers
            .check(&server)
            .map_err(|why| link_error(format!("Secret {name:?}: kubeconfig: {why}")))?;
        let client = kube::Client::try_from(config)
            .map_err(|e| link_error(format!("Secret {name:?}: kubeconfig: {e}")))?;
        let watch = tokio::spawn(watch_mirrors(
            client.clone(),
            mirror_ns.clone(),
            (namespace.to_string(), name.to_string()),
            self.wake.clone(),
            self.claims.clone(),
        ))
        .abort_handle();
        let link = Arc::new(Link {
            client,
            namespace: mirror_ns,
            server,
            fingerprint,
            watch,
        });
        self.links.lock().unwrap().insert(key, link.clone());
        Ok(link)
    }
}

fn kubeconfig_text(secret: &Secret, name: &str) -> Result<String, LinkError> {
    let data = secret.data.clone().unwrap_or_default();
    let bytes = REMOTE_KUBECONFIG_KEYS
        .iter()
        .find_map(|k| data.get(*k))
        .ok_or_else(|| {
            link_error(format!(
                "Secret {name:?} has no key {:?}",
                REMOTE_KUBECONFIG_KEYS.join("\" or \"")
            ))
        })?;
    if bytes.0.len() > MAX_KUBECONFIG {
        return Err(link_error(format!(
            "Secret {name:?}: the kubeconfig is {} bytes, more than {MAX_KUBECONFIG}",
            bytes.0.len()
        )));
    }
    String::from_utf8(bytes.0.clone())
        .map_err(|_| link_error(format!("Secret {name:?}: the kubeconfig is not UTF-8")))
}

/// A client configuration from a kubeconfig a tenant wrote. Anything that would make this
/// process read its own files or run a program (paths, exec and auth-provider plugins) is
/// refused: the content is the tenant's, the process is not.
pub async fn client_config(
    text: &str,
    name: &str,
    claim_namespace: &str,
) -> Result<(kube::Config, String), LinkError> {
    let bad = |what: &str| link_error(format!("Secret {name:?}: kubeconfig: {what}"));
    let kc = Kubeconfig::from_yaml(text).map_err(|e| bad(&format!("cannot be read: {e}")))?;
    for c in &kc.clusters {
        if let Some(cl) = &c.cluster
            && cl.certificate_authority.is_some()
        {
            return Err(bad(&format!(
                "cluster {:?}: certificate-authority names a file; embed it as certificate-authority-data",
                c.name
            )));
        }
    }
    for u in &kc.auth_infos {
        let Some(a) = &u.auth_info else { continue };
        let refused = [
            (
                a.token_file.is_some(),
                "tokenFile names a file; embed the token",
            ),
            (
                a.client_certificate.is_some() || a.client_key.is_some(),
                "client-certificate/client-key name files; embed them as -data",
            ),
            (a.exec.is_some(), "exec plugins are not run"),
            (
                a.auth_provider.is_some(),
                "auth-provider plugins are not run",
            ),
        ];
        if let Some((_, why)) = refused.iter().find(|(on, _)| *on) {
            return Err(bad(&format!("user {:?}: {why}", u.name)));
        }
    }
    let namespace = kc
        .current_context
        .as_ref()
        .and_then(|cur| kc.contexts.iter().find(|c| &c.name == cur))
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| claim_namespace.to_string());
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| bad(&e.to_string()))?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    Ok((config, namespace))
}

/// Wakes the local claim named like each mirror (and HardwareData copy) that changes in the
/// remote namespace, and every claim using the link when the link fails (so a lost cluster is
/// reported at once). Runs until its link is dropped; a lost connection is retried with backoff.
async fn watch_mirrors(
    client: kube::Client,
    remote_ns: String,
    (local_ns, secret): (String, String),
    wake: UnboundedSender<ObjectRef<HostClaim>>,
    claims: Store<HostClaim>,
) {
    let mirrors = watcher(
        Api::<HostClaim>::namespaced(client.clone(), &remote_ns),
        watcher::Config::default().labels(REMOTE_MIRROR_LABEL),
    )
    .default_backoff()
    .touched_objects()
    .map(|r| r.map(|c| c.name_any()));
    let hardware = watcher(
        Api::<HardwareData>::namespaced(client, &remote_ns),
        Default::default(),
    )
    .default_backoff()
    .touched_objects()
    .map(|r| r.map(|c| c.name_any()));
    let mut both = std::pin::pin!(futures::stream::select(mirrors, hardware));
    let mut failing = false;
    while let Some(item) = both.next().await {
        let woken: Vec<ObjectRef<HostClaim>> = match item {
            Ok(name) => {
                failing = false;
                vec![ObjectRef::new(&name).within(&local_ns)]
            }
            Err(e) => {
                tracing::debug!(namespace = %local_ns, error = %e, "remote watch");
                if std::mem::replace(&mut failing, true) {
                    continue;
                }
                claims
                    .state()
                    .iter()
                    .filter(|c| {
                        c.namespace().as_deref() == Some(local_ns.as_str())
                            && c.annotations().get(REMOTE_KUBECONFIG) == Some(&secret)
                    })
                    .map(|c| ObjectRef::from_obj(c.as_ref()))
                    .collect()
            }
        };
        for r in woken {
            if wake.send(r).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str, cluster_extra: &str) -> String {
        format!(
            r#"
apiVersion: v1
kind: Config
clusters:
- name: a
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
{cluster_extra}
users:
- name: u
  user:
{user}
contexts:
- name: c
  context: {{cluster: a, user: u, namespace: tenant-a}}
current-context: c
"#
        )
    }

    #[tokio::test]
    async fn refuses_files_and_plugins() {
        let cases = [
            ("    tokenFile: /etc/shadow", "", "tokenFile"),
            (
                "    client-certificate: /x\n    client-key: /y",
                "",
                "client-certificate",
            ),
            (
                "    exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}",
                "",
                "exec",
            ),
            (
                "    auth-provider: {name: gcp, config: {}}",
                "",
                "auth-provider",
            ),
            (
                "    token: abc",
                "    certificate-authority: /etc/ca.crt",
                "certificate-authority",
            ),
        ];
        for (user, cluster, word) in cases {
            let err = client_config(&kubeconfig(user, cluster), "remote", "ns")
                .await
                .err()
                .unwrap_or_else(|| panic!("accepted {word}"));
            assert!(err.message.contains(word), "{word}: {err}");
            assert!(err.message.contains("\"remote\""), "{err}");
        }
    }

    #[tokio::test]
    async fn namespace_from_context_or_claim() {
        let (config, ns) = client_config(&kubeconfig("    token: abc", ""), "r", "claims")
            .await
            .unwrap();
        assert_eq!(ns, "tenant-a");
        assert_eq!(config.connect_timeout, Some(CONNECT_TIMEOUT));
        let without = kubeconfig("    token: abc", "").replace(", namespace: tenant-a", "");
        let (_, ns) = client_config(&without, "r", "claims").await.unwrap();
        assert_eq!(ns, "claims");
        let err = client_config("clusters: [", "r", "claims")
            .await
            .unwrap_err();
        assert!(err.message.contains("cannot be read"), "{err}");
    }
}
