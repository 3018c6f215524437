//! Registration and inspection: the status and hardware-details annotations, the credentials
//! check, (re-)registering with the provisioner, and the Registering and Inspecting states.

use ferrometal_api::annotations as ann;
use ferrometal_api::{
    BareMetalHostStatus, ErrorType, HardwareDetails, OperationalStatus, ProvisioningState,
};
use ferrometal_provisioner::Registration;

use super::engine::{Engine, Flow, NOW, Op, rfc3339};
use super::protocol::{Call, Memo, Outcome};
use crate::conditions;
use crate::secrets::CredentialsObservation;

/// Whether a host's status is empty (new, or moved without status).
fn status_is_empty(status: Option<&BareMetalHostStatus>) -> bool {
    status
        .is_none_or(|s| s.provisioning.state == ProvisioningState::None && s.last_updated.is_none())
}

impl Engine<'_, '_> {
    pub(super) fn status_annotation(&mut self) -> Flow {
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

    pub(super) fn hardware_details_annotation(&mut self) {
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

    pub(super) fn check_credentials(&mut self) -> Flow {
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

    pub(super) fn ensure_registered(&mut self) -> Flow {
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
            power_in_flight: None,
            settings_done: None,
            updates_done: Vec::new(),
            data_image_failed: None,
        });
    }

    pub(super) fn registering(&mut self) -> Flow {
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

    pub(super) fn inspecting(&mut self) -> Flow {
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
}
