//! The host state machine as a pure function: (spec, status, annotations, observations) →
//! one provisioner call to make, or the status, metadata and Events that follow from the call's
//! outcome.
//!
//! A reconcile runs [`decide`] once without an outcome. If the decision names a [`Call`], the
//! reconciler makes exactly that call and runs [`decide`] again with the outcome in
//! [`Input::last`]; the second decision is the one applied. A decision that asks to run again at
//! once (a state change) may be folded by the reconciler into the next one in the same
//! reconcile, as long as no second BMC call is needed. Everything here is deterministic (time
//! and jitter come in through the input), so it is tested table-driven without a server.

use std::collections::BTreeMap;
use std::time::Duration;

use ferrometal_api::annotations::{self as ann, DeleteAction, Operation, RebootMode};
use ferrometal_api::{
    BareMetalHostSpec, BareMetalHostStatus, CredentialsStatus, ErrorType, HardwareDetails,
    InspectionMode, OperationMetric, OperationalStatus, ProvisioningState,
};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::{ErrorKind, PowerOffMode, ProvisionerError, Registration};
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::jiff::Timestamp;

use crate::conditions;
use crate::config::Timing;
use crate::events::HostEvent;
use crate::secrets::CredentialsObservation;

/// What this process remembers about a host between reconciles. Not persisted: after a restart
/// every host is registered again (backends forget too), and provisioned hosts are adopted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memo {
    /// Registered with the provisioner using this credentials Secret version.
    pub credentials_version: String,
    /// A provisioned host was adopted (or provisioned) by this process.
    pub adopted: bool,
    /// When the power state was last observed.
    pub power_checked: Option<Timestamp>,
}

/// The one provisioner call a reconcile makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    HasCapacity,
    Register { credentials_changed: bool },
    Inspect { refresh: bool },
    Prepare,
    Provision,
    Adopt,
    Deprovision,
    PowerState,
    PowerOn,
    PowerOff(PowerOffMode),
    Operation(Operation),
    Detach,
    Delete,
}

/// The result of a [`Call`].
#[derive(Debug, Clone, PartialEq)]
// Built once per reconcile and moved straight into the decision: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Capacity(bool),
    Registered(Registration),
    Inspected(Option<HardwareDetails>),
    Power(PowerState),
    Done,
    Waiting {
        requeue_after: Duration,
        reason: String,
    },
    Failed(ProvisionerError),
}

#[derive(Debug, Clone)]
pub struct Input<'a> {
    pub namespace: &'a str,
    pub spec: &'a BareMetalHostSpec,
    pub status: Option<&'a BareMetalHostStatus>,
    pub annotations: &'a BTreeMap<String, String>,
    pub generation: Option<i64>,
    pub deleting: bool,
    pub has_finalizer: bool,
    pub credentials: CredentialsObservation,
    pub memo: Option<&'a Memo>,
    /// The call made in this reconcile and its outcome (second pass only).
    pub last: Option<(Call, Outcome)>,
    pub now: Timestamp,
    /// In `[0, 1)`: spreads polls and backoffs.
    pub jitter: f64,
    pub timing: &'a Timing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerChange {
    Add,
    Remove,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub enum MemoChange {
    #[default]
    Keep,
    Set(Memo),
    Forget,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Make this call and decide again with its outcome; nothing else in this decision counts.
    pub call: Option<Call>,
    /// The new status, when it differs from the current one.
    pub status: Option<BareMetalHostStatus>,
    pub remove_annotations: Vec<String>,
    pub finalizer: Option<FinalizerChange>,
    pub events: Vec<HostEvent>,
    /// Create or update the host's HardwareData with these details.
    pub hardware_data: Option<HardwareDetails>,
    pub memo: MemoChange,
    /// `None`: wait for a change to the host.
    pub requeue: Option<Duration>,
    /// Low-cardinality cause when this reconcile recorded a host error (for metrics).
    pub error_category: Option<&'static str>,
}

/// Why the engine stopped early.
enum Halt {
    Call(Call),
    Stop,
}

type Flow = Result<(), Halt>;

const NOW: Duration = Duration::ZERO;

/// The state machine. See the module docs for the two-pass protocol.
pub fn decide(input: &Input<'_>) -> Decision {
    // Paused, or a BMCJob holds the host: no status write, no call, no requeue.
    if input.annotations.contains_key(ann::PAUSED) || input.annotations.contains_key(ann::JOB) {
        return Decision::default();
    }
    let mut engine = Engine::new(input);
    match engine.run() {
        Ok(()) | Err(Halt::Stop) => engine.finish(),
        Err(Halt::Call(call)) => Decision {
            call: Some(call),
            ..Decision::default()
        },
    }
}

/// Whether a host's status is empty (new, or moved without status).
fn status_is_empty(status: Option<&BareMetalHostStatus>) -> bool {
    status
        .is_none_or(|s| s.provisioning.state == ProvisioningState::None && s.last_updated.is_none())
}

/// The capped exponential backoff for the n-th consecutive error (n ≥ 1).
pub fn backoff(timing: &Timing, error_count: i32, jitter: f64) -> Duration {
    let exp = (error_count.max(1) - 1).min(20) as u32;
    let raw = timing.backoff_base.saturating_mul(1u32 << exp);
    let capped = raw.min(timing.backoff_cap);
    // ±10% so hosts that failed together do not retry together.
    capped
        .mul_f64(0.9 + 0.2 * jitter.clamp(0.0, 1.0))
        .min(timing.backoff_cap)
}

fn jittered(d: Duration, jitter: f64) -> Duration {
    d.mul_f64(0.9 + 0.2 * jitter.clamp(0.0, 1.0))
}

fn rfc3339(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

fn pascal(state: ProvisioningState) -> String {
    state
        .as_str()
        .split(' ')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Op {
    Register,
    Inspect,
    Provision,
    Deprovision,
}

struct Engine<'a, 'b> {
    input: &'a Input<'b>,
    st: BareMetalHostStatus,
    memo: Option<Memo>,
    d: Decision,
    outcome_used: bool,
}

impl<'a, 'b> Engine<'a, 'b> {
    fn new(input: &'a Input<'b>) -> Self {
        Engine {
            input,
            st: input.status.cloned().unwrap_or_default(),
            memo: input.memo.cloned(),
            d: Decision::default(),
            outcome_used: false,
        }
    }

    fn now(&self) -> String {
        rfc3339(self.input.now)
    }

    fn state(&self) -> ProvisioningState {
        self.st.provisioning.state
    }

    fn spec(&self) -> &'b BareMetalHostSpec {
        self.input.spec
    }

    fn annotation(&self, key: &str) -> Option<&'b String> {
        self.input.annotations.get(key)
    }

    fn remove_annotation(&mut self, key: &str) {
        if !self.d.remove_annotations.iter().any(|k| k == key) {
            self.d.remove_annotations.push(key.to_string());
        }
    }

    fn event(&mut self, reason: &str, note: impl Into<String>) {
        self.d.events.push(HostEvent {
            warning: false,
            reason: reason.into(),
            note: note.into(),
        });
    }

    fn warning(&mut self, reason: &str, note: impl Into<String>) {
        self.d.events.push(HostEvent {
            warning: true,
            reason: reason.into(),
            note: note.into(),
        });
    }

    fn requeue(&mut self, after: Duration) -> Flow {
        self.d.requeue = Some(after);
        Err(Halt::Stop)
    }

    fn wait_for_change(&mut self) -> Flow {
        self.d.requeue = None;
        Err(Halt::Stop)
    }

    /// Asks for `call`: in the first pass this stops the engine so the reconciler can make the
    /// call; in the second pass it yields the outcome. A second, different call in one reconcile
    /// is never made: the engine stops and asks to be run again at once.
    fn call(&mut self, call: Call) -> Result<Outcome, Halt> {
        match &self.input.last {
            None => Err(Halt::Call(call)),
            Some((made, outcome)) if !self.outcome_used && *made == call => {
                self.outcome_used = true;
                Ok(outcome.clone())
            }
            Some(_) => {
                self.d.requeue = Some(NOW);
                Err(Halt::Stop)
            }
        }
    }

    fn memo_mut(&mut self) -> &mut Memo {
        self.memo.get_or_insert_with(Memo::default)
    }

    fn inspection_disabled(&self) -> bool {
        self.spec().inspection_mode == Some(InspectionMode::Disabled)
            || self
                .annotation(ann::INSPECT)
                .is_some_and(|v| v == "disabled")
    }

    fn has_deployment(&self) -> bool {
        self.spec()
            .image
            .as_ref()
            .is_some_and(|i| !i.url.is_empty())
            || self.spec().custom_deploy.is_some()
    }

    fn has_bmc(&self) -> bool {
        self.spec()
            .bmc
            .as_ref()
            .is_some_and(|b| !b.address.is_empty())
    }

    fn is_detached(&self) -> bool {
        self.st.operational_status == OperationalStatus::Detached
            && self.annotation(ann::DETACHED).is_some()
    }

    fn credentials_version(&self) -> Option<String> {
        match &self.input.credentials {
            CredentialsObservation::Found { version, .. } => Some(version.clone()),
            _ => None,
        }
    }

    fn credentials_status(&self) -> Option<CredentialsStatus> {
        match &self.input.credentials {
            CredentialsObservation::Found { secret, version } => Some(CredentialsStatus {
                credentials: Some(SecretReference {
                    name: Some(secret.clone()),
                    namespace: Some(self.input.namespace.to_string()),
                }),
                credentials_version: Some(version.clone()),
            }),
            _ => None,
        }
    }

    fn metric(&mut self, op: Op) -> &mut OperationMetric {
        let h = &mut self.st.operation_history;
        match op {
            Op::Register => &mut h.register,
            Op::Inspect => &mut h.inspect,
            Op::Provision => &mut h.provision,
            Op::Deprovision => &mut h.deprovision,
        }
    }

    fn started(&mut self, op: Op) -> bool {
        let m = self.metric(op);
        m.start.is_some() && m.end.is_none()
    }

    fn finish_op(&mut self, op: Op) {
        let now = self.now();
        self.metric(op).end = Some(now);
    }

    fn transition(&mut self, next: ProvisioningState) {
        let old = self.state();
        if old == next {
            return;
        }
        self.st.provisioning.state = next;
        let now = self.now();
        let reset = |m: &mut OperationMetric| {
            m.start = None;
            m.end = None;
        };
        match next {
            ProvisioningState::Registering => {
                self.st.operation_history.register = OperationMetric {
                    start: Some(now),
                    end: None,
                }
            }
            ProvisioningState::Inspecting => reset(&mut self.st.operation_history.inspect),
            ProvisioningState::Provisioning => reset(&mut self.st.operation_history.provision),
            ProvisioningState::Deprovisioning => reset(&mut self.st.operation_history.deprovision),
            _ => {}
        }
        if self.st.operational_status == OperationalStatus::Delayed {
            self.st.operational_status = OperationalStatus::Ok;
        }
        let from = if old == ProvisioningState::None {
            "new".to_string()
        } else {
            old.to_string()
        };
        self.event(
            &pascal(next),
            format!("state changed from {from} to {next}"),
        );
    }

    /// Move to `next` and run again at once.
    fn go(&mut self, next: ProvisioningState) -> Flow {
        self.transition(next);
        self.requeue(NOW)
    }

    fn fail(&mut self, error_type: ErrorType, message: String, category: &'static str) -> Flow {
        self.st.error_type = Some(error_type);
        self.st.error_message = message.clone();
        self.st.error_count = self.st.error_count.saturating_add(1);
        self.st.operational_status = OperationalStatus::Error;
        self.d.error_category = Some(category);
        let reason: String = error_type
            .as_str()
            .split(' ')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        self.warning(&reason, message);
        let after = backoff(self.input.timing, self.st.error_count, self.input.jitter);
        self.requeue(after)
    }

    fn fail_with(&mut self, error_type: ErrorType, e: &ProvisionerError) -> Flow {
        if e.kind == ErrorKind::Unsupported {
            return self.blocked(error_type, e);
        }
        self.fail(error_type, e.message.clone(), e.kind.as_str())
    }

    /// A failure retrying cannot fix (the provisioner cannot do what the spec asks, or lacks
    /// configuration): recorded once, with the Blocked condition naming what is needed, and
    /// looked at again only after a spec change, a restart or the longest backoff.
    fn blocked(&mut self, error_type: ErrorType, e: &ProvisionerError) -> Flow {
        if self.st.error_type != Some(error_type) || self.st.error_message != e.message {
            self.st.error_type = Some(error_type);
            self.st.error_message = e.message.clone();
            self.st.error_count = self.st.error_count.max(1);
            self.st.operational_status = OperationalStatus::Error;
            self.warning("Blocked", e.message.clone());
        }
        self.d.error_category = Some(e.kind.as_str());
        let now = rfc3339(self.input.now);
        conditions::set_blocked(
            &mut self.st,
            "NotSupported",
            &e.message,
            self.input.generation,
            &now,
        );
        self.requeue(self.input.timing.backoff_cap)
    }

    fn clear_error(&mut self) {
        conditions::clear_blocked(&mut self.st);
        self.st.error_type = None;
        self.st.error_message.clear();
        self.st.error_count = 0;
        if self.st.operational_status == OperationalStatus::Error {
            self.st.operational_status = OperationalStatus::Ok;
        }
    }

    fn waiting(&mut self, requeue_after: Duration) -> Flow {
        self.requeue(requeue_after)
    }

    /// An outcome that does not fit the call (a backend bug): look again shortly.
    fn unexpected(&mut self) -> Flow {
        self.requeue(self.input.timing.delayed_retry)
    }

    fn registration_error_type(&self) -> ErrorType {
        match self.state() {
            ProvisioningState::Provisioned | ProvisioningState::ExternallyProvisioned => {
                ErrorType::ProvisionedRegistration
            }
            _ => ErrorType::Registration,
        }
    }

    // ---- the reconcile, in metal3's order ----

    fn run(&mut self) -> Flow {
        if self.input.deleting && !self.input.has_finalizer {
            // Nothing of ours holds the object; it is going away.
            return self.wait_for_change();
        }
        self.status_annotation()?;
        self.hardware_details_annotation();
        if !self.input.deleting && !self.input.has_finalizer {
            self.d.finalizer = Some(FinalizerChange::Add);
        }
        self.check_credentials()?;
        self.initiate_delete()?;
        self.detached()?;
        self.ensure_registered()?;
        self.handle_state()
    }

    fn status_annotation(&mut self) -> Flow {
        let Some(value) = self.annotation(ann::STATUS) else {
            return Ok(());
        };
        self.remove_annotation(ann::STATUS);
        if !status_is_empty(self.input.status) {
            return Ok(());
        }
        match serde_json::from_str::<BareMetalHostStatus>(value) {
            Ok(restored) => {
                self.st = restored;
                self.event(
                    "StatusRestored",
                    format!("status restored from the {} annotation", ann::STATUS),
                );
                self.requeue(NOW)
            }
            Err(e) => {
                self.warning(
                    "InvalidAnnotation",
                    format!("annotation {}: not a host status: {e}", ann::STATUS),
                );
                Ok(())
            }
        }
    }

    fn hardware_details_annotation(&mut self) {
        let Some(value) = self.annotation(ann::HARDWARE_DETAILS) else {
            return;
        };
        self.remove_annotation(ann::HARDWARE_DETAILS);
        if self.st.hardware.is_some() && !self.inspection_disabled() {
            return;
        }
        match serde_json::from_str::<HardwareDetails>(value) {
            Ok(details) => {
                self.st.hardware = Some(details.clone());
                self.d.hardware_data = Some(details);
                self.event(
                    "HardwareDetailsSet",
                    format!(
                        "hardware details set from the {} annotation",
                        ann::HARDWARE_DETAILS
                    ),
                );
            }
            Err(e) => self.warning(
                "InvalidAnnotation",
                format!(
                    "annotation {}: not hardware details: {e}",
                    ann::HARDWARE_DETAILS
                ),
            ),
        }
    }

    fn check_credentials(&mut self) -> Flow {
        if !self.has_bmc()
            || matches!(
                self.state(),
                ProvisioningState::None | ProvisioningState::Unmanaged
            )
        {
            return Ok(());
        }
        let ns = self.input.namespace;
        let message = match &self.input.credentials {
            CredentialsObservation::NotNeeded | CredentialsObservation::Found { .. } => {
                return Ok(());
            }
            CredentialsObservation::Missing { secret } => {
                format!("BMC credentials Secret {ns}/{secret} not found")
            }
            CredentialsObservation::MissingKey { secret, key } => {
                format!("BMC credentials Secret {ns}/{secret} has no {key:?} key")
            }
        };
        if self.input.deleting {
            // Without credentials the BMC cannot be reached; do not hold the deletion forever.
            self.warning(
                "DeletedWithoutBMC",
                format!("{message}; removed without power-off or clean-up"),
            );
            self.transition(ProvisioningState::Deleting);
            return self.remove_finalizer();
        }
        self.fail(self.registration_error_type(), message, "credentials")
    }

    fn remove_finalizer(&mut self) -> Flow {
        self.d.finalizer = Some(FinalizerChange::Remove);
        self.d.memo = MemoChange::Forget;
        self.memo = None;
        self.event("Deleted", "host removed from management");
        self.wait_for_change()
    }

    fn initiate_delete(&mut self) -> Flow {
        if !self.input.deleting {
            return Ok(());
        }
        if self.is_detached() {
            let delay = self
                .annotation(ann::DETACHED)
                .and_then(|v| ann::parse_detached(v).ok())
                .is_some_and(|d| d.delete_action == DeleteAction::Delay);
            if delay {
                return self.requeue(self.input.timing.detached_recheck);
            }
            // Detached: the provisioner already forgot it; no deprovision, no power change.
            self.transition(ProvisioningState::Deleting);
            return self.remove_finalizer();
        }
        use ProvisioningState as S;
        let next = match self.state() {
            S::None | S::Registering | S::Unmanaged => S::Deleting,
            S::Provisioning | S::Provisioned if self.st.error_count > 3 => {
                S::PoweringOffBeforeDelete
            }
            S::Provisioning | S::Provisioned => S::Deprovisioning,
            S::MatchProfile
            | S::Inspecting
            | S::Preparing
            | S::Ready
            | S::Available
            | S::ExternallyProvisioned => S::PoweringOffBeforeDelete,
            S::Deprovisioning | S::PoweringOffBeforeDelete | S::Deleting => return Ok(()),
        };
        self.go(next)
    }

    fn detached(&mut self) -> Flow {
        if self.input.deleting {
            return Ok(());
        }
        let Some(value) = self.annotation(ann::DETACHED) else {
            return Ok(());
        };
        let parsed = match ann::parse_detached(value) {
            Ok(p) => p,
            Err(e) => {
                self.warning("InvalidAnnotation", e.to_string());
                return Ok(());
            }
        };
        if self.st.operational_status == OperationalStatus::Detached {
            return self.requeue(self.input.timing.detached_recheck);
        }
        let allowed = parsed.force
            || matches!(
                self.state(),
                ProvisioningState::Provisioned
                    | ProvisioningState::ExternallyProvisioned
                    | ProvisioningState::Available
                    | ProvisioningState::Ready
            );
        if !allowed || !self.has_bmc() {
            // metal3: the host carries on until it reaches a state where detaching is allowed.
            return Ok(());
        }
        match self.call(Call::Detach)? {
            Outcome::Done => {
                self.clear_error();
                self.st.operational_status = OperationalStatus::Detached;
                self.memo = None;
                self.event(
                    "Detached",
                    "host removed from the provisioner; power and disks untouched",
                );
                self.requeue(self.input.timing.detached_recheck)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => {
                // No "detach error" in metal3's schema: the host failed to leave its
                // provisioner, a registration error; removing the annotation re-registers it.
                let message = format!("detach failed: {}", e.message);
                self.fail(self.registration_error_type(), message, e.kind.as_str())
            }
            _ => self.unexpected(),
        }
    }

    fn ensure_registered(&mut self) -> Flow {
        use ProvisioningState as S;
        if !self.has_bmc()
            || matches!(
                self.state(),
                S::None | S::Unmanaged | S::Registering | S::Deleting
            )
        {
            return Ok(());
        }
        let Some(version) = self.credentials_version() else {
            return Ok(());
        };
        let reattach = self.st.operational_status == OperationalStatus::Detached;
        let good_changed = self
            .st
            .good_credentials
            .as_ref()
            .and_then(|g| g.credentials_version.as_ref())
            .is_some_and(|v| *v != version);
        let memo_version = self.memo.as_ref().map(|m| m.credentials_version.clone());
        let memo_changed = memo_version.as_ref().is_some_and(|v| *v != version);
        let registration_error = matches!(
            self.st.error_type,
            Some(ErrorType::Registration | ErrorType::ProvisionedRegistration)
        );
        if memo_version.as_deref() == Some(version.as_str())
            && !good_changed
            && !reattach
            && !registration_error
        {
            return Ok(());
        }
        let changed = good_changed || memo_changed;
        self.st.tried_credentials = self.credentials_status();
        match self.call(Call::Register {
            credentials_changed: changed,
        })? {
            Outcome::Registered(r) => {
                self.registered(&r, &version);
                if reattach {
                    self.st.operational_status = OperationalStatus::Ok;
                    self.event("Attached", "host registered again after detach");
                }
                if changed {
                    self.event(
                        "CredentialsChanged",
                        "registered again with the changed credentials",
                    );
                }
                self.requeue(NOW)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => {
                if self.input.deleting && self.st.error_count >= 3 {
                    self.warning(
                        "DeletedWithoutBMC",
                        format!("{}; giving up on BMC clean-up", e.message),
                    );
                    return self.go(ProvisioningState::Deleting);
                }
                self.fail_with(self.registration_error_type(), &e)
            }
            _ => self.unexpected(),
        }
    }

    /// Records a successful registration.
    fn registered(&mut self, r: &Registration, version: &str) {
        self.clear_error();
        self.st.good_credentials = self.credentials_status();
        self.st.tried_credentials = self.credentials_status();
        if !r.provisioner_id.is_empty() {
            self.st.provisioning.id = r.provisioner_id.clone();
        }
        self.observe_power(r.power);
        let now = self.input.now;
        self.memo = Some(Memo {
            credentials_version: version.to_string(),
            adopted: false,
            power_checked: Some(now),
        });
    }

    fn observe_power(&mut self, p: PowerState) {
        match p {
            PowerState::On | PowerState::PoweringOff => self.st.powered_on = true,
            PowerState::Off | PowerState::PoweringOn => self.st.powered_on = false,
            PowerState::Unknown => {}
        }
    }

    fn handle_state(&mut self) -> Flow {
        use ProvisioningState as S;
        match self.state() {
            S::None => {
                if self.has_bmc() {
                    self.go(S::Registering)
                } else {
                    self.go(S::Unmanaged)
                }
            }
            S::Unmanaged => {
                if self.has_bmc() {
                    self.go(S::Registering)
                } else {
                    self.wait_for_change()
                }
            }
            S::Registering => self.registering(),
            S::MatchProfile => self.go(S::Preparing),
            S::Inspecting => self.inspecting(),
            S::Preparing => self.preparing(),
            S::Ready | S::Available => self.available(),
            S::Provisioning => self.provisioning(),
            S::Provisioned => self.provisioned(),
            S::ExternallyProvisioned => self.externally_provisioned(),
            S::Deprovisioning => self.deprovisioning(),
            S::PoweringOffBeforeDelete => self.powering_off_before_delete(),
            S::Deleting => self.deleting(),
        }
    }

    fn registering(&mut self) -> Flow {
        use ProvisioningState as S;
        if !self.has_bmc() {
            return self.go(S::Unmanaged);
        }
        let Some(version) = self.credentials_version() else {
            return self.wait_for_change();
        };
        let changed = self
            .st
            .good_credentials
            .as_ref()
            .and_then(|g| g.credentials_version.as_ref())
            .is_some_and(|v| *v != version);
        self.st.tried_credentials = self.credentials_status();
        match self.call(Call::Register {
            credentials_changed: changed,
        })? {
            Outcome::Registered(r) => {
                self.registered(&r, &version);
                self.finish_op(Op::Register);
                self.event("Registered", "BMC access verified");
                let next = if self.spec().externally_provisioned {
                    S::ExternallyProvisioned
                } else if self.inspection_disabled() {
                    S::Preparing
                } else {
                    S::Inspecting
                };
                self.go(next)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Registration, &e),
            _ => self.unexpected(),
        }
    }

    /// Entering inspection, provisioning or deprovisioning needs provisioner capacity.
    /// Returns `Ok` once the operation has started.
    fn acquire_capacity(&mut self, op: Op) -> Flow {
        if self.started(op) {
            return Ok(());
        }
        match self.call(Call::HasCapacity)? {
            Outcome::Capacity(true) => {
                let now = self.now();
                let m = self.metric(op);
                m.start = Some(now);
                m.end = None;
                if self.st.operational_status == OperationalStatus::Delayed {
                    self.st.operational_status = OperationalStatus::Ok;
                }
                self.requeue(NOW)
            }
            Outcome::Capacity(false) => {
                if self.st.operational_status != OperationalStatus::Delayed {
                    self.st.operational_status = OperationalStatus::Delayed;
                    let state = self.state();
                    self.event(
                        "Delayed",
                        format!("{state} delayed: the provisioner is at capacity"),
                    );
                }
                self.requeue(self.input.timing.delayed_retry)
            }
            _ => self.unexpected(),
        }
    }

    fn inspecting(&mut self) -> Flow {
        if self.inspection_disabled() {
            return self.go(ProvisioningState::Preparing);
        }
        self.acquire_capacity(Op::Inspect)?;
        let refresh = self.st.hardware.is_some();
        match self.call(Call::Inspect { refresh })? {
            Outcome::Inspected(details) => {
                self.clear_error();
                let now = rfc3339(self.input.now);
                let gaps = conditions::update_inspection(
                    &mut self.st,
                    details.as_ref(),
                    self.input.generation,
                    &now,
                );
                if let Some(details) = details {
                    self.st.hardware = Some(details.clone());
                    self.d.hardware_data = Some(details);
                }
                self.finish_op(Op::Inspect);
                match gaps {
                    Some(m) => self.warning("InspectionIncomplete", m),
                    None => self.event("InspectionComplete", "hardware inspection finished"),
                }
                self.go(ProvisioningState::Preparing)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Inspection, &e),
            _ => self.unexpected(),
        }
    }

    fn preparing(&mut self) -> Flow {
        match self.call(Call::Prepare)? {
            Outcome::Done => {
                self.clear_error();
                self.go(ProvisioningState::Available)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Preparation, &e),
            _ => self.unexpected(),
        }
    }

    fn available(&mut self) -> Flow {
        use ProvisioningState as S;
        if self.spec().externally_provisioned {
            self.memo_mut().adopted = false;
            return self.go(S::ExternallyProvisioned);
        }
        if self
            .annotation(ann::INSPECT)
            .is_some_and(|v| v != "disabled")
        {
            self.remove_annotation(ann::INSPECT);
            return self.go(S::Inspecting);
        }
        if self.spec().image.as_ref().is_none_or(|i| i.url.is_empty())
            && self.st.provisioning_fail_count > 0
        {
            // metal3: removing the image forgets the failed attempts.
            self.st.provisioning_fail_count = 0;
            self.st.last_attempted_image = None;
        }
        if self.has_deployment() {
            if self.st.last_attempted_image != self.spec().image {
                // A different image gets a fresh set of attempts.
                self.st.provisioning_fail_count = 0;
            }
            if self.at_retry_limit() {
                // A standing condition, not a new failure: no backoff, no growing errorCount,
                // one Warning when it is first recorded; power is still kept as `online` says.
                let limit = self.input.timing.max_provisioning_retries;
                let message = format!(
                    "provisioning failed {} times, retry limit ({limit}) reached; change image or reset provisioningFailCount to retry",
                    self.st.provisioning_fail_count
                );
                if self.st.error_type != Some(ErrorType::Provisioning)
                    || self.st.error_message != message
                {
                    self.st.error_type = Some(ErrorType::Provisioning);
                    self.st.error_message = message.clone();
                    self.st.operational_status = OperationalStatus::Error;
                    self.warning("ProvisioningError", message);
                }
                return self.steady_state();
            }
            return self.go(S::Provisioning);
        }
        if self.state() == S::Ready {
            // The old spelling is read, never written.
            self.st.provisioning.state = S::Available;
        }
        self.steady_state()
    }

    /// metal3's retry limit: the image in the spec failed to provision too often. Only images
    /// count (removing the image forgets the attempts, so custom deploys never hit it).
    fn at_retry_limit(&self) -> bool {
        let limit = self.input.timing.max_provisioning_retries;
        let failed = u32::try_from(self.st.provisioning_fail_count).unwrap_or(0);
        limit > 0
            && failed >= limit
            && self.spec().image.is_some()
            && self.st.last_attempted_image == self.spec().image
    }

    fn data_secrets_error(&self) -> Option<String> {
        let ns = self.input.namespace;
        let spec = self.spec();
        [
            ("userData", &spec.user_data),
            ("networkData", &spec.network_data),
            ("metaData", &spec.meta_data),
        ]
        .into_iter()
        .find_map(|(field, r)| {
            let r = r.as_ref()?;
            let other = r
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty() && *n != ns)?;
            Some(format!(
                "spec.{field}: Secret {other}/{} must be in the host's namespace {ns}",
                r.name.as_deref().unwrap_or("")
            ))
        })
    }

    fn provisioning(&mut self) -> Flow {
        use ProvisioningState as S;
        if !self.has_deployment() {
            return self.go(S::Deprovisioning);
        }
        if let Some(message) = self.data_secrets_error() {
            return self.fail(ErrorType::Provisioning, message, "invalid_input");
        }
        self.acquire_capacity(Op::Provision)?;
        if self.spec().image.is_some() {
            self.st.last_attempted_image = self.spec().image.clone();
        }
        match self.call(Call::Provision)? {
            Outcome::Done => {
                self.clear_error();
                self.st.provisioning_fail_count = 0;
                let spec = self.spec();
                self.st.provisioning.image = spec.image.clone();
                self.st.provisioning.custom_deploy = spec.custom_deploy.clone();
                self.st.provisioning.root_device_hints = spec.root_device_hints.clone();
                self.st.provisioning.boot_mode = spec.boot_mode;
                // The provisioner leaves the host running its new image.
                self.st.powered_on = true;
                self.finish_op(Op::Provision);
                let now = self.input.now;
                let m = self.memo_mut();
                m.adopted = true;
                m.power_checked = Some(now);
                self.event("ProvisioningComplete", "image provisioned");
                self.go(S::Provisioned)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => {
                // An unreachable BMC or provisioner is not a failed attempt of the image.
                if e.kind != ErrorKind::Unreachable {
                    self.st.provisioning_fail_count =
                        self.st.provisioning_fail_count.saturating_add(1);
                }
                if self.at_retry_limit() {
                    // At the limit the host is deprovisioned back to available and stays
                    // there with the error (metal3), instead of retrying forever.
                    self.warning("ProvisioningError", e.message.clone());
                    return self.go(S::Deprovisioning);
                }
                self.fail_with(ErrorType::Provisioning, &e)
            }
            _ => self.unexpected(),
        }
    }

    fn deployment_changed(&self) -> bool {
        if !self.has_deployment() {
            return true;
        }
        let spec = self.spec();
        let prov = &self.st.provisioning;
        let url = |i: &Option<ferrometal_api::Image>| i.as_ref().map(|i| i.url.clone());
        url(&spec.image) != url(&prov.image) || spec.custom_deploy != prov.custom_deploy
    }

    fn adopt(&mut self) -> Flow {
        if self.memo.as_ref().is_some_and(|m| m.adopted) {
            return Ok(());
        }
        match self.call(Call::Adopt)? {
            Outcome::Done => {
                self.clear_error();
                self.memo_mut().adopted = true;
                self.requeue(NOW)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::ProvisionedRegistration, &e),
            _ => self.unexpected(),
        }
    }

    fn provisioned(&mut self) -> Flow {
        if self.deployment_changed() {
            return self.go(ProvisioningState::Deprovisioning);
        }
        self.adopt()?;
        self.steady_state()
    }

    fn externally_provisioned(&mut self) -> Flow {
        use ProvisioningState as S;
        if !self.spec().externally_provisioned {
            if self.has_deployment() {
                // Record the image as provisioned so nothing is written to the disks.
                let spec = self.spec();
                self.st.provisioning.image = spec.image.clone();
                self.st.provisioning.custom_deploy = spec.custom_deploy.clone();
                return self.go(S::Provisioned);
            }
            return self.go(S::Preparing);
        }
        self.adopt()?;
        self.steady_state()
    }

    fn deprovisioning(&mut self) -> Flow {
        use ProvisioningState as S;
        if self.input.deleting && self.st.error_count > 3 {
            self.warning(
                "DeprovisioningSkipped",
                "deprovisioning keeps failing; continuing the deletion",
            );
            return self.go(S::PoweringOffBeforeDelete);
        }
        self.acquire_capacity(Op::Deprovision)?;
        match self.call(Call::Deprovision)? {
            Outcome::Done => {
                self.clear_error();
                self.st.provisioning.image = None;
                self.st.provisioning.custom_deploy = None;
                self.st.powered_on = false;
                self.finish_op(Op::Deprovision);
                let now = self.input.now;
                let m = self.memo_mut();
                m.adopted = false;
                m.power_checked = Some(now);
                self.event("DeprovisioningComplete", "image removed");
                if self.input.deleting {
                    self.go(S::PoweringOffBeforeDelete)
                } else {
                    self.go(S::Available)
                }
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Provisioning, &e),
            _ => self.unexpected(),
        }
    }

    fn powering_off_before_delete(&mut self) -> Flow {
        if !self.input.deleting {
            return self.wait_for_change();
        }
        if self.st.error_count > 3 {
            self.warning(
                "PowerOffSkipped",
                "power-off keeps failing; continuing the deletion",
            );
            return self.go(ProvisioningState::Deleting);
        }
        match self.call(Call::PowerOff(PowerOffMode::Hard))? {
            Outcome::Done => {
                self.clear_error();
                self.st.powered_on = false;
                self.go(ProvisioningState::Deleting)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
            _ => self.unexpected(),
        }
    }

    fn deleting(&mut self) -> Flow {
        if !self.input.deleting {
            return self.wait_for_change();
        }
        let skip = !self.has_bmc() || self.st.error_count > 3;
        if !skip {
            match self.call(Call::Delete)? {
                Outcome::Done => self.clear_error(),
                Outcome::Waiting { requeue_after, .. } => return self.waiting(requeue_after),
                Outcome::Failed(e) => return self.fail_with(ErrorType::Registration, &e),
                _ => return self.unexpected(),
            }
        }
        self.remove_finalizer()
    }

    /// Reboot annotations that count now: (key, hard).
    fn active_reboots(&mut self) -> Vec<(String, bool)> {
        let steady = matches!(
            self.state(),
            ProvisioningState::Provisioned | ProvisioningState::ExternallyProvisioned
        );
        let mut out = Vec::new();
        for (key, value) in self.input.annotations {
            if !ann::is_reboot_key(key) {
                continue;
            }
            match ann::parse_reboot(key, value) {
                Ok(r) if steady || r.force => out.push((key.clone(), r.mode == RebootMode::Hard)),
                Ok(_) => {}
                Err(e) => self.warning("InvalidAnnotation", e.to_string()),
            }
        }
        out
    }

    /// Available, provisioned and externally provisioned hosts: reboots, operations, `online`,
    /// and one power-state poll per interval.
    fn steady_state(&mut self) -> Flow {
        let mut reboots = self.active_reboots();
        if self.spec().disable_power_off && !reboots.is_empty() {
            self.restart_instead_of_reboot(&reboots)?;
            // Nothing can hold such a host off: keyed reboots do not count.
            reboots.clear();
        }
        let want_on = self.spec().online && reboots.is_empty();
        let is_on = self.st.powered_on;
        if !reboots.is_empty() {
            let bare = reboots.iter().any(|(k, _)| k == ann::REBOOT);
            if is_on {
                let hard = reboots.iter().any(|(_, h)| *h) || self.st.error_count > 0;
                let mode = if hard {
                    PowerOffMode::Hard
                } else {
                    PowerOffMode::Soft
                };
                return match self.call(Call::PowerOff(mode))? {
                    Outcome::Done => {
                        self.clear_error();
                        self.st.powered_on = false;
                        self.memo_mut().power_checked = Some(self.input.now);
                        let keys: Vec<_> = reboots.iter().map(|(k, _)| k.as_str()).collect();
                        self.event(
                            "PowerOff",
                            format!(
                                "powered off ({}) for reboot requested by {}",
                                if hard { "hard" } else { "soft" },
                                keys.join(", ")
                            ),
                        );
                        if bare {
                            self.remove_annotation(ann::REBOOT);
                        }
                        self.requeue(NOW)
                    }
                    Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
                    Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
                    _ => self.unexpected(),
                };
            }
            if bare {
                // The host is off: the bare reboot is complete, power comes back.
                self.remove_annotation(ann::REBOOT);
                return self.requeue(NOW);
            }
        } else if let Some(value) = self.annotation(ann::OPERATION) {
            self.operation(value)?;
        }
        if want_on != is_on {
            let call = if want_on {
                Call::PowerOn
            } else if self.st.error_count > 0 {
                Call::PowerOff(PowerOffMode::Hard)
            } else {
                Call::PowerOff(PowerOffMode::Soft)
            };
            return match self.call(call)? {
                Outcome::Done => {
                    self.clear_error();
                    self.st.powered_on = want_on;
                    self.memo_mut().power_checked = Some(self.input.now);
                    if want_on {
                        self.event("PowerOn", "host powered on");
                    } else {
                        self.event("PowerOff", "host powered off");
                    }
                    self.requeue(self.poll_interval())
                }
                Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
                Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
                _ => self.unexpected(),
            };
        }
        // A poll is due when the last observation is older than most of an interval, so a
        // jittered requeue that fires a little early still polls.
        let interval = self.input.timing.power_poll_interval;
        let due = self
            .memo
            .as_ref()
            .and_then(|m| m.power_checked)
            .is_none_or(|t| {
                let elapsed = self.input.now.duration_since(t);
                elapsed.as_secs_f64() >= interval.as_secs_f64() * 0.8
            });
        if !due && self.st.error_count == 0 {
            return self.requeue(self.poll_interval());
        }
        match self.call(Call::PowerState)? {
            Outcome::Power(p) => {
                // A power reading clears a power error, not the retry limit's standing one.
                if !self.at_retry_limit() {
                    self.clear_error();
                }
                self.observe_power(p);
                self.memo_mut().power_checked = Some(self.input.now);
                if self.st.powered_on != want_on && p != PowerState::Unknown {
                    // Enforce `online` on the next pass.
                    self.requeue(NOW)
                } else {
                    self.requeue(self.poll_interval())
                }
            }
            Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
            _ => self.unexpected(),
        }
    }

    /// A host with `disablePowerOff` is never switched off: the bare reboot annotation becomes
    /// one restart, then goes.
    fn restart_instead_of_reboot(&mut self, reboots: &[(String, bool)]) -> Flow {
        if !reboots.iter().any(|(k, _)| k == ann::REBOOT) {
            return Ok(());
        }
        let op = if reboots.iter().any(|(_, hard)| *hard) {
            Operation::ForceRestart
        } else {
            Operation::GracefulRestart
        };
        match self.call(Call::Operation(op))? {
            Outcome::Done => {
                self.clear_error();
                self.remove_annotation(ann::REBOOT);
                self.event(
                    "Rebooted",
                    format!(
                        "{} issued (disablePowerOff: never powered off)",
                        op.as_str()
                    ),
                );
                self.requeue(self.poll_interval())
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
            _ => self.unexpected(),
        }
    }

    fn poll_interval(&self) -> Duration {
        jittered(self.input.timing.power_poll_interval, self.input.jitter)
    }

    fn operation(&mut self, value: &str) -> Flow {
        let op = match ann::parse_operation(value) {
            Ok(op) => op,
            Err(e) => {
                self.remove_annotation(ann::OPERATION);
                self.warning("UnknownOperation", e.to_string());
                return self.requeue(NOW);
            }
        };
        if op.needs_power_on() && !self.st.powered_on {
            self.remove_annotation(ann::OPERATION);
            self.event(
                "OperationSkipped",
                format!("{}: not run, the host is powered off", op.as_str()),
            );
            return self.requeue(NOW);
        }
        match self.call(Call::Operation(op))? {
            Outcome::Done => {
                self.clear_error();
                self.remove_annotation(ann::OPERATION);
                // `online` stays the desired power: the next poll (a full interval away)
                // observes the operation's effect and restores it if needed.
                self.memo_mut().power_checked = Some(self.input.now);
                self.event("OperationSucceeded", format!("{} issued", op.as_str()));
                self.requeue(self.poll_interval())
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => {
                let message = format!("operation {}: {}", op.as_str(), e.message);
                self.warning("OperationFailed", message.clone());
                self.fail(ErrorType::PowerManagement, message, e.kind.as_str())
            }
            _ => self.unexpected(),
        }
    }

    fn finish(mut self) -> Decision {
        let mut st = std::mem::take(&mut self.st);
        update_conditions(&mut st, self.input.generation, self.input.now);
        let now = rfc3339(self.input.now);
        if let Some(message) =
            conditions::update_not_acted_on(&mut st, self.input.spec, self.input.generation, &now)
        {
            self.warning("FieldsNotActedOn", message);
        }
        let original = self.input.status.cloned().unwrap_or_default();
        let mut unstamped = st.clone();
        unstamped.last_updated = original.last_updated.clone();
        let changed = self.input.status.is_none() || unstamped != original;
        if changed {
            st.last_updated = Some(rfc3339(self.input.now));
            self.d.status = Some(st);
        }
        if self.d.memo == MemoChange::Keep && self.memo.as_ref() != self.input.memo {
            self.d.memo = match self.memo.take() {
                Some(m) => MemoChange::Set(m),
                None => MemoChange::Forget,
            };
        }
        self.d
    }
}

/// Keeps the conditions consistent with the rest of the status, as metal3 computes them.
pub fn update_conditions(st: &mut BareMetalHostStatus, generation: Option<i64>, now: Timestamp) {
    conditions::update(st, generation, &rfc3339(now));
}
