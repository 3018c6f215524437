//! Prometheus metrics. Labels are low cardinality: never host names or BMC addresses.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CategoryLabels {
    pub category: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `completed` or `failed`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: String,
    pub provisioner: String,
}

pub type PhaseHistograms = Family<PhaseLabels, Histogram, fn() -> Histogram>;

fn phase_histogram() -> Histogram {
    // 0.1 s to ~27 min.
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

pub struct Metrics {
    pub reconciles: Counter,
    pub reconcile_errors: Family<CategoryLabels, Counter>,
    pub hosts: Family<StateLabels, Gauge>,
    pub reconcile_duration: Histogram,
    pub claim_reconciles: Counter,
    /// Hosts bound to HostClaims (each successful binding).
    pub claims_bound: Counter,
    /// BMCJobs that ended, by outcome.
    pub jobs_finished: Family<OutcomeLabels, Counter>,
    /// Time from a BMCJob task's start to its end (sent and observed).
    pub job_task_duration: Histogram,
    /// BMC calls running now (past the per-BMC limit, off the reconcile workers).
    pub bmc_calls_in_flight: Gauge,
    /// BMC calls refused at once because the BMC's breaker is open.
    pub bmc_calls_refused: Counter,
    /// Times a BMC's breaker opened.
    pub bmc_circuits_opened: Counter,
    /// BMCs whose breaker is open now.
    pub bmc_circuits_open: Gauge,
    /// Seconds per phase of agent work (boot media, ramdisk boot, cleaning, download+write...).
    pub provision_phase_seconds: PhaseHistograms,
    registry: Registry,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("ferrometal");
        let reconciles = Counter::default();
        let reconcile_errors = Family::<CategoryLabels, Counter>::default();
        let hosts = Family::<StateLabels, Gauge>::default();
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "host_reconciles",
            "BareMetalHost reconciles",
            reconciles.clone(),
        );
        registry.register(
            "host_reconcile_errors",
            "BareMetalHost reconcile errors by category",
            reconcile_errors.clone(),
        );
        registry.register(
            "hosts",
            "BareMetalHosts per provisioning state",
            hosts.clone(),
        );
        registry.register(
            "host_reconcile_duration_seconds",
            "Time spent in one BareMetalHost reconcile",
            reconcile_duration.clone(),
        );
        let claim_reconciles = Counter::default();
        let claims_bound = Counter::default();
        registry.register(
            "claim_reconciles",
            "HostClaim reconciles",
            claim_reconciles.clone(),
        );
        registry.register(
            "claim_bindings",
            "Hosts bound to HostClaims",
            claims_bound.clone(),
        );
        let jobs_finished = Family::<OutcomeLabels, Counter>::default();
        let job_task_duration = Histogram::new(exponential_buckets(0.05, 2.0, 14));
        registry.register(
            "bmcjobs_finished",
            "BMCJobs that ended, by outcome",
            jobs_finished.clone(),
        );
        registry.register(
            "bmcjob_task_duration_seconds",
            "Time from a BMCJob task's start until the BMC showed its effect",
            job_task_duration.clone(),
        );
        let bmc_calls_in_flight = Gauge::default();
        let bmc_calls_refused = Counter::default();
        let bmc_circuits_opened = Counter::default();
        let bmc_circuits_open = Gauge::default();
        registry.register(
            "bmc_calls_in_flight",
            "BMC calls running now",
            bmc_calls_in_flight.clone(),
        );
        registry.register(
            "bmc_calls_refused",
            "BMC calls refused at once because the BMC's breaker was open",
            bmc_calls_refused.clone(),
        );
        registry.register(
            "bmc_circuits_opened",
            "Times a BMC's breaker opened after consecutive connection failures or timeouts",
            bmc_circuits_opened.clone(),
        );
        registry.register(
            "bmc_circuits_open",
            "BMCs whose breaker is open now",
            bmc_circuits_open.clone(),
        );
        let provision_phase_seconds: PhaseHistograms =
            Family::new_with_constructor(phase_histogram);
        registry.register(
            "provision_phase_seconds",
            "Time per phase of an inspection, provisioning or cleaning by the deploy agent",
            provision_phase_seconds.clone(),
        );
        Metrics {
            provision_phase_seconds,
            bmc_calls_in_flight,
            bmc_calls_refused,
            bmc_circuits_opened,
            bmc_circuits_open,
            jobs_finished,
            job_task_duration,
            claim_reconciles,
            claims_bound,
            reconciles,
            reconcile_errors,
            hosts,
            reconcile_duration,
            registry,
        }
    }

    pub fn error(&self, category: &str) {
        self.reconcile_errors
            .get_or_create(&CategoryLabels {
                category: category.to_string(),
            })
            .inc();
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// The metrics in the Prometheus text format, for a `/metrics` endpoint.
pub fn metrics_text() -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, metrics().registry())
        .expect("writing to a String cannot fail");
    out
}
