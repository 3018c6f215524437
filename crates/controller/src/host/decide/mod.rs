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
//!
//! The engine (`engine`) and what goes in and out (`protocol`) are shared by the steps, grouped
//! as the host's life goes: `register` (registration and inspection), `provision`, `firmware`
//! (firmware in preparing and servicing), `data_image` (DataImages at power-on),
//! `deprovision` (deprovisioning and deletion) and `steady` (steady state and power). This file
//! holds only the entry point and the order the steps run in.

mod data_image;
mod deprovision;
mod engine;
mod firmware;
mod protocol;
mod provision;
mod register;
mod software_raid;
mod steady;

pub use engine::{backoff, update_conditions};
pub use protocol::{
    Call, DataImageResult, DataImageWork, Decision, FinalizerChange, FirmwareWork, Input, Memo,
    MemoChange, Outcome,
};

use ferrometal_api::ProvisioningState;
use ferrometal_api::annotations as ann;

use engine::{Engine, Flow, Halt};

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

// The reconcile, in metal3's order.
impl Engine<'_, '_> {
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
}
