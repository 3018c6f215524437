//! Firmware settings and updates, and hardware RAID, as metal3 makes them (RAID only in
//! `preparing`). Firmware: on a host that is not provisioned, in
//! `preparing` (an available host with changes goes back there); on a provisioned host only
//! when a HostUpdatePolicy allows it `onReboot`, while the host is off on its way back on after
//! a reboot (metal3's servicing, operational status `servicing`).

use ferrometal_api::{ErrorType, OperationalStatus, ProvisioningState};
use ferrometal_provisioner::FirmwareChanges;

use super::engine::{Engine, Flow, NOW};
use super::protocol::{Call, Outcome};

impl Engine<'_, '_> {
    /// The changes still to make: settings not made yet for this read of the BMC, updates
    /// not made yet by this process.
    pub(super) fn pending_firmware(&self) -> Option<FirmwareChanges> {
        let work = self.input.firmware;
        let mut changes = work.changes.clone();
        if let Some(m) = self.memo.as_ref() {
            if m.settings_done
                .as_ref()
                .is_some_and(|(settings, read)| *settings == changes.settings && *read == work.read)
            {
                changes.settings.clear();
            }
            changes.updates.retain(|u| !m.updates_done.contains(u));
        }
        (!changes.is_empty()).then_some(changes)
    }

    fn firmware_done(&mut self, changes: FirmwareChanges) {
        if !changes.settings.is_empty() {
            let names: Vec<&str> = changes.settings.keys().map(String::as_str).collect();
            let note = format!("BIOS settings applied and read back: {}", names.join(", "));
            self.event("FirmwareSettingsApplied", note);
            let read = self.input.firmware.read.clone();
            self.memo_mut().settings_done = Some((changes.settings.clone(), read));
        }
        for u in &changes.updates {
            let note = format!("{} firmware updated from {}", u.component, u.url);
            self.event("FirmwareUpdated", note);
        }
        self.d.updates_done.extend(changes.updates.iter().cloned());
        self.memo_mut().updates_done.extend(changes.updates);
    }

    /// In `preparing`: the settings first, then whatever else preparing does.
    pub(super) fn prepare_firmware(&mut self) -> Flow {
        let Some(changes) = self.pending_firmware() else {
            return Ok(());
        };
        match self.call(Call::ChangeFirmware(changes.clone()))? {
            Outcome::Done => {
                self.clear_error();
                // A boot may have applied them (the host is on now) or not been needed (a BMC
                // that applies at once): the power is read again before `online` is enforced.
                self.memo_mut().power_checked = None;
                self.firmware_done(changes);
                self.requeue(NOW)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Preparation, &e),
            _ => self.unexpected(),
        }
    }

    /// The hardware RAID volumes `spec.raid` asks for and the host does not have as asked yet
    /// (`status.provisioning.raid` records what was built); software RAID is not built here.
    pub(super) fn pending_raid(&self) -> Option<Vec<ferrometal_api::HardwareRaidVolume>> {
        let wanted = self.spec().raid.as_ref()?.hardware_raid_volumes.as_ref()?;
        let built = self
            .st
            .provisioning
            .raid
            .as_ref()
            .and_then(|r| r.hardware_raid_volumes.as_ref());
        (built != Some(wanted)).then(|| wanted.clone())
    }

    /// In `preparing`, after the firmware: the RAID volumes, recorded once built.
    pub(super) fn prepare_raid(&mut self) -> Flow {
        let Some(volumes) = self.pending_raid() else {
            return Ok(());
        };
        match self.call(Call::ConfigureRaid(volumes.clone()))? {
            Outcome::Done => {
                self.clear_error();
                let raid = self
                    .st
                    .provisioning
                    .raid
                    .get_or_insert_with(Default::default);
                raid.hardware_raid_volumes = Some(volumes.clone());
                let names: Vec<String> = volumes
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        format!(
                            "{} (RAID {})",
                            v.name.clone().unwrap_or_else(|| format!("volume-{i}")),
                            v.level
                        )
                    })
                    .collect();
                let note = if names.is_empty() {
                    "hardware RAID volumes removed".to_string()
                } else {
                    format!("hardware RAID volumes built: {}", names.join(", "))
                };
                self.event("RAIDConfigured", note);
                self.requeue(NOW)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Preparation, &e),
            _ => self.unexpected(),
        }
    }

    /// A provisioned host: servicing starts when it is off and wanted on with changes an
    /// `onReboot` policy allows, and goes on (power or not) until they are made.
    pub(super) fn servicing(&mut self, want_on: bool) -> Flow {
        use ProvisioningState as S;
        if !matches!(self.state(), S::Provisioned | S::ExternallyProvisioned) {
            return Ok(());
        }
        let servicing = self.st.operational_status == OperationalStatus::Servicing
            || self.st.error_type == Some(ErrorType::Servicing);
        let work = self.input.firmware;
        let changes = self.pending_firmware().and_then(|mut c| {
            if !work.settings_on_reboot {
                c.settings.clear();
            }
            if !work.updates_on_reboot {
                c.updates.clear();
            }
            (!c.is_empty()).then_some(c)
        });
        let starts = changes.is_some() && want_on && !self.st.powered_on;
        if !servicing && !starts {
            return Ok(());
        }
        let Some(changes) = changes else {
            // Nothing left to change (made, withdrawn, or no longer allowed): servicing ends.
            self.clear_error();
            self.st.operational_status = OperationalStatus::Ok;
            self.event("ServicingComplete", "no firmware changes left to make");
            return self.requeue(NOW);
        };
        if !servicing {
            // Written before the BMC is touched: after a restart the host resumes servicing.
            self.st.operational_status = OperationalStatus::Servicing;
            self.event(
                "ServicingStarted",
                format!("changing on reboot: {}", changes.describe()),
            );
            return self.requeue(NOW);
        }
        match self.call(Call::ChangeFirmware(changes.clone()))? {
            Outcome::Done => {
                self.clear_error();
                self.st.operational_status = OperationalStatus::Ok;
                // The boot that applied them was the host's way back on, unless the BMC
                // applied them at once: the power is read again, and `online` brings it on.
                self.memo_mut().power_checked = None;
                self.firmware_done(changes);
                self.event("ServicingComplete", "firmware changes made; host back on");
                self.requeue(NOW)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::Servicing, &e),
            _ => self.unexpected(),
        }
    }
}
