//! The server as a whole: shared state, start-up, the HTTP listener and the kubeconfig.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use futures::FutureExt;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::audit::Audit;
use crate::authn::{self, Authenticator, PeerIdentity, TokenSigner};
use crate::authz::PolicyCache;
use crate::files;
use crate::objects::WriteOpts;
use crate::registry::{self, Registry};
use crate::shares::ConnOwner;
use crate::state::{Core, Limits};
use crate::status::ApiError;
use crate::store::{HistoryLimits, Store, StoreConfig, StoreError, Volatile};
use crate::tls;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Holds the database, the token, the kubeconfig and TLS material.
    pub data_dir: PathBuf,
    /// Require the bearer token (the default). Turning it off is only allowed on loopback,
    /// which [`ApiServer::serve`] enforces.
    pub auth: bool,
    /// Serve HTTPS with a certificate generated at first start. On by default: kubectl never
    /// sends a bearer token over plain HTTP, so with authentication on, TLS is what makes the
    /// written kubeconfig usable.
    pub tls: bool,
    /// Extra DNS names for the generated certificate.
    pub tls_names: Vec<String>,
    /// Number of change events kept for watches; older resourceVersions get 410 Gone.
    pub history: usize,
    /// Bound on the object JSON those events hold on to.
    pub history_bytes: usize,
    /// Where Events are kept and how many: in memory only (see [`EventLimits`]).
    pub events: EventLimits,
    /// Transport and request bounds (kube-apiserver's defaults).
    pub limits: Limits,
    /// Extra checks on writes of particular custom resources (admission webhooks' role).
    pub validators: Vec<crate::state::Validator>,
}

impl ServerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            auth: true,
            tls: true,
            tls_names: Vec::new(),
            history: 20_000,
            history_bytes: 8 << 20,
            events: EventLimits::default(),
            limits: Limits::default(),
            validators: Vec::new(),
        }
    }
}

/// Events (`core/v1` and `events.k8s.io/v1`, one storage) are kept in memory only, never in
/// the store file: a restart loses them, and nothing else. They are served like any object
/// (list, get, watch, writes, selectors, RBAC, audit) and bounded: past a count the Events
/// written longest ago are deleted, and each is deleted a TTL after its last write (as
/// kube-apiserver's `--event-ttl`). Watchers see those deletions.
#[derive(Debug, Clone)]
pub struct EventLimits {
    /// Most Events one namespace holds.
    pub per_namespace: usize,
    /// Most Events in all namespaces together.
    pub total: usize,
    /// How long an Event lives after its last write.
    pub ttl: std::time::Duration,
    /// Changes kept for Event watches (their own history, apart from the objects').
    pub history: usize,
    /// Bound on the Event JSON that history holds on to.
    pub history_bytes: usize,
}

impl Default for EventLimits {
    fn default() -> Self {
        EventLimits {
            per_namespace: 10_000,
            total: 50_000,
            ttl: std::time::Duration::from_secs(3600),
            history: 20_000,
            history_bytes: 4 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("data directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("bootstrapping: {0}")]
    Bootstrap(#[from] ApiError),
    #[error("refusing to run without authentication on non-loopback address {0}")]
    InsecureNonLoopback(SocketAddr),
    #[error(
        "data directory {path} is in use by another ferrometal serve ({holder}); stop it or choose another --data-dir"
    )]
    DataDirInUse { path: PathBuf, holder: String },
}

/// The embedded API server. Cheap to share behind an `Arc`; dropping it does not stop a running
/// `serve` (call [`ApiServer::shutdown`]).
pub struct ApiServer {
    core: Arc<Core>,
    router: Router,
    shutdown_tx: watch::Sender<bool>,
    config: ServerConfig,
    token: String,
    tls: Option<(Arc<rustls::ServerConfig>, String)>,
    /// The data directory's lock, held until shutdown or drop.
    dir_lock: std::sync::Mutex<Option<std::fs::File>>,
}

/// Takes `DIR/lock` (an advisory lock the kernel drops when the process dies, however it
/// dies) so a second server on the same directory stops before it touches anything in it.
fn lock_data_dir(dir: &Path) -> Result<std::fs::File, ServerError> {
    use std::io::{Read, Seek, Write};
    let path = dir.join("lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "a process that holds its lock".to_string(),
                pid => format!("pid {pid}"),
            };
            return Err(ServerError::DataDirInUse {
                path: dir.to_path_buf(),
                holder,
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path)(e)),
    }
    // Only the lock holder writes its pid; the next one reads it for the message.
    file.set_len(0).map_err(io_err(&path))?;
    file.rewind().map_err(io_err(&path))?;
    writeln!(file, "{}", std::process::id()).map_err(io_err(&path))?;
    Ok(file)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ServerError + '_ {
    move |source| ServerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl ApiServer {
    /// Opens (or initialises) the data directory: store, token, TLS material, built-in
    /// namespaces, and starts the garbage collector.
    pub async fn open(config: ServerConfig) -> Result<ApiServer, ServerError> {
        let dir = &config.data_dir;
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        // The store holds Secrets in the clear: keep the directory to its owner.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(io_err(dir))?;
        }
        let dir_lock = lock_data_dir(dir)?;
        let token_path = dir.join("token");
        let token = files::load_or_create_secret(&token_path, 32).map_err(io_err(&token_path))?;
        let key_path = dir.join("sa.key");
        let signer = TokenSigner::load_or_create(&key_path).map_err(io_err(&key_path))?;
        let audit_dir = dir.join("audit");
        let audit = Audit::open(&audit_dir).map_err(io_err(&audit_dir))?;
        let tls = if config.tls {
            let files = tls::ensure(dir, &config.tls_names)?;
            let ca = std::fs::read_to_string(&files.ca).map_err(io_err(&files.ca))?;
            Some((tls::server_config(&files)?, ca))
        } else {
            None
        };
        let events = &config.events;
        let store = Store::open(
            &dir.join("store.redb"),
            StoreConfig {
                history: HistoryLimits {
                    events: config.history,
                    bytes: config.history_bytes,
                },
                volatile: Volatile {
                    resources: vec![registry::EVENT_KEY.to_string()],
                    per_namespace: events.per_namespace.max(1),
                    total: events.total.max(1),
                    ttl: events.ttl,
                    history: HistoryLimits {
                        events: events.history,
                        bytes: events.history_bytes,
                    },
                },
            },
        )?;
        let (shutdown_tx, shutdown) = watch::channel(false);
        let core = Arc::new(Core {
            store,
            registry: Registry::default(),
            authn: Authenticator::new(config.auth.then(|| token.clone()), signer),
            policy: PolicyCache::default(),
            audit: Some(audit),
            limits: config.limits.clone(),
            in_flight: Default::default(),
            connections: Default::default(),
            shutdown,
            gc: Notify::new(),
            validators: config.validators.clone(),
        });
        core.rebuild_registry();
        bootstrap(&core).await?;
        core.policy.rebuild(&core.store);
        tokio::spawn(crate::gc::run(core.clone()));
        let router = Router::new()
            .fallback(dispatch_catching)
            .layer(axum::middleware::from_fn_with_state(
                core.clone(),
                crate::filters::gate,
            ))
            .with_state(core.clone());
        Ok(ApiServer {
            core,
            router,
            shutdown_tx,
            config,
            token,
            tls,
            dir_lock: std::sync::Mutex::new(Some(dir_lock)),
        })
    }

    /// A client whose requests reach this server without a socket, authenticated as the
    /// server itself. Default namespace `default`.
    pub fn client(&self) -> kube::Client {
        crate::inprocess::client(self.router.clone())
    }

    /// Installs the objects of a multi-document YAML manifest (roles and the like): each is
    /// created when missing; see `Core::install` for what happens to existing ones.
    pub async fn install_yaml(&self, manifest: &str, manager: &str) -> Result<(), ServerError> {
        let objects = crate::yaml::documents(manifest)
            .map_err(|e| ServerError::Bootstrap(ApiError::bad_request(e)))?;
        Ok(self.core.install(objects, manager).await?)
    }

    /// The axum router (authentication included), for embedding in another server.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.config.data_dir.join("kubeconfig")
    }

    /// The current global revision (latest resourceVersion).
    pub fn revision(&self) -> u64 {
        self.core.store.revision()
    }

    /// `https://addr` with TLS, else `http://addr`.
    pub fn url_for(&self, addr: SocketAddr) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{addr}")
    }

    /// Writes `DATA_DIR/kubeconfig` (mode 0600) pointing at `url` with the token (and the CA
    /// with TLS); returns its path.
    pub fn write_kubeconfig(&self, url: &str) -> Result<PathBuf, ServerError> {
        let user = if self.config.auth {
            json!({ "token": self.token })
        } else {
            json!({})
        };
        let ca = self.tls.as_ref().map(|(_, ca)| ca.as_str());
        let yaml = crate::kubeconfig::document(url, ca, user, "default");
        let path = self.kubeconfig_path();
        files::write_private(&path, yaml.as_bytes()).map_err(io_err(&path))?;
        Ok(path)
    }

    /// Serves HTTP(S) on `listener` until [`ApiServer::shutdown`].
    pub async fn serve(&self, listener: TcpListener) -> Result<(), ServerError> {
        let local = listener
            .local_addr()
            .map_err(io_err(&self.config.data_dir))?;
        if !self.config.auth && !local.ip().is_loopback() {
            return Err(ServerError::InsecureNonLoopback(local));
        }
        let acceptor = self
            .tls
            .as_ref()
            .map(|(cfg, _)| tokio_rustls::TlsAcceptor::from(cfg.clone()));
        let mut shutdown = self.core.shutdown.clone();
        let limits = self.core.limits.clone();
        let connections = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
        tracing::info!(url = %self.url_for(local), "serving");
        loop {
            // At the cap, stop accepting: new clients wait in the backlog, not in memory.
            let permit = tokio::select! {
                p = connections.clone().acquire_owned() => p.expect("never closed"),
                _ = shutdown.changed() => return Ok(()),
            };
            let (stream, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = shutdown.changed() => return Ok(()),
            };
            let _ = stream.set_nodelay(true);
            let router = self.router.clone();
            let acceptor = acceptor.clone();
            let shutdown = self.core.shutdown.clone();
            let limits = limits.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let header_timeout = limits.header_read_timeout;
                match acceptor {
                    Some(acc) => {
                        let tls = match tokio::time::timeout(
                            limits.tls_handshake_timeout,
                            acc.accept(stream),
                        )
                        .await
                        {
                            Ok(Ok(tls)) => tls,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        };
                        // A verified client certificate names the user of every request on
                        // this connection.
                        let peer = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .and_then(|c| authn::identity_from_cert(c.as_ref()))
                            .map(Arc::new);
                        let router = router
                            .layer(axum::Extension(PeerIdentity(peer)))
                            .layer(axum::Extension(ConnOwner::default()));
                        serve_conn(TokioIo::new(tls), router, shutdown, header_timeout).await
                    }
                    None => {
                        let router = router.layer(axum::Extension(ConnOwner::default()));
                        serve_conn(TokioIo::new(stream), router, shutdown, header_timeout).await
                    }
                }
            });
        }
    }

    /// Binds `addr`, writes the kubeconfig for it and serves until shutdown.
    pub async fn run(&self, addr: SocketAddr) -> Result<(), ServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(io_err(&self.config.data_dir))?;
        let local = listener
            .local_addr()
            .map_err(io_err(&self.config.data_dir))?;
        self.write_kubeconfig(&self.url_for(local))?;
        self.serve(listener).await
    }

    /// Stops serving (the listener, open connections and watches end) and closes the store,
    /// after the write in progress, so the data directory can be opened again at once.
    pub async fn shutdown(&self) {
        self.shutdown_tx.send_replace(true);
        self.core.store.close().await;
        self.dir_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}

async fn serve_conn<I>(
    io: I,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
    header_read_timeout: std::time::Duration,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = hyper_util::service::TowerToHyperService::new(router);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Runs the handler, turning a panic (a bug) into a 500 rather than a dropped connection.
async fn dispatch_catching(
    state: axum::extract::State<Arc<Core>>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match std::panic::AssertUnwindSafe(crate::handlers::dispatch(state, req))
        .catch_unwind()
        .await
    {
        Ok(r) => r,
        Err(_) => ApiError::internal("internal error while serving the request").into_response(),
    }
}

/// The RBAC objects every cluster has (kube-apiserver's bootstrap policy, reduced to what this
/// server serves).
const BOOTSTRAP_RBAC: &str = include_str!("bootstrap-rbac.yaml");

/// Creates the namespaces every cluster has, and the default RBAC objects.
async fn bootstrap(core: &Core) -> Result<(), ApiError> {
    create_namespaces(core).await?;
    let objects = crate::yaml::documents(BOOTSTRAP_RBAC).expect("bootstrap RBAC parses");
    core.install(objects, "ferrometal").await
}

impl Core {
    /// Creates each object that does not exist yet; one that exists and carries
    /// `rbac.authorization.kubernetes.io/autoupdate: "true"` is brought back to `objects`'
    /// content (as kube-apiserver reconciles its default roles at start). Anything else an
    /// admin changed is left alone.
    pub async fn install(
        &self,
        objects: Vec<serde_json::Value>,
        manager: &str,
    ) -> Result<(), ApiError> {
        let snap = self.registry.snapshot();
        let opts = WriteOpts {
            manager: manager.into(),
            ..Default::default()
        };
        for obj in objects {
            let av = obj["apiVersion"].as_str().unwrap_or_default();
            let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
            let kind = obj["kind"].as_str().unwrap_or_default();
            let Some(res) = snap
                .resources
                .iter()
                .find(|r| r.group == group && r.version == version && r.kind == kind)
                .cloned()
            else {
                return Err(ApiError::internal(format!(
                    "cannot install {av} {kind}: not served"
                )));
            };
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let Some(current) = self.store.get(&res.key, &ns, &name) else {
                match self.create(&res, &ns, obj, &opts).await {
                    Ok(_) => {}
                    Err(e) if e.code == 409 => {}
                    Err(e) => return Err(e),
                }
                continue;
            };
            let current = current.value();
            let autoupdate = current
                .pointer("/metadata/annotations/rbac.authorization.kubernetes.io~1autoupdate")
                .and_then(serde_json::Value::as_str)
                == Some("true");
            let differs = ["rules", "aggregationRule", "subjects", "roleRef"]
                .iter()
                .any(|k| current.get(*k) != obj.get(*k));
            if autoupdate && current.get("roleRef") != obj.get("roleRef") {
                // roleRef is immutable: the binding is replaced, as kube-apiserver's
                // reconciler does.
                match self.delete(&res, &ns, &name, &Default::default()).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
                self.create(&res, &ns, obj, &opts).await?;
            } else if autoupdate && differs {
                let mut new = obj;
                new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
                self.update(&res, &ns, &name, new, &opts).await?;
            }
        }
        Ok(())
    }
}

async fn create_namespaces(core: &Core) -> Result<(), ApiError> {
    let snap = core.registry.snapshot();
    let ns = snap
        .find("", "v1", "namespaces")
        .expect("namespaces are built in")
        .clone();
    let opts = WriteOpts {
        manager: "ferrometal".into(),
        ..Default::default()
    };
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        if core.store.get(registry::NAMESPACE_KEY, "", name).is_some() {
            continue;
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match core.create(&ns, "", obj, &opts).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
