//! Leader election through a `coordination.k8s.io/v1` Lease, with client-go's rules: the
//! holder renews every retry period; a candidate takes the lease over only when the record
//! has not changed for a whole lease duration *by its own clock* (clocks of different
//! machines are never compared); a leader that could not renew within the renew deadline
//! stops leading. Every write carries the resourceVersion it decided on, so two candidates
//! can never both win.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

fn timeout_error() -> kube::Error {
    kube::Error::Service("renewing the lease took past the renew deadline".into())
}

/// Where the lease lives and how it is held.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// Unique per process: a restarted replica is a new candidate.
    pub identity: String,
    /// How long a silent holder keeps the lease (client-go's default: 15 s).
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long stops (10 s).
    pub renew_deadline: Duration,
    /// Between attempts to acquire or renew (2 s).
    pub retry_period: Duration,
}

impl LeaseConfig {
    pub fn new(namespace: &str, name: &str, identity: &str) -> LeaseConfig {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What one look at the lease leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// No lease yet: create it, holding it.
    Create,
    /// Ours: renew it.
    Renew,
    /// Free, released, or silent for a whole lease duration: take it over.
    TakeOver,
    /// Someone else holds it.
    Wait,
}

/// The decision, from the lease's holder, the duration it asks for and how long we have seen
/// it unchanged. Pure, so it is tested table-driven.
pub fn decide(
    lease: Option<(Option<&str>, Duration)>,
    me: &str,
    unchanged_for: Duration,
) -> Decision {
    match lease {
        None => Decision::Create,
        Some((Some(holder), _)) if holder == me => Decision::Renew,
        Some((None | Some(""), _)) => Decision::TakeOver,
        Some((Some(_), duration)) if unchanged_for >= duration => Decision::TakeOver,
        Some(_) => Decision::Wait,
    }
}

pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The lease record last seen (its resourceVersion) and since when, by our clock.
    observed: Mutex<Option<(String, Instant)>>,
}

impl Elector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: Mutex::new(None),
        }
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// One look at the lease, and the write it calls for. `Ok(true)`: we hold it now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = jiff::Timestamp::now();
        let me = self.config.identity.as_str();
        let current = self.api.get_opt(&self.config.name).await?;
        let unchanged_for = match &current {
            Some(lease) => {
                let rv = lease.metadata.resource_version.clone().unwrap_or_default();
                let mut observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
                match observed.as_ref() {
                    Some((seen, since)) if *seen == rv => since.elapsed(),
                    _ => {
                        *observed = Some((rv, Instant::now()));
                        Duration::ZERO
                    }
                }
            }
            None => Duration::ZERO,
        };
        let record = current.as_ref().map(|lease| {
            let spec = lease.spec.clone().unwrap_or_default();
            let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0) as u64;
            (spec.holder_identity, Duration::from_secs(seconds))
        });
        let decision = decide(
            record.as_ref().map(|(h, d)| (h.as_deref(), *d)),
            me,
            unchanged_for,
        );
        let duration_seconds = self.config.lease_duration.as_secs() as i32;
        let result = match (decision, current) {
            (Decision::Wait, _) => return Ok(false),
            (Decision::Create, _) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me.into()),
                        lease_duration_seconds: Some(duration_seconds),
                        acquire_time: Some(MicroTime(now)),
                        renew_time: Some(MicroTime(now)),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (decision, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                if decision == Decision::TakeOver {
                    spec.holder_identity = Some(me.into());
                    spec.acquire_time = Some(MicroTime(now));
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.lease_duration_seconds = Some(duration_seconds);
                spec.renew_time = Some(MicroTime(now));
                // The resourceVersion read above rides along: a write by anyone else since
                // makes this one fail with 409 instead of both of us leading.
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
            }
            (_, None) => return Ok(false),
        };
        match result {
            Ok(lease) => {
                let rv = lease.metadata.resource_version.unwrap_or_default();
                *self.observed.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((rv, Instant::now()));
                Ok(true)
            }
            // Another candidate wrote first.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Returns once this process holds the lease (never, if another keeps renewing it).
    pub async fn acquire(&self) {
        let mut waiting_logged = false;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(identity = %self.config.identity, lease = %self.config.name, "became the leader");
                    return;
                }
                Ok(false) => {
                    if !waiting_logged {
                        tracing::info!(identity = %self.config.identity, "another replica leads; standing by");
                        waiting_logged = true;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read or write the leader lease"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews until it cannot: returns when another replica took the lease or no renewal
    /// succeeded within the renew deadline. The caller must then stop acting.
    pub async fn hold(&self) {
        let mut renewed = Instant::now();
        loop {
            // Wake up in time to notice the deadline, not a retry period after it.
            let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
            tokio::time::sleep(self.config.retry_period.min(left)).await;
            let attempt = tokio::time::timeout(
                self.config.renew_deadline.saturating_sub(renewed.elapsed()),
                self.try_acquire_or_renew(),
            );
            match attempt.await.unwrap_or_else(|_| Err(timeout_error())) {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => {
                    tracing::error!(identity = %self.config.identity, "the lease was taken over; no longer leading");
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "cannot renew the leader lease"),
            }
            if renewed.elapsed() > self.config.renew_deadline {
                tracing::error!(deadline = ?self.config.renew_deadline, "the lease could not be renewed in time; no longer leading");
                return;
            }
        }
    }

    /// On a clean stop: leave the lease free so a standby takes over at once.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        if let Err(e) = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "could not release the leader lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let d = Duration::from_secs(15);
        let s = Duration::from_secs;
        for (lease, unchanged, want) in [
            (None, s(0), Decision::Create),
            (Some((Some("me"), d)), s(0), Decision::Renew),
            (Some((Some("me"), d)), s(100), Decision::Renew),
            (Some((Some("other"), d)), s(0), Decision::Wait),
            (Some((Some("other"), d)), s(14), Decision::Wait),
            (Some((Some("other"), d)), s(15), Decision::TakeOver),
            (Some((None, d)), s(0), Decision::TakeOver),
            (Some((Some(""), d)), s(0), Decision::TakeOver),
            // A released lease asks for one second only.
            (Some((Some("other"), s(1))), s(1), Decision::TakeOver),
        ] {
            assert_eq!(
                decide(lease, "me", unchanged),
                want,
                "{lease:?} {unchanged:?}"
            );
        }
    }
}
