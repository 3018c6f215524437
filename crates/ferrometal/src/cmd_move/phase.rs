//! One phase of the host move run for every host, at most `--concurrency` hosts at a time, and
//! its progress lines: one when the phase starts, one every few seconds while it runs, one with
//! the counts when it ends. A host that fails is named on a line of its own (by the step), so is
//! anything unusual about one host (a note); everything else is only counted.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::StreamExt as _;

use super::common::{CrashHook, progress};

/// How often a running phase says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What one host's step came to.
pub(super) enum Outcome {
    /// Done; counted under each label (e.g. "paused", "Secret{s} created": `{s}` is "s" unless
    /// the count is 1).
    Done(Vec<String>),
    /// Failed; the step has named the host and the error already.
    Failed,
}

impl Outcome {
    pub(super) fn done(label: impl Into<String>) -> Outcome {
        Outcome::Done(vec![label.into()])
    }
}

/// Counts of one phase, in the order labels first appeared.
#[derive(Default)]
struct Tally {
    labels: Vec<String>,
    counts: BTreeMap<String, usize>,
    done: usize,
    failed: usize,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        self.done += 1;
        match outcome {
            Outcome::Done(labels) => {
                for l in labels {
                    let n = self.counts.entry(l.clone()).or_default();
                    if *n == 0 {
                        self.labels.push(l);
                    }
                    *n += 1;
                }
            }
            Outcome::Failed => self.failed += 1,
        }
    }

    fn counts(&self) -> String {
        let mut parts: Vec<String> = self
            .labels
            .iter()
            .map(|l| {
                let n = self.counts[l];
                format!("{n} {}", l.replace("{s}", if n == 1 { "" } else { "s" }))
            })
            .collect();
        parts.push(format!("{} failed", self.failed));
        parts.join(", ")
    }
}

/// Runs `step` on each of `items`, `limit` at a time, between a line announcing `phase` and a
/// line with its counts. The crash hook fires after the Nth host finished (others may be in
/// flight then, as they would be in a real crash) and after the last.
pub(super) async fn run<I, F, Fut>(
    phase: &'static str,
    items: Vec<I>,
    limit: usize,
    crash: &Option<CrashHook>,
    step: F,
) where
    F: FnMut(I) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let total = items.len();
    let started = Instant::now();
    progress(
        phase,
        &format!("{total} hosts, {} at a time", limit.min(total)),
        "",
    );
    let mut tally = Tally::default();
    let mut running = futures::stream::iter(items)
        .map(step)
        .buffer_unordered(limit.max(1));
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tokio::select! {
            next = running.next() => match next {
                Some(outcome) => {
                    tally.add(outcome);
                    CrashHook::object_done(crash, phase, tally.done);
                }
                None => break,
            },
            _ = tick.tick() => progress(
                phase,
                &format!(
                    "{} of {total} after {:.1}s: {}",
                    tally.done,
                    started.elapsed().as_secs_f64(),
                    tally.counts()
                ),
                "",
            ),
        }
    }
    progress(
        phase,
        &format!(
            "{total} of {total} in {:.1}s: {}",
            started.elapsed().as_secs_f64(),
            tally.counts()
        ),
        "",
    );
    CrashHook::phase_done(crash, phase);
}

/// At most `max` keys of a list, then how many more: for lines naming many hosts.
pub(super) fn some_of(keys: &[String], max: usize) -> String {
    if keys.len() <= max {
        return keys.join(", ");
    }
    format!("{} and {} more", keys[..max].join(", "), keys.len() - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_item_once_at_most_limit_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let in_flight = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let mut items: Vec<usize> = vec![0; 40];
        run("test", items.iter_mut().collect(), 4, &None, |n| {
            let (in_flight, peak) = (&in_flight, &peak);
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                *n += 1;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Outcome::done("counted")
            }
        })
        .await;
        assert!(items.iter().all(|n| *n == 1), "{items:?}");
        assert_eq!(peak.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn tally_and_some_of() {
        let mut t = Tally::default();
        t.add(Outcome::done("paused"));
        t.add(Outcome::Done(vec![
            "paused".into(),
            "Secret{s} created".into(),
        ]));
        t.add(Outcome::Done(vec!["Secret{s} created".into()]));
        t.add(Outcome::Failed);
        assert_eq!(t.counts(), "2 paused, 2 Secrets created, 1 failed");
        t.add(Outcome::done("host{s} taken over"));
        assert!(t.counts().contains("1 host taken over"), "{}", t.counts());
        let keys: Vec<String> = (0..5).map(|i| format!("ns/h{i}")).collect();
        assert_eq!(some_of(&keys[..2], 3), "ns/h0, ns/h1");
        assert_eq!(some_of(&keys, 3), "ns/h0, ns/h1, ns/h2 and 2 more");
    }
}
