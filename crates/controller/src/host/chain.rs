//! The decisions of one reconcile, chained: steps that need no BMC call (a state change, a
//! capacity check) follow each other in one reconcile and are written once; equivalent to
//! running again at once on a fresh cache, since `decide` is pure. At most one BMC call per
//! reconcile: the chain stops there, the call runs detached, and the chain resumes with its
//! outcome where the call ran, on the host as it was when the call was decided.

use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_api::annotations as ann;
use ferrometal_bmc::Credentials;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::decide::{
    Call, DataImageWork, Decision, FinalizerChange, FirmwareWork, Input, Memo, MemoChange, Outcome,
    decide,
};
use crate::config::Timing;
use crate::secrets::CredentialsObservation;

/// Bounds the chain of state changes one reconcile makes.
const MAX_CHAINED_STEPS: usize = 8;

/// A reconcile in progress: the host as the decisions so far leave it, and those decisions.
pub struct Chain {
    /// The host's uid when the chain started: a result is never applied to a namesake.
    pub uid: Option<String>,
    pub current: BareMetalHost,
    pub memo: Option<Memo>,
    pub total: Decision,
    pub observation: CredentialsObservation,
    pub credentials: Option<Credentials>,
    pub jitter: f64,
    /// What the host's firmware objects asked when the chain started.
    pub firmware: FirmwareWork,
    pub data_image: Option<DataImageWork>,
    pub builds_software_raid: bool,
    steps: usize,
    bmc_calls: usize,
}

/// Where a chain stopped.
pub enum Next {
    /// Everything is decided: write `chain.total`.
    Apply,
    /// This call must be made first (the capacity check, or a BMC call).
    Call(Call),
}

impl Chain {
    pub fn new(
        host: &BareMetalHost,
        observation: CredentialsObservation,
        credentials: Option<Credentials>,
        memo: Option<Memo>,
        firmware: FirmwareWork,
        data_image: Option<DataImageWork>,
        builds_software_raid: bool,
    ) -> Chain {
        Chain {
            uid: host.metadata.uid.clone(),
            current: host.clone(),
            memo,
            total: Decision::default(),
            observation,
            credentials,
            jitter: rand::random::<f64>(),
            firmware,
            data_image,
            builds_software_raid,
            steps: 0,
            bmc_calls: 0,
        }
    }

    /// Decides until a call is needed or the chain ends; `last` is the outcome of the call the
    /// chain stopped for.
    pub fn advance(
        &mut self,
        timing: &Timing,
        now: Timestamp,
        mut last: Option<(Call, Outcome)>,
    ) -> Next {
        while self.steps < MAX_CHAINED_STEPS {
            let namespace = self.current.namespace_or_default().to_string();
            let empty = Default::default();
            let input = Input {
                namespace: &namespace,
                spec: &self.current.spec,
                status: self.current.status.as_ref(),
                annotations: self.current.metadata.annotations.as_ref().unwrap_or(&empty),
                generation: self.current.metadata.generation,
                deleting: self.current.metadata.deletion_timestamp.is_some(),
                has_finalizer: self
                    .current
                    .finalizers()
                    .iter()
                    .any(|f| f == ann::FINALIZER),
                credentials: self.observation.clone(),
                memo: self.memo.as_ref(),
                firmware: &self.firmware,
                data_image: self.data_image.as_ref(),
                builds_software_raid: self.builds_software_raid,
                last: last.take(),
                now,
                jitter: self.jitter,
                timing,
            };
            let mut decision = decide(&input);
            if input.last.is_none() {
                if let Some(call) = decision.call.take() {
                    let is_bmc = call != Call::HasCapacity;
                    if is_bmc && self.bmc_calls > 0 {
                        self.total.requeue = Some(Duration::ZERO);
                        return Next::Apply;
                    }
                    self.bmc_calls += usize::from(is_bmc);
                    return Next::Call(call);
                }
            } else if decision.call.take().is_some() {
                decision.requeue = Some(Duration::ZERO);
            }
            self.steps += 1;
            let more = decision.requeue == Some(Duration::ZERO)
                && decision.finalizer != Some(FinalizerChange::Remove);
            self.fold(decision);
            if !more {
                return Next::Apply;
            }
        }
        Next::Apply
    }

    /// Adds `d` to the decisions of this reconcile and to the host as they leave it.
    fn fold(&mut self, d: Decision) {
        let (total, current) = (&mut self.total, &mut self.current);
        if let Some(status) = d.status {
            current.status = Some(status.clone());
            total.status = Some(status);
        }
        if let Some(annotations) = current.metadata.annotations.as_mut() {
            for k in &d.remove_annotations {
                annotations.remove(k);
            }
        }
        for k in d.remove_annotations {
            if !total.remove_annotations.contains(&k) {
                total.remove_annotations.push(k);
            }
        }
        if let Some(change) = d.finalizer {
            let finalizers = current.metadata.finalizers.get_or_insert_with(Vec::new);
            match change {
                FinalizerChange::Add => finalizers.push(ann::FINALIZER.to_string()),
                FinalizerChange::Remove => finalizers.retain(|f| f != ann::FINALIZER),
            }
            total.finalizer = match (total.finalizer, change) {
                // Added and removed in one reconcile: nothing to write.
                (Some(FinalizerChange::Add), FinalizerChange::Remove) => None,
                _ => Some(change),
            };
        }
        total.events.extend(d.events);
        if d.hardware_data.is_some() {
            total.hardware_data = d.hardware_data;
        }
        match d.memo {
            MemoChange::Keep => {}
            MemoChange::Set(m) => {
                self.memo = Some(m.clone());
                total.memo = MemoChange::Set(m);
            }
            MemoChange::Forget => {
                self.memo = None;
                total.memo = MemoChange::Forget;
            }
        }
        total.updates_done.extend(d.updates_done);
        if d.data_image.is_some() {
            total.data_image = d.data_image;
        }
        if d.error_category.is_some() {
            total.error_category = d.error_category;
        }
        total.requeue = d.requeue;
    }
}
