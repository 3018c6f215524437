//! Hardware RAID: the controller's volumes made exactly the wanted ones (metal3's
//! `hardwareRAIDVolumes`), one action per call. Each call observes the volumes first: one that
//! matches no wanted volume is deleted, then the first wanted volume with no match is created;
//! `Done` when every wanted volume has its match and nothing else is left. So a call after a
//! restart continues from what the BMC shows, and nothing is built twice.

use ferrometal_api::HardwareRaidVolume;
use ferrometal_bmc::{RaidVolume, VolumeRequest};

use super::provisioner::{RedfishProvisioner, unsupported};
use crate::{ErrorKind, HostInfo, ProvisionerError, Result, Step};

const GIB: u64 = 1 << 30;

/// metal3's RAID level as Redfish names it.
fn raid_type(level: &str) -> Option<&'static str> {
    Some(match level {
        "0" => "RAID0",
        "1" => "RAID1",
        "5" => "RAID5",
        "6" => "RAID6",
        "1+0" => "RAID10",
        "5+0" => "RAID50",
        "6+0" => "RAID60",
        _ => return None,
    })
}

fn drive_name(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

fn matches(have: &RaidVolume, want: &HardwareRaidVolume) -> bool {
    let Some(kind) = raid_type(&want.level) else {
        return false;
    };
    have.raid_type == kind
        && want.name.as_ref().is_none_or(|n| *n == have.name)
        && want
            .size_gibibytes
            .is_none_or(|g| have.capacity_bytes == Some(g.max(0) as u64 * GIB))
        && want
            .number_of_physical_disks
            .is_none_or(|n| have.drives.len() == n.max(0) as usize)
        && (want.physical_disks.is_empty()
            || want
                .physical_disks
                .iter()
                .all(|d| have.drives.iter().any(|h| drive_name(h) == d)))
}

impl RedfishProvisioner {
    pub(super) async fn build_raid(
        &self,
        host: &HostInfo,
        wanted: &[HardwareRaidVolume],
    ) -> Result<Step> {
        if let Some(bad) = wanted.iter().find(|w| raid_type(&w.level).is_none()) {
            return Err(unsupported(format!(
                "spec.raid.hardwareRAIDVolumes: RAID level {} is not built through Redfish",
                bad.level
            )));
        }
        let (_st, bmc) = self.session(host).await?;
        let have = bmc.volumes().await?;
        // Pair each wanted volume with a distinct volume the BMC has.
        let mut taken = vec![false; have.len()];
        let mut missing = None;
        for (i, want) in wanted.iter().enumerate() {
            match (0..have.len()).find(|j| !taken[*j] && matches(&have[*j], want)) {
                Some(j) => taken[j] = true,
                None => {
                    missing.get_or_insert(i);
                }
            }
        }
        if let Some(j) = taken.iter().position(|t| !t) {
            let old = &have[j];
            bmc.delete_volume(&old.path).await?;
            return self.step_waiting(&format!(
                "RAID volume {} ({}) deleted",
                old.name, old.raid_type
            ));
        }
        let Some(i) = missing else {
            return Ok(Step::Done(()));
        };
        let want = &wanted[i];
        let kind = raid_type(&want.level).unwrap_or_default();
        let drives = if want.physical_disks.is_empty() {
            match want.number_of_physical_disks {
                Some(n) => {
                    let used: Vec<&String> = have.iter().flat_map(|v| &v.drives).collect();
                    let free: Vec<String> = bmc
                        .drives()
                        .await?
                        .into_iter()
                        .filter(|d| !used.contains(&d))
                        .take(n.max(0) as usize)
                        .collect();
                    if free.len() < n.max(0) as usize {
                        return Err(ProvisionerError::new(
                            ErrorKind::InvalidInput,
                            format!(
                                "spec.raid.hardwareRAIDVolumes[{i}]: {n} drives wanted, {} free",
                                free.len()
                            ),
                        ));
                    }
                    free
                }
                None => Vec::new(),
            }
        } else {
            let all = bmc.drives().await?;
            let mut out = Vec::new();
            for name in &want.physical_disks {
                match all.iter().find(|d| drive_name(d) == name) {
                    Some(d) => out.push(d.clone()),
                    None => {
                        return Err(ProvisionerError::new(
                            ErrorKind::InvalidInput,
                            format!(
                                "spec.raid.hardwareRAIDVolumes[{i}].physicalDisks: the BMC has no \
                                 drive {name}"
                            ),
                        ));
                    }
                }
            }
            out
        };
        let name = want.name.clone().unwrap_or_else(|| format!("volume-{i}"));
        bmc.create_volume(&VolumeRequest {
            name: name.clone(),
            raid_type: kind.to_string(),
            capacity_bytes: want.size_gibibytes.map(|g| g.max(0) as u64 * GIB),
            drives,
        })
        .await?;
        self.step_waiting(&format!("RAID volume {name} ({kind}) created"))
    }
}
