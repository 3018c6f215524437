//! The state every layer of a request shares: the store, the served resources, the
//! authenticator, the compiled RBAC policy, the audit log and the limits. Defined apart from
//! the server that builds it so each layer can import it without importing the layers above.

use tokio::sync::{Notify, watch};

use crate::audit::Audit;
use crate::authn::Authenticator;
use crate::authz::PolicyCache;
use crate::registry::Registry;
use crate::request::Query;
use crate::status::ApiError;
use crate::store::Store;

/// Everything request handlers share.
pub struct Core {
    pub store: Store,
    pub registry: Registry,
    pub authn: Authenticator,
    /// The compiled RBAC policy, rebuilt on every RBAC write.
    pub policy: PolicyCache,
    pub audit: Option<Audit>,
    pub limits: Limits,
    /// Requests in flight, for [`Limits::max_in_flight`].
    pub in_flight: std::sync::atomic::AtomicUsize,
    /// Connections held per user, for [`Limits::max_connections_per_user`].
    pub connections: std::sync::Arc<crate::shares::UserConnections>,
    pub shutdown: watch::Receiver<bool>,
    /// Pokes the garbage collector after deletions.
    pub gc: Notify,
    /// Checks run on writes of particular custom resources, after their schema.
    pub validators: Vec<Validator>,
}

/// `(field, message)` per problem of an object about to be written (`old`: the stored one).
pub type ValidateFn = std::sync::Arc<
    dyn Fn(&serde_json::Value, Option<&serde_json::Value>) -> Vec<(String, String)> + Send + Sync,
>;

/// A check on every create and update (not status writes) of one custom resource, run after
/// its schema: what a validating admission webhook is to a kube-apiserver.
#[derive(Clone)]
pub struct Validator {
    pub group: String,
    /// The plural resource name, e.g. `baremetalhosts`.
    pub resource: String,
    pub check: ValidateFn,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Validator({}.{})", self.resource, self.group)
    }
}

/// What one client can hold of the server: connections, requests in flight, and how long a
/// slow client may take at each stage.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Connections one user may hold (each watch holds one); a quarter of
    /// [`Limits::max_connections`] by default, so one identity never holds them all.
    pub max_connections_per_user: usize,
    /// Requests being served at once (watches excepted, as kube-apiserver's
    /// max-requests-inflight); more get 429 with Retry-After.
    pub max_in_flight: usize,
    /// A request (watches excepted) that takes longer ends with 504.
    pub request_timeout: std::time::Duration,
    /// A TLS handshake that takes longer is dropped.
    pub tls_handshake_timeout: std::time::Duration,
    /// A client that does not finish sending request headers in time is disconnected.
    pub header_read_timeout: std::time::Duration,
}

impl Limits {
    /// What users other than `system:masters` may hold of the connections.
    pub fn shares(&self) -> crate::shares::Shares {
        crate::shares::Shares {
            per_user: self.max_connections_per_user,
            total: self
                .max_connections
                .saturating_sub(crate::shares::RESERVED)
                .max(1),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 4096,
            max_connections_per_user: 1024,
            max_in_flight: 600,
            request_timeout: std::time::Duration::from_secs(60),
            tls_handshake_timeout: std::time::Duration::from_secs(10),
            header_read_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// How long a read waits for a `resourceVersion` the store has not reached yet, as
/// kube-apiserver's watch cache does before answering "Too large resource version".
const TOO_LARGE_RV_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl Core {
    /// Waits until the store has reached the request's `resourceVersion`: a get, list or watch
    /// must not answer from before the version it was given, nor hang on one that may never
    /// come (504 after the wait).
    pub async fn wait_for_resource_version(&self, q: &Query) -> Result<(), ApiError> {
        let Some(rv) = crate::request::resource_version(q)? else {
            return Ok(());
        };
        self.store
            .wait_for(rv, TOO_LARGE_RV_WAIT)
            .await
            .map_err(|current| ApiError::too_large_resource_version(rv, current))
    }
}
