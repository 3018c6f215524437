//! Publishing host Events (events.k8s.io/v1), folding repeats into a series.
//!
//! kube-rs' `Recorder` does the same but keeps a copy of every Event it created for six minutes
//! and scans all of them on each publish: thousands of hosts emitting a handful of Events each
//! made that cache one of the largest things in the process. Here a repeat is recognised by a
//! hash of what identifies it, and only the Event's name and count are remembered.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use ferrometal_api::{BareMetalHost, HostClaim, HostClaimStatus};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::sync::Mutex;

/// One Event about an object (a host, a claim, a job), as a reconcile decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEvent {
    pub warning: bool,
    /// PascalCase, low cardinality.
    pub reason: String,
    pub note: String,
}

/// A repeat within this long after the last one joins its series (kube-rs and client-go use
/// the same window).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// How often expired series are dropped from memory.
const PRUNE_EVERY: Duration = Duration::from_secs(30);
/// Most series remembered at once. Past it the least recently seen are forgotten (a repeat of
/// one of those starts a new Event, as after the window): with thousands of hosts each
/// announcing a handful of Events, the window alone would keep one entry per Event for six
/// minutes. The API server keeps about as many Events per namespace, so a forgotten series
/// has usually lost its Event anyway.
const MAX_SERIES: usize = 10_000;

struct Series {
    /// The Event object the repeats are counted on.
    name: String,
    count: i32,
    last: Instant,
}

struct Seen {
    series: HashMap<u64, Series>,
    pruned: Instant,
}

impl Seen {
    fn remember(&mut self, key: u64, series: Series) {
        self.series.insert(key, series);
        if self.series.len() > MAX_SERIES {
            self.forget_oldest();
        }
    }

    /// Drops the least recently seen series down to three quarters of [`MAX_SERIES`], so this
    /// scan runs once per quarter of it.
    fn forget_oldest(&mut self) {
        let keep = MAX_SERIES * 3 / 4;
        let mut times: Vec<Instant> = self.series.values().map(|s| s.last).collect();
        if times.len() <= keep {
            return;
        }
        let cut = times.len() - keep;
        let (_, oldest_kept, _) = times.select_nth_unstable(cut);
        let oldest_kept = *oldest_kept;
        self.series.retain(|_, s| s.last >= oldest_kept);
        self.series.shrink_to(MAX_SERIES + 1);
    }
}

pub struct EventPublisher {
    client: kube::Client,
    controller: String,
    seen: Mutex<Seen>,
}

impl EventPublisher {
    pub fn new(client: kube::Client, controller: String) -> EventPublisher {
        EventPublisher {
            client,
            controller,
            seen: Mutex::new(Seen {
                series: HashMap::new(),
                pruned: Instant::now(),
            }),
        }
    }

    pub async fn publish(&self, host: &BareMetalHost, events: &[HostEvent]) {
        self.publish_about(host, events).await
    }

    /// Events about any object (a host, a claim).
    pub async fn publish_about<K>(&self, object: &K, events: &[HostEvent])
    where
        K: Resource<DynamicType = ()>,
    {
        if events.is_empty() {
            return;
        }
        let mut regarding = object.object_ref(&());
        // Without the resourceVersion a repeated Event (a retry) folds into a series instead of
        // piling up as new objects.
        regarding.resource_version = None;
        for e in events {
            if let Err(err) = self.publish_one(&regarding, e).await {
                // An Event is a courtesy; losing one must not fail the reconcile.
                tracing::warn!(reason = %e.reason, error = %err, "publishing Event failed");
                crate::metrics::metrics().error("event");
            }
        }
    }

    async fn publish_one(
        &self,
        regarding: &ObjectReference,
        e: &HostEvent,
    ) -> Result<(), kube::Error> {
        let ns = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let key = series_key(regarding, e);
        let now = Instant::now();
        // The lock is not held across API calls: one host's reconciles never run concurrently,
        // so the same series is never published twice at once.
        let repeat = {
            let mut seen = self.seen.lock().expect("event series lock");
            if now.duration_since(seen.pruned) >= PRUNE_EVERY {
                seen.series
                    .retain(|_, s| now.duration_since(s.last) < SERIES_WINDOW);
                seen.pruned = now;
            }
            seen.series
                .get(&key)
                .filter(|s| now.duration_since(s.last) < SERIES_WINDOW)
                .map(|s| (s.name.clone(), s.count + 1))
        };
        if let Some((name, count)) = repeat {
            let patch = serde_json::json!({
                "series": EventSeries {
                    count,
                    last_observed_time: MicroTime(jiff::Timestamp::now()),
                }
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.remember(key, name, count, now);
                    return Ok(());
                }
                // Expired or deleted meanwhile: start a new Event below.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        let event = self.new_event(regarding, e, &ns);
        let name = event.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &event).await?;
        self.remember(key, name, 1, now);
        Ok(())
    }

    fn remember(&self, key: u64, name: String, count: i32, last: Instant) {
        self.seen
            .lock()
            .expect("event series lock")
            .remember(key, Series { name, count, last });
    }

    fn new_event(&self, regarding: &ObjectReference, e: &HostEvent, ns: &str) -> Event {
        let now = jiff::Timestamp::now();
        Event {
            action: Some(e.reason.clone()),
            reason: Some(e.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            // The API rejects notes over 1 kB.
            note: Some(e.note.chars().take(1000).collect()),
            metadata: ObjectMeta {
                namespace: Some(ns.to_string()),
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(&self.controller),
                    now.as_nanosecond()
                )),
                ..Default::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.controller.clone()),
            type_: Some(if e.warning { "Warning" } else { "Normal" }.into()),
            ..Default::default()
        }
    }
}

/// A Normal (not Warning) Event.
pub fn event(reason: &str, note: impl Into<String>) -> HostEvent {
    HostEvent {
        warning: false,
        reason: reason.into(),
        note: note.into(),
    }
}

/// Events on the claim when a condition changes to something a tenant acts on or waits for:
/// the bind (naming the host), the image in place, errors and recoveries. The steps on the
/// expected way (the first sync, provisioning under way) are in the status only, as Events are
/// for news (the bind was also announced twice before).
pub async fn announce(
    claim: &HostClaim,
    old: &HostClaimStatus,
    new: &HostClaimStatus,
    publisher: &EventPublisher,
) {
    publisher.publish_about(claim, &claim_news(old, new)).await;
}

/// The Events for a claim's status going from `old` to `new`.
fn claim_news(old: &HostClaimStatus, new: &HostClaimStatus) -> Vec<HostEvent> {
    use ferrometal_api::claim::conditions as c;
    let mut events = Vec::new();
    for cond in &new.conditions {
        let before = old.condition(&cond.type_);
        if before.is_some_and(|b| b.status == cond.status && b.reason == cond.reason) {
            continue;
        }
        let routine = match cond.type_.as_str() {
            c::READY => true,
            c::SYNCHRONIZED => cond.status == "True" && before.is_none(),
            c::PROVISIONED => {
                cond.status != "True"
                    && matches!(cond.reason.as_str(), c::PROVISIONING | c::NO_IMAGE)
            }
            _ => false,
        };
        if routine {
            continue;
        }
        let note = match (&new.bare_metal_host, cond.message.is_empty()) {
            (Some(host), _) if cond.type_ == c::ASSOCIATED && cond.status == "True" => {
                format!("bound to host {}", host.name)
            }
            (_, false) => cond.message.clone(),
            (_, true) => format!("{} is {}", cond.type_, cond.status),
        };
        events.push(HostEvent {
            warning: cond.status != "True"
                && matches!(
                    cond.reason.as_str(),
                    "HostError"
                        | c::MISSING_BARE_METAL_HOST
                        | c::USER_DATA_SYNC_FAILURE
                        | c::NETWORK_DATA_SYNC_FAILURE
                        | c::META_DATA_SYNC_FAILURE
                ),
            reason: cond.reason.clone(),
            note,
        });
    }
    events
}

/// What makes two Events repeats of each other: the object, type, reason and note, as
/// client-go's events recorder keys them. Without the note, "task 2: boot=pxe" folded into
/// "TaskStarted (x4) task 1: power=off" and hid what happened.
fn series_key(regarding: &ObjectReference, e: &HostEvent) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    regarding.uid.hash(&mut h);
    regarding.namespace.hash(&mut h);
    regarding.name.hash(&mut h);
    e.warning.hash(&mut h);
    e.reason.hash(&mut h);
    e.note.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claim's way from unbound to provisioned: the bind (naming the host) and the image in
    /// place are announced, the steps between are not; an error and its recovery are.
    #[test]
    fn a_claim_announces_news_not_routine() {
        use ferrometal_api::claim::NamespacedRef;
        use ferrometal_api::claim::conditions as c;
        let cond = |t: &str, status: &str, reason: &str| ferrometal_api::Condition {
            type_: t.into(),
            status: status.into(),
            reason: reason.into(),
            ..Default::default()
        };
        let st = |conds: Vec<ferrometal_api::Condition>, bound: bool| HostClaimStatus {
            conditions: conds,
            bare_metal_host: bound.then(|| NamespacedRef {
                namespace: "infra".into(),
                name: "bm-1".into(),
            }),
            ..Default::default()
        };
        let unbound = st(
            vec![
                cond(c::ASSOCIATED, "False", c::NO_BARE_METAL_HOST),
                cond(c::READY, "False", c::NO_BARE_METAL_HOST),
            ],
            false,
        );
        let bound = |provisioned: ferrometal_api::Condition, sync: &str| {
            st(
                vec![
                    cond(c::ASSOCIATED, "True", c::BARE_METAL_HOST_ASSOCIATED),
                    cond(
                        c::SYNCHRONIZED,
                        sync,
                        if sync == "True" {
                            c::CONFIGURATION_SYNCED
                        } else {
                            c::USER_DATA_SYNC_FAILURE
                        },
                    ),
                    provisioned.clone(),
                    cond(c::READY, &provisioned.status, &provisioned.reason),
                ],
                true,
            )
        };
        let provisioning = bound(cond(c::PROVISIONED, "False", c::PROVISIONING), "True");
        let provisioned = bound(cond(c::PROVISIONED, "True", "Provisioned"), "True");
        let failed = bound(cond(c::PROVISIONED, "False", "HostError"), "True");
        let unsynced = bound(cond(c::PROVISIONED, "True", "Provisioned"), "False");
        let reasons = |old: &HostClaimStatus, new: &HostClaimStatus| -> Vec<(String, bool)> {
            claim_news(old, new)
                .into_iter()
                .map(|e| (e.reason, e.warning))
                .collect()
        };
        let first = claim_news(&HostClaimStatus::default(), &unbound);
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].reason, c::NO_BARE_METAL_HOST);
        let bind = claim_news(&unbound, &provisioning);
        assert_eq!(bind.len(), 1, "{bind:?}");
        assert_eq!(bind[0].reason, c::BARE_METAL_HOST_ASSOCIATED);
        assert_eq!(bind[0].note, "bound to host bm-1");
        assert_eq!(
            reasons(&provisioning, &provisioned),
            [("Provisioned".to_string(), false)]
        );
        assert_eq!(
            reasons(&provisioning, &failed),
            [("HostError".to_string(), true)]
        );
        // Back on the way after an error: the error stays the last word until it is provisioned.
        assert!(reasons(&failed, &provisioning).is_empty());
        assert_eq!(
            reasons(&provisioned, &unsynced),
            [(c::USER_DATA_SYNC_FAILURE.to_string(), true)]
        );
        // A recovered sync is news.
        assert_eq!(
            reasons(&unsynced, &provisioned),
            [(c::CONFIGURATION_SYNCED.to_string(), false)]
        );
    }

    #[test]
    fn series_memory_is_bounded_and_keeps_the_most_recent() {
        let start = Instant::now();
        let mut seen = Seen {
            series: HashMap::new(),
            pruned: start,
        };
        let total = MAX_SERIES * 3;
        for i in 0..total {
            let series = Series {
                name: format!("event-{i}"),
                count: 1,
                last: start + Duration::from_millis(i as u64),
            };
            seen.remember(i as u64, series);
            assert!(seen.series.len() <= MAX_SERIES);
        }
        let newest = (total - 1) as u64;
        assert!(seen.series.contains_key(&newest));
        assert!(
            !seen.series.contains_key(&0),
            "the oldest are forgotten first"
        );
        let oldest_kept = seen.series.keys().min().copied().unwrap();
        let kept = seen.series.len() as u64;
        assert_eq!(oldest_kept, newest + 1 - kept, "everything newer is kept");
    }

    fn reference(uid: &str, name: &str) -> ObjectReference {
        ObjectReference {
            uid: Some(uid.into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    fn event(reason: &str, note: &str, warning: bool) -> HostEvent {
        HostEvent {
            reason: reason.into(),
            note: note.into(),
            warning,
        }
    }

    #[test]
    fn repeats_share_a_key_and_others_do_not() {
        let a = reference("u1", "a");
        let same = series_key(&a, &event("Registered", "one", false));
        assert_eq!(same, series_key(&a, &event("Registered", "one", false)));
        assert_ne!(same, series_key(&a, &event("Registered", "two", false)));
        assert_ne!(same, series_key(&a, &event("Registered", "one", true)));
        assert_ne!(
            same,
            series_key(&a, &event("InspectionComplete", "one", false))
        );
        assert_ne!(
            same,
            series_key(&reference("u2", "a"), &event("Registered", "one", false))
        );
        assert_ne!(
            same,
            series_key(&reference("u1", "b"), &event("Registered", "one", false))
        );
    }
}
