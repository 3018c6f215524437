//! Deprovisioning and deletion: starting a deletion, detaching, Deprovisioning,
//! PoweringOffBeforeDelete and Deleting.

use ferrometal_api::annotations::{self as ann, DeleteAction};
use ferrometal_api::{ErrorType, OperationalStatus, ProvisioningState};
use ferrometal_provisioner::PowerOffMode;

use super::engine::{Engine, Flow, Op};
use super::protocol::{Call, Outcome};

impl Engine<'_, '_> {
    pub(super) fn initiate_delete(&mut self) -> Flow {
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

    pub(super) fn detached(&mut self) -> Flow {
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

    pub(super) fn deprovisioning(&mut self) -> Flow {
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

    pub(super) fn powering_off_before_delete(&mut self) -> Flow {
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

    pub(super) fn deleting(&mut self) -> Flow {
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
}
