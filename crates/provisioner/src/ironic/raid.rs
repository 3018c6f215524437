//! Software RAID (metal3's `softwareRAIDVolumes`) through Ironic, as metal3 has Ironic build
//! it: the node's RAID interface set to `agent`, its `target_raid_config` set to the volumes
//! (controller `software`), then a manual cleaning with the agent ramdisk that deletes any
//! earlier arrays, wipes the disks' metadata and builds the new ones
//! (`raid.delete_configuration`, `deploy.erase_devices_metadata`, `raid.create_configuration`).
//! Ironic then deploys onto the root array and puts the boot partitions on every member disk.
//!
//! It runs when the host is provisioned, where the redfish provisioner's agent builds the
//! arrays too (preparing only checks and records them). Built is what Ironic records, so a
//! restart of this process neither loses nor repeats the work: the node's `raid_config` naming
//! as many software volumes, of the same levels, as its target names.

use ferrometal_api::SoftwareRaidVolume;
use serde_json::{Value, json};

use super::errors::{Context, Inner};
use super::memo::{Memo, Phase};
use super::node::{provision_state, root_device, str_of, uuid};
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, HostInfo, ProvisionerError, Step};
use reqwest::Method;

/// Ironic's logical disks for metal3's software RAID volumes, as metal3 builds them: no size is
/// `MAX` (the rest of each disk), the member disks as root device hints, and the first volume
/// the root one unless the host names another (a volume's `rootVolume`) or has root device
/// hints of its own.
pub(super) fn logical_disks(volumes: &[SoftwareRaidVolume], has_root_hints: bool) -> Vec<Value> {
    let root_named = volumes.iter().any(|v| v.root_volume);
    volumes
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut d = json!({
                "size_gb": match v.size_gibibytes {
                    Some(g) if g > 0 => json!(g),
                    _ => json!("MAX"),
                },
                "raid_level": v.level,
                "controller": "software",
                "is_root_volume": v.root_volume || (i == 0 && !root_named && !has_root_hints),
            });
            if !v.physical_disks.is_empty() {
                d["physical_disks"] = v.physical_disks.iter().map(root_device).collect();
            }
            d
        })
        .collect()
}

fn software_disks(config: &Value) -> Vec<&Value> {
    config
        .get("logical_disks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|d| d.get("controller").and_then(Value::as_str) == Some("software"))
        .collect()
}

/// What the node's disks need for `wanted` (from [`logical_disks`]).
#[derive(Debug, PartialEq)]
pub(super) enum Work {
    /// Ironic records these arrays built (or none wanted and none built).
    Nothing,
    /// Build `wanted` (after deleting whatever arrays are there).
    Build,
    /// No arrays wanted, and Ironic records some: delete them.
    Remove,
}

pub(super) fn work(node: &Value, wanted: &[Value]) -> Work {
    let built = software_disks(node.get("raid_config").unwrap_or(&Value::Null));
    if wanted.is_empty() {
        return if built.is_empty() {
            Work::Nothing
        } else {
            Work::Remove
        };
    }
    let target = node
        .pointer("/target_raid_config/logical_disks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    // As text: a level sent as "1" may come back as 1.
    let level = |d: &Value| match &d["raid_level"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let done = target == wanted
        && str_of(node, "raid_interface") == "agent"
        && built.iter().map(|d| level(d)).eq(wanted.iter().map(level));
    if done { Work::Nothing } else { Work::Build }
}

/// The node's target RAID for `wanted`: none wanted clears it (`{}`; Ironic refuses an empty
/// list of logical disks), so the deploy that follows no longer sees software RAID.
fn target(wanted: &[Value]) -> Value {
    if wanted.is_empty() {
        json!({})
    } else {
        json!({"logical_disks": wanted})
    }
}

/// The clean steps for `work`, metal3's for software RAID.
fn steps(work: &Work) -> Value {
    let mut steps = vec![
        json!({"interface": "raid", "step": "delete_configuration"}),
        json!({"interface": "deploy", "step": "erase_devices_metadata"}),
    ];
    if *work == Work::Build {
        steps.push(json!({"interface": "raid", "step": "create_configuration"}));
    }
    Value::Array(steps)
}

impl IronicProvisioner {
    /// Brings the node's software RAID in line with `volumes` before it is deployed: `None`
    /// when there is nothing (left) to do and the deploy may go on.
    pub(super) async fn software_raid(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: &Value,
        volumes: &[SoftwareRaidVolume],
    ) -> Inner<Option<Step>> {
        let wanted = logical_disks(volumes, host.root_device_hints.is_some());
        let work = work(node, &wanted);
        let state = provision_state(node);
        let since = str_of(node, "provision_updated_at").to_string();
        // Asked for the cleaning that builds them: (whether the node moved on since).
        let asked = memo.raid_since.as_ref().map(|before| *before != since);
        if work == Work::Nothing {
            memo.raid_since = None;
            return Ok(None);
        }
        let verb = if work == Work::Build {
            "build"
        } else {
            "remove"
        };
        let what = format!("{verb} the software RAID");
        match state {
            "manageable" if asked == Some(true) => {
                memo.raid_since = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!(
                        "Ironic's cleaning ended without a record of the software RAID it was asked \
                         to {verb} (node raid_config: {})",
                        node.get("raid_config").unwrap_or(&Value::Null)
                    ),
                )
                .into())
            }
            "clean failed" if asked == Some(true) => {
                memo.raid_since = None;
                let why = self.failure(node).await;
                // Back to manageable, so a retry starts over.
                self.provision_action(host, node, "manage", None).await?;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("Ironic did not {what}: {why}"),
                )
                .into())
            }
            "available" => {
                self.need_agent(
                    host,
                    "software RAID (spec.raid.softwareRAIDVolumes)",
                    "or remove spec.raid.softwareRAIDVolumes",
                )?;
                self.provision_action(host, node, "manage", None).await?;
                // Kept manageable until the arrays are built (not made available meanwhile).
                memo.phase = Phase::Manageable;
                self.wait(format!("node made manageable to {what}"))
                    .map(Some)
            }
            "manageable" if asked == Some(false) => self
                .wait(format!("Ironic's agent cleans the disks to {what}"))
                .map(Some),
            "manageable" => {
                let mut ops = Vec::new();
                if str_of(node, "raid_interface") != "agent" {
                    ops.push(json!({"op": "replace", "path": "/raid_interface", "value": "agent"}));
                }
                let node = self.patch(host, node, ops).await?;
                self.client
                    .call(
                        Method::PUT,
                        &format!("/v1/nodes/{}/states/raid", uuid(&node)),
                        Some(&target(&wanted)),
                    )
                    .await
                    .ctx(|| format!("setting the target RAID of node {}", host.key))?;
                self.provision_action(
                    host,
                    &node,
                    "clean",
                    Some(json!({"clean_steps": steps(&work)})),
                )
                .await?;
                memo.raid_since = Some(since);
                self.wait(format!(
                    "Ironic's agent cleans the disks to {what} (manual cleaning)"
                ))
                .map(Some)
            }
            "cleaning" | "clean wait" | "enroll" | "verifying" => self
                .wait(format!("Ironic state {state}, then it will {what}"))
                .map(Some),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::RootDeviceHints;

    fn vol(level: &str, size: Option<i64>) -> SoftwareRaidVolume {
        SoftwareRaidVolume {
            root_volume: false,
            size_gibibytes: size,
            level: level.into(),
            physical_disks: Vec::new(),
        }
    }

    #[test]
    fn volumes_become_metal3s_logical_disks() {
        let mut second = vol("0", None);
        second.physical_disks = vec![
            RootDeviceHints {
                device_name: Some("/dev/vda".into()),
                ..Default::default()
            },
            RootDeviceHints {
                device_name: Some("/dev/vdb".into()),
                ..Default::default()
            },
        ];
        let disks = logical_disks(&[vol("1", Some(10)), second.clone()], false);
        assert_eq!(
            Value::Array(disks),
            json!([
                {"size_gb": 10, "raid_level": "1", "controller": "software", "is_root_volume": true},
                {"size_gb": "MAX", "raid_level": "0", "controller": "software",
                 "is_root_volume": false,
                 "physical_disks": [{"name": "/dev/vda"}, {"name": "/dev/vdb"}]},
            ])
        );
        // Root device hints, or a volume named root, leave the first one unmarked.
        let hinted = logical_disks(&[vol("1", Some(0))], true);
        assert_eq!(hinted[0]["is_root_volume"], false);
        assert_eq!(hinted[0]["size_gb"], "MAX");
        second.root_volume = true;
        let named = logical_disks(&[vol("1", None), second], false);
        assert_eq!(
            (&named[0]["is_root_volume"], &named[1]["is_root_volume"]),
            (&json!(false), &json!(true))
        );
    }

    #[test]
    fn the_work_follows_what_ironic_records() {
        let wanted = logical_disks(&[vol("1", None)], false);
        let built = json!({"raid_interface": "agent",
            "target_raid_config": {"logical_disks": wanted.clone()},
            "raid_config": {"logical_disks": [{"raid_level": "1", "controller": "software",
                "size_gb": 4}]}});
        assert_eq!(work(&built, &wanted), Work::Nothing);
        // Target set, cleaning not run yet (or failed): build.
        let mut target_only = built.clone();
        target_only["raid_config"] = json!({});
        assert_eq!(work(&target_only, &wanted), Work::Build);
        // Another level wanted now.
        let other = logical_disks(&[vol("1", None), vol("0", None)], false);
        assert_eq!(work(&built, &other), Work::Build);
        // The RAID interface is not the agent's (as registered): build.
        let mut iface = built.clone();
        iface["raid_interface"] = json!("no-raid");
        assert_eq!(work(&iface, &wanted), Work::Build);
        // None wanted: remove what is built, else nothing.
        assert_eq!(work(&built, &[]), Work::Remove);
        assert_eq!(work(&target_only, &[]), Work::Nothing);
        assert_eq!(work(&json!({}), &[]), Work::Nothing);
        assert_eq!(steps(&Work::Remove).as_array().unwrap().len(), 2);
        // Removing clears the target; building sets it.
        assert_eq!(target(&[]), json!({}));
        assert_eq!(target(&wanted), json!({"logical_disks": wanted}));
        assert_eq!(
            steps(&Work::Build)[2],
            json!({"interface": "raid", "step": "create_configuration"})
        );
    }
}
