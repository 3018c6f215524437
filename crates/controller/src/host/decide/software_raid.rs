//! Software RAID (metal3's `softwareRAIDVolumes`) in `preparing`: nothing is built there (a
//! deploy agent builds the arrays when the host is provisioned, on disks it sees from inside
//! the host: ferrometal's as it writes the image, Ironic's in a cleaning before its deploy);
//! preparing checks that this backend can build them and what metal3 itself refuses, then
//! records the volumes in `status.provisioning.raid` as metal3 does once its cleaning built
//! them. A change of the volumes takes an available host back to preparing.

use ferrometal_api::{ErrorType, SoftwareRaidVolume};
use ferrometal_provisioner::{ErrorKind, ProvisionerError};

use super::engine::{Engine, Flow, NOW};

impl Engine<'_, '_> {
    /// The software RAID volumes `spec.raid` asks for and `status.provisioning.raid` does not
    /// record yet (an empty list where none was recorded asks for nothing, as in metal3).
    pub(super) fn pending_software_raid(&self) -> Option<Vec<SoftwareRaidVolume>> {
        let wanted = self.spec().raid.as_ref()?.software_raid_volumes.as_ref()?;
        let recorded = self
            .st
            .provisioning
            .raid
            .as_ref()
            .and_then(|r| r.software_raid_volumes.as_ref());
        if wanted.is_empty() && recorded.is_none_or(|r| r.is_empty()) {
            return None;
        }
        (recorded != Some(wanted)).then(|| wanted.clone())
    }

    pub(super) fn prepare_software_raid(&mut self) -> Flow {
        let Some(volumes) = self.pending_software_raid() else {
            return Ok(());
        };
        if !volumes.is_empty() {
            if !self.input.builds_software_raid {
                let e = ProvisionerError::new(
                    ErrorKind::Unsupported,
                    "spec.raid.softwareRAIDVolumes: software RAID is built by a deploy agent (the redfish provisioner's, serve --agent-ramdisk; Ironic's, --deploy-kernel-url and --deploy-ramdisk-url or --deploy-iso-url), and this provisioner has none",
                );
                return self.fail_with(ErrorType::Preparation, &e);
            }
            // metal3's own check (its Ironic provisioner refuses the same).
            if volumes[0].level != "1" {
                let e = ProvisionerError::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "spec.raid.softwareRAIDVolumes[0].level: the first volume of software RAID must be RAID 1, not {:?}",
                        volumes[0].level
                    ),
                );
                return self.fail_with(ErrorType::Preparation, &e);
            }
        }
        self.clear_error();
        self.st
            .provisioning
            .raid
            .get_or_insert_with(Default::default)
            .software_raid_volumes = Some(volumes.clone());
        let note = if volumes.is_empty() {
            "no software RAID volumes".to_string()
        } else {
            let names: Vec<String> = volumes
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let size = v
                        .size_gibibytes
                        .filter(|g| *g > 0)
                        .map_or("the rest of each disk".to_string(), |g| format!("{g} GiB"));
                    format!("md{i} RAID {} of {size}", v.level)
                })
                .collect();
            format!(
                "software RAID volumes, built by the deploy agent when the host is provisioned: {}",
                names.join(", ")
            )
        };
        self.event("RAIDConfigured", note);
        self.requeue(NOW)
    }
}
