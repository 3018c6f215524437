//! Why a reconcile failed, and how soon to try again. One type for every controller here (hosts,
//! claims, remote claims, BMCJobs, Rufio): host and claim errors are not failures (they go to
//! the object's status), so what is left is always the Kubernetes API or serializing for it.

use std::time::Duration;

use kube::runtime::controller::Action;

/// Why a reconcile failed (host errors are not failures: they go to the host's status).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("serializing: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Error {
    /// Low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(e)) if e.code == 409 => "api_conflict",
            Error::Kube(_) => "api",
            Error::Serialize(_) => "serialize",
        }
    }
}

/// A conflict means the cache was behind our own write: look again almost at once.
pub fn retry_after(error: &Error) -> Action {
    match error {
        Error::Kube(kube::Error::Api(e)) if e.code == 409 => {
            Action::requeue(Duration::from_millis(200))
        }
        _ => Action::requeue(Duration::from_secs(2)),
    }
}

pub fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A short random delay, so claims that collided on one host retry apart.
pub fn jitter() -> Duration {
    Duration::from_millis(100 + (rand::random::<u64>() % 900))
}

/// A call on an object that may have gone meanwhile: gone is `None`, not an error.
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(t) => Ok(Some(t)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}
