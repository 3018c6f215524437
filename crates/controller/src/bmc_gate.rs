//! What stands between the controllers and each BMC: a limit on concurrent calls per BMC and a
//! circuit breaker, so one broken BMC costs its own hosts and nobody else.
//!
//! A BMC is keyed by its endpoint and system (`host:port/redfish/v1/Systems/1`): a Redfish
//! aggregator or a chassis manager serves many systems on one endpoint, and each system is one
//! server's management path. The breaker opens after `threshold` consecutive transport
//! failures (timeouts, refused or reset connections; a BMC that answers with an error is not
//! broken) and then lets one probe through per cooldown, doubling the cooldown while probes
//! fail. Its first cooldown is the host error backoff's base, so a host's own retries (which
//! back off faster) never wait on it: it protects the BMC from the sum of its callers (host
//! polls, BMCJobs, Rufio tasks) and answers them at once instead of after a timeout.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrometal_bmc::{BmcAddress, BmcError};
use ferrometal_provisioner::{ErrorKind, ProvisionerError};
use tokio::sync::Semaphore;

use crate::metrics::metrics;

/// The breaker of one BMC. Pure: the caller passes the time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Breaker {
    /// Consecutive transport failures.
    failures: u32,
    /// Open until then; `None` when closed.
    open_until: Option<Instant>,
    /// How many times in a row it opened (the cooldown doubles with each).
    opens: u32,
    /// A probe is in flight while open: everyone else is still refused.
    probing: bool,
}

/// What the breaker says to one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Admit {
    /// Go ahead (`probe`: the one call let through while open).
    Go { probe: bool },
    /// Refused; the BMC is tried again in this long.
    Refuse { retry_in: Duration, failures: u32 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct BreakerPolicy {
    /// 0: never open.
    pub threshold: u32,
    pub cooldown: Duration,
    pub max_cooldown: Duration,
}

impl Breaker {
    pub fn is_open(&self) -> bool {
        self.open_until.is_some()
    }

    pub fn admit(&mut self, now: Instant) -> Admit {
        match self.open_until {
            None => Admit::Go { probe: false },
            Some(until) if now >= until && !self.probing => {
                self.probing = true;
                Admit::Go { probe: true }
            }
            Some(until) => Admit::Refuse {
                retry_in: until.saturating_duration_since(now),
                failures: self.failures,
            },
        }
    }

    /// Records how a call that was let through ended; true when this opened the breaker.
    pub fn record(
        &mut self,
        now: Instant,
        probe: bool,
        transport_failure: bool,
        p: &BreakerPolicy,
    ) -> bool {
        if probe {
            self.probing = false;
        }
        if !transport_failure || p.threshold == 0 {
            *self = Breaker::default();
            return false;
        }
        self.failures = self.failures.saturating_add(1);
        // A failure of a call that started before the breaker opened does not extend it.
        let reopen = (self.open_until.is_none() && self.failures >= p.threshold) || probe;
        if !reopen {
            return false;
        }
        let was_open = self.open_until.is_some();
        let cooldown = p
            .cooldown
            .saturating_mul(1 << self.opens.min(16))
            .min(p.max_cooldown);
        self.opens = self.opens.saturating_add(1);
        self.open_until = Some(now + cooldown);
        !was_open
    }
}

/// An error a BMC call can end with, as far as the gate cares.
pub trait GateError {
    /// The BMC did not answer at all (refused or reset connection, timeout).
    fn is_transport_failure(&self) -> bool;
    /// The error for a call the gate refused without trying.
    fn refused(bmc: &str, message: String) -> Self;
}

impl GateError for ProvisionerError {
    fn is_transport_failure(&self) -> bool {
        // A BMC that answers every call with a server error is as broken as a silent one.
        matches!(self.kind, ErrorKind::Unreachable | ErrorKind::ServerError)
    }
    fn refused(bmc: &str, message: String) -> Self {
        ProvisionerError::new(ErrorKind::Unreachable, format!("BMC {bmc} {message}"))
    }
}

impl GateError for BmcError {
    fn is_transport_failure(&self) -> bool {
        matches!(
            self,
            BmcError::Timeout { .. } | BmcError::Unreachable { .. } | BmcError::Disconnected { .. }
        )
    }
    fn refused(bmc: &str, reason: String) -> Self {
        BmcError::Unreachable {
            bmc: bmc.to_string(),
            reason,
        }
    }
}

struct Bmc {
    permits: Arc<Semaphore>,
    breaker: Breaker,
}

/// Per-BMC limits and breakers, shared by every controller in the process.
pub struct BmcGate {
    per_bmc: usize,
    policy: BreakerPolicy,
    bmcs: Mutex<HashMap<String, Bmc>>,
}

impl BmcGate {
    pub fn new(per_bmc: usize, policy: BreakerPolicy) -> BmcGate {
        BmcGate {
            per_bmc: per_bmc.max(1),
            policy,
            bmcs: Mutex::default(),
        }
    }

    /// The key of a BMC: endpoint and system, never credentials.
    pub fn key(address: &BmcAddress) -> String {
        format!(
            "{}:{}{}",
            address.host,
            address.port,
            address.system_path.as_deref().unwrap_or("")
        )
    }

    /// BMCs whose breaker is open now.
    pub fn open_count(&self) -> usize {
        let bmcs = self.bmcs.lock().unwrap();
        bmcs.values().filter(|b| b.breaker.is_open()).count()
    }

    /// Runs `call` against the BMC `key` once a slot is free, unless its breaker is open.
    /// Waiting for a slot holds no reconcile worker when the caller runs detached.
    pub async fn run<T, E, F>(&self, key: &str, call: F) -> Result<T, E>
    where
        E: GateError,
        F: Future<Output = Result<T, E>>,
    {
        let (permits, probe) = {
            let mut bmcs = self.bmcs.lock().unwrap();
            let bmc = bmcs.entry(key.to_string()).or_insert_with(|| Bmc {
                permits: Arc::new(Semaphore::new(self.per_bmc)),
                breaker: Breaker::default(),
            });
            match bmc.breaker.admit(Instant::now()) {
                Admit::Go { probe } => (bmc.permits.clone(), probe),
                Admit::Refuse { retry_in, failures } => {
                    metrics().bmc_calls_refused.inc();
                    return Err(E::refused(
                        key,
                        format!(
                            "not tried: its last {failures} calls failed to connect or timed \
                             out; next attempt in {}s",
                            retry_in.as_secs().max(1)
                        ),
                    ));
                }
            }
        };
        let result = {
            let _slot = permits
                .acquire()
                .await
                .expect("the semaphore is never closed");
            let _busy = InFlight::enter();
            call.await
        };
        let transport_failure = matches!(&result, Err(e) if e.is_transport_failure());
        let mut bmcs = self.bmcs.lock().unwrap();
        if let Some(bmc) = bmcs.get_mut(key) {
            let was_open = bmc.breaker.is_open();
            if bmc
                .breaker
                .record(Instant::now(), probe, transport_failure, &self.policy)
            {
                metrics().bmc_circuits_opened.inc();
                metrics().bmc_circuits_open.inc();
            }
            if was_open && !bmc.breaker.is_open() {
                metrics().bmc_circuits_open.dec();
                tracing::info!("BMC answers again; its breaker is closed");
            }
            // Healthy and idle: nothing worth keeping (bounds the map by the busy BMCs).
            if bmc.breaker == Breaker::default()
                && bmc.permits.available_permits() == self.per_bmc
                && Arc::strong_count(&bmc.permits) == 1
            {
                bmcs.remove(key);
            }
        }
        result
    }
}

/// Counts BMC calls in flight on the gauge while alive.
struct InFlight;

impl InFlight {
    fn enter() -> InFlight {
        metrics().bmc_calls_in_flight.inc();
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics().bmc_calls_in_flight.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            threshold: 3,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_breaker_opens_after_consecutive_transport_failures_and_probes_once_per_cooldown() {
        let p = policy();
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut b = Breaker::default();
        // (time, outcome of a call let through: Some(transport failure?), expected admit)
        assert_eq!(b.admit(s(0)), Admit::Go { probe: false });
        assert!(!b.record(s(0), false, true, &p));
        assert!(
            !b.record(s(1), false, false, &p),
            "an answer resets the count"
        );
        for n in 2..4 {
            assert_eq!(b.admit(s(n)), Admit::Go { probe: false });
            assert!(!b.record(s(n), false, true, &p));
        }
        assert_eq!(b.admit(s(4)), Admit::Go { probe: false });
        assert!(
            b.record(s(4), false, true, &p),
            "the third in a row opens it"
        );
        assert_eq!(
            b.admit(s(5)),
            Admit::Refuse {
                retry_in: Duration::from_secs(9),
                failures: 3
            }
        );
        // Calls that started before it opened do not extend it.
        assert!(!b.record(s(6), false, true, &p));
        assert_eq!(b.admit(s(14)), Admit::Go { probe: true });
        // One probe at a time.
        assert!(matches!(b.admit(s(14)), Admit::Refuse { .. }));
        // The probe fails: open again, twice as long.
        assert!(!b.record(s(15), true, true, &p));
        assert_eq!(
            b.admit(s(15)),
            Admit::Refuse {
                retry_in: Duration::from_secs(20),
                failures: 5
            }
        );
        assert_eq!(b.admit(s(35)), Admit::Go { probe: true });
        assert!(!b.record(s(35), true, true, &p));
        assert_eq!(b.admit(s(75)), Admit::Go { probe: true }, "40 s now");
        assert!(!b.record(s(75), true, true, &p));
        assert!(
            matches!(b.admit(s(134)), Admit::Refuse { .. }),
            "capped at 60 s"
        );
        assert_eq!(b.admit(s(135)), Admit::Go { probe: true });
        // The probe succeeds: closed and forgotten.
        assert!(!b.record(s(135), true, false, &p));
        assert_eq!(b, Breaker::default());
        assert_eq!(b.admit(s(136)), Admit::Go { probe: false });
    }

    #[test]
    fn errors_the_bmc_answers_with_do_not_open_it() {
        let p = policy();
        let now = Instant::now();
        let mut b = Breaker::default();
        for _ in 0..10 {
            b.admit(now);
            b.record(now, false, false, &p);
        }
        assert!(!b.is_open());
    }

    fn unreachable() -> Result<(), ProvisionerError> {
        Err(ProvisionerError::new(ErrorKind::Unreachable, "timed out"))
    }

    #[tokio::test]
    async fn the_gate_refuses_an_open_bmc_at_once_and_leaves_the_others_alone() {
        let gate = BmcGate::new(2, policy());
        for _ in 0..3 {
            assert!(gate.run("a:443", async { unreachable() }).await.is_err());
        }
        assert_eq!(gate.open_count(), 1);
        let called = std::sync::atomic::AtomicBool::new(false);
        let refused = gate
            .run("a:443", async {
                called.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, ProvisionerError>(())
            })
            .await
            .unwrap_err();
        assert!(!called.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(refused.kind, ErrorKind::Unreachable);
        assert!(refused.message.contains("last 3 calls"), "{refused}");
        assert_eq!(
            gate.run("b:443", async { Ok::<_, ProvisionerError>(7) })
                .await
                .unwrap(),
            7
        );
    }

    #[tokio::test]
    async fn no_more_than_the_limit_run_at_once_against_one_bmc() {
        let gate = Arc::new(BmcGate::new(2, policy()));
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for i in 0..6 {
            let (gate, running, peak, mut released) = (
                gate.clone(),
                running.clone(),
                peak.clone(),
                released.clone(),
            );
            // Five against one BMC, one against another that must not wait for them.
            let key = if i == 5 { "other:443" } else { "one:443" };
            tasks.push(tokio::spawn(async move {
                gate.run(key, async {
                    if key == "one:443" {
                        let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                        let _ = released.wait_for(|r| *r).await;
                        running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok::<_, ProvisionerError>(key)
                })
                .await
            }));
        }
        // The other BMC's call finishes while all five here are held.
        let other = tasks.pop().unwrap().await.unwrap().unwrap();
        assert_eq!(other, "other:443");
        while running.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        release.send(true).unwrap();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(peak.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
