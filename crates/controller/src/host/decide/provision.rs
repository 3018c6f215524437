//! Provisioning: Preparing, Available (with the retry limit), Provisioning, adoption of
//! provisioned hosts, and externally provisioned hosts.

use ferrometal_api::annotations as ann;
use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{ErrorType, OperationalStatus, ProvisioningState};
use ferrometal_provisioner::ErrorKind;

use super::engine::{Engine, Flow, NOW, Op};
use super::protocol::{Call, Outcome};

impl Engine<'_, '_> {
    pub(super) fn preparing(&mut self) -> Flow {
        self.prepare_firmware()?;
        self.prepare_raid()?;
        self.prepare_software_raid()?;
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

    pub(super) fn available(&mut self) -> Flow {
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
        if self.pending_firmware().is_some()
            || self.pending_raid().is_some()
            || self.pending_software_raid().is_some()
        {
            // metal3: changed firmware or RAID take the host back to preparing.
            return self.go(S::Preparing);
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
                    // Only another image gets further attempts: the spec's to change.
                    self.mark_spec_fault(Some(SpecFault::RetryLimitReached));
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

    pub(super) fn provisioning(&mut self) -> Flow {
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
                // An unreachable or busy BMC or provisioner is not a failed attempt of the image.
                if !matches!(e.kind, ErrorKind::Unreachable | ErrorKind::ServerError) {
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

    pub(super) fn provisioned(&mut self) -> Flow {
        if self.deployment_changed() {
            return self.go(ProvisioningState::Deprovisioning);
        }
        self.adopt()?;
        self.steady_state()
    }

    pub(super) fn externally_provisioned(&mut self) -> Flow {
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
}
