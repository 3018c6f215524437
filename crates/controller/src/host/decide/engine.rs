//! The engine the decision runs on: the working status and memo, the decision being built, and
//! what every step uses (Events, requeues, calls and their outcomes, failures, transitions,
//! capacity, finishing with the conditions).

use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{
    BareMetalHostSpec, BareMetalHostStatus, CredentialsStatus, ErrorType, InspectionMode,
    OperationMetric, OperationalStatus, ProvisioningState,
};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::{ErrorKind, ProvisionerError};
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::jiff::Timestamp;

use super::protocol::{Call, Decision, FinalizerChange, Input, Memo, MemoChange, Outcome};
use crate::conditions;
use crate::config::Timing;
use crate::events::HostEvent;
use crate::secrets::CredentialsObservation;

/// Why the engine stopped early.
pub(super) enum Halt {
    Call(Call),
    Stop,
}

pub(super) type Flow = Result<(), Halt>;

pub(super) const NOW: Duration = Duration::ZERO;

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

pub(super) fn rfc3339(t: Timestamp) -> String {
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
pub(super) enum Op {
    Register,
    Inspect,
    Provision,
    Deprovision,
}

pub(super) struct Engine<'a, 'b> {
    pub(super) input: &'a Input<'b>,
    pub(super) st: BareMetalHostStatus,
    pub(super) memo: Option<Memo>,
    pub(super) d: Decision,
    pub(super) outcome_used: bool,
}

impl<'a, 'b> Engine<'a, 'b> {
    pub(super) fn new(input: &'a Input<'b>) -> Self {
        Engine {
            input,
            st: input.status.cloned().unwrap_or_default(),
            memo: input.memo.cloned(),
            d: Decision::default(),
            outcome_used: false,
        }
    }

    pub(super) fn now(&self) -> String {
        rfc3339(self.input.now)
    }

    pub(super) fn state(&self) -> ProvisioningState {
        self.st.provisioning.state
    }

    pub(super) fn spec(&self) -> &'b BareMetalHostSpec {
        self.input.spec
    }

    pub(super) fn annotation(&self, key: &str) -> Option<&'b String> {
        self.input.annotations.get(key)
    }

    pub(super) fn remove_annotation(&mut self, key: &str) {
        if !self.d.remove_annotations.iter().any(|k| k == key) {
            self.d.remove_annotations.push(key.to_string());
        }
    }

    pub(super) fn event(&mut self, reason: &str, note: impl Into<String>) {
        self.d.events.push(HostEvent {
            warning: false,
            reason: reason.into(),
            note: note.into(),
        });
    }

    pub(super) fn warning(&mut self, reason: &str, note: impl Into<String>) {
        self.d.events.push(HostEvent {
            warning: true,
            reason: reason.into(),
            note: note.into(),
        });
    }

    pub(super) fn requeue(&mut self, after: Duration) -> Flow {
        self.d.requeue = Some(after);
        Err(Halt::Stop)
    }

    pub(super) fn wait_for_change(&mut self) -> Flow {
        self.d.requeue = None;
        Err(Halt::Stop)
    }

    /// Asks for `call`: in the first pass this stops the engine so the reconciler can make the
    /// call; in the second pass it yields the outcome. A second, different call in one reconcile
    /// is never made: the engine stops and asks to be run again at once.
    pub(super) fn call(&mut self, call: Call) -> Result<Outcome, Halt> {
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

    pub(super) fn memo_mut(&mut self) -> &mut Memo {
        self.memo.get_or_insert_with(Memo::default)
    }

    pub(super) fn inspection_disabled(&self) -> bool {
        self.spec().inspection_mode == Some(InspectionMode::Disabled)
            || self
                .annotation(ann::INSPECT)
                .is_some_and(|v| v == "disabled")
    }

    pub(super) fn has_deployment(&self) -> bool {
        self.spec()
            .image
            .as_ref()
            .is_some_and(|i| !i.url.is_empty())
            || self.spec().custom_deploy.is_some()
    }

    pub(super) fn has_bmc(&self) -> bool {
        self.spec()
            .bmc
            .as_ref()
            .is_some_and(|b| !b.address.is_empty())
    }

    pub(super) fn is_detached(&self) -> bool {
        self.st.operational_status == OperationalStatus::Detached
            && self.annotation(ann::DETACHED).is_some()
    }

    pub(super) fn credentials_version(&self) -> Option<String> {
        match &self.input.credentials {
            CredentialsObservation::Found { version, .. } => Some(version.clone()),
            _ => None,
        }
    }

    pub(super) fn credentials_status(&self) -> Option<CredentialsStatus> {
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

    pub(super) fn metric(&mut self, op: Op) -> &mut OperationMetric {
        let h = &mut self.st.operation_history;
        match op {
            Op::Register => &mut h.register,
            Op::Inspect => &mut h.inspect,
            Op::Provision => &mut h.provision,
            Op::Deprovision => &mut h.deprovision,
        }
    }

    pub(super) fn started(&mut self, op: Op) -> bool {
        let m = self.metric(op);
        m.start.is_some() && m.end.is_none()
    }

    pub(super) fn finish_op(&mut self, op: Op) {
        let now = self.now();
        self.metric(op).end = Some(now);
    }

    pub(super) fn transition(&mut self, next: ProvisioningState) {
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
    pub(super) fn go(&mut self, next: ProvisioningState) -> Flow {
        self.transition(next);
        self.requeue(NOW)
    }

    pub(super) fn fail(
        &mut self,
        error_type: ErrorType,
        message: String,
        category: &'static str,
    ) -> Flow {
        self.st.error_type = Some(error_type);
        self.st.error_message = message.clone();
        self.st.error_count = self.st.error_count.saturating_add(1);
        self.st.operational_status = OperationalStatus::Error;
        self.d.error_category = Some(category);
        self.mark_spec_fault(None);
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

    pub(super) fn fail_with(&mut self, error_type: ErrorType, e: &ProvisionerError) -> Flow {
        if e.kind == ErrorKind::Unsupported {
            return self.blocked(error_type, e);
        }
        let flow = self.fail(error_type, e.message.clone(), e.kind.as_str());
        self.mark_spec_fault(e.spec_fault);
        flow
    }

    /// Records (or clears) which field of the spec the error just set is about, for readers
    /// that may be told spec errors and nothing else (a HostClaim's tenant).
    pub(super) fn mark_spec_fault(&mut self, fault: Option<SpecFault>) {
        let now = rfc3339(self.input.now);
        conditions::set_spec_fault(&mut self.st, fault, self.input.generation, &now);
    }

    /// A failure retrying cannot fix (the provisioner cannot do what the spec asks, or lacks
    /// configuration): recorded once, with the Blocked condition naming what is needed, and
    /// looked at again only after a spec change, a restart or the longest backoff.
    pub(super) fn blocked(&mut self, error_type: ErrorType, e: &ProvisionerError) -> Flow {
        if self.st.error_type != Some(error_type) || self.st.error_message != e.message {
            self.st.error_type = Some(error_type);
            self.st.error_message = e.message.clone();
            self.st.error_count = self.st.error_count.max(1);
            self.st.operational_status = OperationalStatus::Error;
            self.warning("Blocked", e.message.clone());
        }
        self.mark_spec_fault(e.spec_fault);
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

    pub(super) fn clear_error(&mut self) {
        conditions::clear_blocked(&mut self.st);
        self.mark_spec_fault(None);
        self.st.error_type = None;
        self.st.error_message.clear();
        self.st.error_count = 0;
        if self.st.operational_status == OperationalStatus::Error {
            self.st.operational_status = OperationalStatus::Ok;
        }
    }

    pub(super) fn waiting(&mut self, requeue_after: Duration) -> Flow {
        self.requeue(requeue_after)
    }

    /// An outcome that does not fit the call (a backend bug): look again shortly.
    pub(super) fn unexpected(&mut self) -> Flow {
        self.requeue(self.input.timing.delayed_retry)
    }

    pub(super) fn registration_error_type(&self) -> ErrorType {
        match self.state() {
            ProvisioningState::Provisioned | ProvisioningState::ExternallyProvisioned => {
                ErrorType::ProvisionedRegistration
            }
            _ => ErrorType::Registration,
        }
    }

    pub(super) fn remove_finalizer(&mut self) -> Flow {
        self.d.finalizer = Some(FinalizerChange::Remove);
        self.d.memo = MemoChange::Forget;
        self.memo = None;
        self.event("Deleted", "host removed from management");
        self.wait_for_change()
    }

    pub(super) fn observe_power(&mut self, p: PowerState) {
        match p {
            PowerState::On | PowerState::PoweringOff => self.st.powered_on = true,
            PowerState::Off | PowerState::PoweringOn => self.st.powered_on = false,
            PowerState::Unknown => {}
        }
    }

    /// Entering inspection, provisioning or deprovisioning needs provisioner capacity.
    /// Returns `Ok` once the operation has started.
    pub(super) fn acquire_capacity(&mut self, op: Op) -> Flow {
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

    /// metal3's retry limit: the image in the spec failed to provision too often. Only images
    /// count (removing the image forgets the attempts, so custom deploys never hit it).
    pub(super) fn at_retry_limit(&self) -> bool {
        let limit = self.input.timing.max_provisioning_retries;
        let failed = u32::try_from(self.st.provisioning_fail_count).unwrap_or(0);
        limit > 0
            && failed >= limit
            && self.spec().image.is_some()
            && self.st.last_attempted_image == self.spec().image
    }

    pub(super) fn finish(mut self) -> Decision {
        let mut st = std::mem::take(&mut self.st);
        update_conditions(&mut st, self.input.generation, self.input.now);
        let now = rfc3339(self.input.now);
        if let Some(message) = conditions::update_not_acted_on(
            &mut st,
            self.input.spec,
            self.input.builds_software_raid,
            self.input.generation,
            &now,
        ) {
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
