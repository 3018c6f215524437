//! What every step shares: the backoff, one call per reconcile, and the conditions the
//! decision finishes with.

use super::*;

#[test]
fn backoff_is_exponential_jittered_and_capped() {
    let t = timing();
    assert_eq!(backoff(&t, 1, 0.5), Duration::from_secs(10));
    assert_eq!(backoff(&t, 2, 0.5), Duration::from_secs(20));
    assert_eq!(backoff(&t, 4, 0.5), Duration::from_secs(80));
    assert_eq!(backoff(&t, 30, 0.5), Duration::from_secs(600));
    assert!(backoff(&t, 3, 0.0) < backoff(&t, 3, 0.99));
    assert!(backoff(&t, 30, 0.99) <= Duration::from_secs(600));
}

#[test]
fn one_call_per_reconcile() {
    // A second pass never asks for a different call; if the first call's outcome leads
    // somewhere that needs another, the decision requeues at once instead.
    let f = fx(S::Available);
    let d = decide(&f.input(Some((Call::Detach, Outcome::Done))));
    assert_eq!(d.call, None);
}

#[test]
fn conditions_follow_state() {
    let f = with(fx(S::Preparing), |_| {});
    let d = decide(&f.input(Some((Call::Prepare, Outcome::Done))));
    let s = st(&d);
    // Available: available for provisioning, but not Ready (metal3: Ready means provisioned).
    let available = condition(&s.conditions, "AvailableForProvisioning").unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_str()),
        ("True", "Available")
    );
    let ready = condition(&s.conditions, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NotProvisioned")
    );
    let provisioned = condition(&s.conditions, "Provisioned").unwrap();
    assert_eq!(provisioned.status, "False");
    assert!(s.last_updated.as_deref() == Some("2026-01-01T00:00:00Z"));
}
