//! Firmware settings: in preparing, and servicing on a provisioned host's reboot.

use super::*;
use ferrometal_provisioner::FirmwareChanges;

fn changes() -> FirmwareChanges {
    FirmwareChanges {
        settings: [("ProcVirtualization".to_string(), "Disabled".to_string())].into(),
        ..Default::default()
    }
}

fn work(on_reboot: bool) -> FirmwareWork {
    FirmwareWork {
        changes: changes(),
        read: Some("2026-01-01T00:00:00Z".into()),
        settings_on_reboot: on_reboot,
        updates_on_reboot: false,
    }
}

fn status(d: &Decision) -> OperationalStatus {
    st(d).operational_status
}

#[test]
fn settings_apply_in_preparing() {
    check_all(vec![
        case(
            "available with changed settings → back to preparing",
            with(fx(S::Available), |f| f.firmware = work(false)),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "available, the same changes already made for this read → stays",
            with(fx(S::Available), |f| {
                f.firmware = work(false);
                f.memo.as_mut().unwrap().settings_done =
                    Some((changes().settings, Some("2026-01-01T00:00:00Z".into())));
            }),
            None,
            None,
            |d| assert_eq!(d.status, None),
        ),
        case(
            "available, the same changes asked by a newer read → preparing again",
            with(fx(S::Available), |f| {
                f.firmware = work(false);
                f.memo.as_mut().unwrap().settings_done =
                    Some((changes().settings, Some("2025-12-31T00:00:00Z".into())));
            }),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "preparing: the settings are changed first",
            with(fx(S::Preparing), |f| f.firmware = work(false)),
            Some(Call::ChangeFirmware(changes())),
            Some(Outcome::Waiting {
                requeue_after: Duration::from_secs(5),
                reason: "staged".into(),
            }),
            |d| {
                assert_eq!(d.requeue, Some(Duration::from_secs(5)));
                assert_eq!(d.status, None, "nothing to write while the BMC works");
            },
        ),
        case(
            "preparing: settings made → remembered, Event, on to the rest of preparing",
            with(fx(S::Preparing), |f| {
                f.firmware = work(false);
                f.status_mut().powered_on = false;
            }),
            Some(Call::ChangeFirmware(changes())),
            Some(Outcome::Done),
            |d| {
                assert!(has_event(d, "FirmwareSettingsApplied"));
                assert!(
                    matches!(&d.memo, MemoChange::Set(m) if m.power_checked.is_none()),
                    "the power is read again"
                );
                assert!(
                    matches!(&d.memo, MemoChange::Set(m) if m.settings_done.as_ref().is_some_and(|(c, _)| *c == changes().settings))
                );
                assert_eq!(d.requeue, Some(Duration::ZERO));
            },
        ),
        case(
            "preparing: the BMC did not take them → preparation error",
            with(fx(S::Preparing), |f| f.firmware = work(false)),
            Some(Call::ChangeFirmware(changes())),
            Some(failed(
                ErrorKind::Failed,
                "did not apply ProcVirtualization",
            )),
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Preparation));
                assert!(st(d).error_message.contains("ProcVirtualization"));
                assert_eq!(state(d), Some(S::Preparing));
            },
        ),
        case(
            "preparing without changes → prepare as before",
            fx(S::Preparing),
            Some(Call::Prepare),
            Some(Outcome::Done),
            |d| assert_eq!(state(d), Some(S::Available)),
        ),
    ]);
}

#[test]
fn provisioned_hosts_change_only_in_servicing() {
    check_all(vec![
        case(
            "provisioned, changes, no onReboot policy → nothing happens",
            with(fx(S::Provisioned), |f| {
                f.firmware = work(false);
                f.status_mut().powered_on = false;
            }),
            Some(Call::PowerOn),
            Some(Outcome::Done),
            |d| {
                assert_eq!(status(d), OperationalStatus::Ok);
                assert_eq!(state(d), Some(S::Provisioned));
            },
        ),
        case(
            "provisioned and on, policy allows → waits for a reboot",
            with(fx(S::Provisioned), |f| f.firmware = work(true)),
            None,
            None,
            |d| assert_eq!(d.status, None),
        ),
        case(
            "off on its way back on, policy allows → servicing, written before the BMC call",
            with(fx(S::Provisioned), |f| {
                f.firmware = work(true);
                f.status_mut().powered_on = false;
            }),
            None,
            None,
            |d| {
                assert_eq!(status(d), OperationalStatus::Servicing);
                assert!(has_event(d, "ServicingStarted"));
                assert_eq!(d.requeue, Some(Duration::ZERO));
            },
        ),
        case(
            "off and held off by `online: false` → no servicing",
            with(fx(S::Provisioned), |f| {
                f.firmware = work(true);
                f.spec.online = false;
                f.status_mut().powered_on = false;
            }),
            None,
            None,
            |d| assert_eq!(d.status, None),
        ),
        case(
            "servicing → the change is made, no power call meanwhile",
            with(fx(S::Provisioned), |f| {
                f.firmware = work(true);
                f.status_mut().powered_on = false;
                f.status_mut().operational_status = OperationalStatus::Servicing;
            }),
            Some(Call::ChangeFirmware(changes())),
            Some(Outcome::Waiting {
                requeue_after: Duration::from_secs(5),
                reason: "booting".into(),
            }),
            |d| assert_eq!(d.requeue, Some(Duration::from_secs(5))),
        ),
        case(
            "servicing done → back to OK, on, still provisioned",
            with(fx(S::Provisioned), |f| {
                f.firmware = work(true);
                f.status_mut().powered_on = false;
                f.status_mut().operational_status = OperationalStatus::Servicing;
            }),
            Some(Call::ChangeFirmware(changes())),
            Some(Outcome::Done),
            |d| {
                assert_eq!(status(d), OperationalStatus::Ok);
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.power_checked.is_none()));
                assert_eq!(state(d), Some(S::Provisioned));
                assert!(has_event(d, "ServicingComplete"));
                assert!(has_event(d, "FirmwareSettingsApplied"));
            },
        ),
        case(
            "servicing fails → servicing error with the BMC's message",
            with(fx(S::Provisioned), |f| {
                f.firmware = work(true);
                f.status_mut().operational_status = OperationalStatus::Servicing;
            }),
            Some(Call::ChangeFirmware(changes())),
            Some(failed(
                ErrorKind::Failed,
                "BMC did not apply ProcVirtualization",
            )),
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Servicing));
                assert_eq!(status(d), OperationalStatus::Error);
                assert!(st(d).error_message.contains("ProcVirtualization"));
            },
        ),
        case(
            "servicing error, the change withdrawn → servicing ends, power as wished",
            with(fx(S::Provisioned), |f| {
                let s = f.status_mut();
                s.error_type = Some(ErrorType::Servicing);
                s.error_message = "x".into();
                s.error_count = 1;
                s.operational_status = OperationalStatus::Error;
            }),
            None,
            None,
            |d| {
                assert_eq!(st(d).error_type, None);
                assert_eq!(status(d), OperationalStatus::Ok);
            },
        ),
    ]);
}

fn update() -> FirmwareChanges {
    FirmwareChanges {
        updates: vec![ferrometal_provisioner::ComponentUpdate {
            component: "bios".into(),
            url: "http://fw/bios-2.bin".into(),
        }],
        ..Default::default()
    }
}

#[test]
fn firmware_updates_follow_their_own_policy() {
    let updating = |settings_on_reboot, updates_on_reboot| FirmwareWork {
        changes: update(),
        read: Some("t".into()),
        settings_on_reboot,
        updates_on_reboot,
    };
    check_all(vec![
        case(
            "preparing: an update is made and recorded",
            with(fx(S::Preparing), |f| f.firmware = updating(false, false)),
            Some(Call::ChangeFirmware(update())),
            Some(Outcome::Done),
            |d| {
                assert!(has_event(d, "FirmwareUpdated"));
                assert_eq!(d.updates_done, update().updates);
                assert!(
                    matches!(&d.memo, MemoChange::Set(m) if m.updates_done == update().updates)
                );
            },
        ),
        case(
            "available, an update made whose record is not read back yet → not made again",
            with(fx(S::Available), |f| {
                f.firmware = updating(false, false);
                f.memo.as_mut().unwrap().updates_done = update().updates;
            }),
            None,
            None,
            |d| assert_eq!(d.status, None),
        ),
        case(
            "provisioned, off on its way on, settings allowed on reboot but not updates → no servicing",
            with(fx(S::Provisioned), |f| {
                f.firmware = updating(true, false);
                f.status_mut().powered_on = false;
            }),
            Some(Call::PowerOn),
            Some(Outcome::Done),
            |d| assert_eq!(status(d), OperationalStatus::Ok),
        ),
        case(
            "provisioned, off on its way on, updates allowed on reboot → servicing",
            with(fx(S::Provisioned), |f| {
                f.firmware = updating(false, true);
                f.status_mut().powered_on = false;
            }),
            None,
            None,
            |d| assert_eq!(status(d), OperationalStatus::Servicing),
        ),
        case(
            "a failed update while servicing → servicing error, nothing recorded",
            with(fx(S::Provisioned), |f| {
                f.firmware = updating(false, true);
                f.status_mut().operational_status = OperationalStatus::Servicing;
            }),
            Some(Call::ChangeFirmware(update())),
            Some(failed(
                ErrorKind::Failed,
                "bios firmware update failed: image verification failed",
            )),
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Servicing));
                assert!(st(d).error_message.contains("verification"));
                assert!(d.updates_done.is_empty());
            },
        ),
    ]);
}

fn mirror() -> Vec<ferrometal_api::HardwareRaidVolume> {
    vec![ferrometal_api::HardwareRaidVolume {
        name: Some("os".into()),
        level: "1".into(),
        ..Default::default()
    }]
}

fn with_raid(state: S, hardware: Option<Vec<ferrometal_api::HardwareRaidVolume>>) -> Fx {
    with(fx(state), |f| {
        f.spec.raid = Some(ferrometal_api::RaidConfig {
            hardware_raid_volumes: hardware,
            software_raid_volumes: None,
        })
    })
}

#[test]
fn hardware_raid_is_built_in_preparing_and_recorded() {
    check_all(vec![
        case(
            "available, RAID asked and not built → preparing",
            with_raid(S::Available, Some(mirror())),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "available, RAID built as asked → stays",
            with(with_raid(S::Available, Some(mirror())), |f| {
                f.status_mut().provisioning.raid = f.spec.raid.clone();
            }),
            None,
            None,
            |d| assert_eq!(d.status, None),
        ),
        case(
            "available, an empty software RAID list → stays (nothing to build)",
            with(fx(S::Available), |f| {
                f.spec.raid = Some(ferrometal_api::RaidConfig {
                    hardware_raid_volumes: None,
                    software_raid_volumes: Some(vec![]),
                })
            }),
            None,
            None,
            |d| assert_ne!(state(d), Some(S::Preparing)),
        ),
        case(
            "preparing: volumes built → recorded, Event",
            with_raid(S::Preparing, Some(mirror())),
            Some(Call::ConfigureRaid(mirror())),
            Some(Outcome::Done),
            |d| {
                let raid = st(d).provisioning.raid.as_ref().unwrap();
                assert_eq!(raid.hardware_raid_volumes.as_deref(), Some(&mirror()[..]));
                assert!(has_event(d, "RAIDConfigured"));
            },
        ),
        case(
            "preparing: the BMC refuses → preparation error",
            with_raid(S::Preparing, Some(mirror())),
            Some(Call::ConfigureRaid(mirror())),
            Some(failed(ErrorKind::Failed, "RAID1 needs at least 2 drives")),
            |d| assert_eq!(st(d).error_type, Some(ErrorType::Preparation)),
        ),
        case(
            "preparing: an empty list removes the volumes",
            with_raid(S::Preparing, Some(vec![])),
            Some(Call::ConfigureRaid(vec![])),
            Some(Outcome::Done),
            |d| assert!(has_event(d, "RAIDConfigured")),
        ),
    ]);
}

fn software(levels: &[&str]) -> Vec<ferrometal_api::SoftwareRaidVolume> {
    levels
        .iter()
        .map(|l| ferrometal_api::SoftwareRaidVolume {
            level: (*l).into(),
            ..Default::default()
        })
        .collect()
}

fn with_software_raid(
    state: S,
    volumes: Vec<ferrometal_api::SoftwareRaidVolume>,
    builds: bool,
) -> Fx {
    with(fx(state), |f| {
        f.spec.raid = Some(ferrometal_api::RaidConfig {
            hardware_raid_volumes: None,
            software_raid_volumes: Some(volumes),
        });
        f.builds_software_raid = builds;
    })
}

#[test]
fn software_raid_is_checked_and_recorded_in_preparing_for_the_deploy_agent() {
    check_all(vec![
        case(
            "available, software RAID asked, not recorded → preparing",
            with_software_raid(S::Available, software(&["1"]), true),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "available, recorded as asked → stays",
            with(
                with_software_raid(S::Available, software(&["1", "0"]), true),
                |f| {
                    f.status_mut().provisioning.raid = f.spec.raid.clone();
                },
            ),
            None,
            None,
            |d| assert_eq!(d.status, None),
        ),
        case(
            "preparing with a deploy agent → recorded without a BMC call, Event, then prepare",
            with_software_raid(S::Preparing, software(&["1", "0"]), true),
            None,
            None,
            |d| {
                let raid = st(d).provisioning.raid.as_ref().unwrap();
                assert_eq!(
                    raid.software_raid_volumes.as_deref(),
                    Some(&software(&["1", "0"])[..])
                );
                assert!(has_event(d, "RAIDConfigured"));
                assert_eq!(d.call, None);
            },
        ),
        case(
            "preparing without a deploy agent → refused, named",
            with_software_raid(S::Preparing, software(&["1"]), false),
            None,
            None,
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Preparation));
                assert!(
                    st(d)
                        .error_message
                        .contains("spec.raid.softwareRAIDVolumes"),
                    "{}",
                    st(d).error_message
                );
                assert!(st(d).provisioning.raid.is_none());
            },
        ),
        case(
            "preparing, first volume not RAID 1 → refused as metal3 refuses it",
            with_software_raid(S::Preparing, software(&["0"]), true),
            None,
            None,
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Preparation));
                assert!(
                    st(d).error_message.contains("[0].level"),
                    "{}",
                    st(d).error_message
                );
            },
        ),
    ]);
}

fn data_image(attached: Option<&str>, deleting: bool) -> DataImageWork {
    DataImageWork {
        url: "http://x/data.iso".into(),
        deleting,
        attached: attached.map(String::from),
        error: None,
    }
}

/// A provisioned host off on its way back on, with `image` a disk image (the CD is free).
fn rebooting(work: DataImageWork) -> Fx {
    with(fx(S::Provisioned), |f| {
        f.status_mut().powered_on = false;
        let mut disk = image("http://img/a.qcow2");
        disk.format = Some(ferrometal_api::ImageFormat::Qcow2);
        f.spec.image = Some(disk.clone());
        f.status_mut().provisioning.image = Some(disk);
        f.data_image = Some(work);
    })
}

#[test]
fn data_images_are_attached_and_detached_on_the_way_back_on() {
    check_all(vec![
        case(
            "off on its way on, not attached → attach, recorded",
            rebooting(data_image(None, false)),
            Some(Call::DataImage(Some("http://x/data.iso".into()))),
            Some(Outcome::Done),
            |d| {
                assert_eq!(
                    d.data_image,
                    Some(DataImageResult::Attached("http://x/data.iso".into()))
                );
                assert!(has_event(d, "DataImageAttached"));
            },
        ),
        case(
            "attached already → power on as usual",
            rebooting(data_image(Some("http://x/data.iso"), false)),
            Some(Call::PowerOn),
            Some(Outcome::Done),
            |d| assert_eq!(d.data_image, None),
        ),
        case(
            "being deleted → detach",
            rebooting(data_image(Some("http://x/data.iso"), true)),
            Some(Call::DataImage(None)),
            Some(Outcome::Done),
            |d| assert_eq!(d.data_image, Some(DataImageResult::Detached)),
        ),
        case(
            "the BMC refuses → recorded on the DataImage, not tried again, the host goes on",
            rebooting(data_image(None, false)),
            Some(Call::DataImage(Some("http://x/data.iso".into()))),
            Some(failed(ErrorKind::Failed, "no virtual media")),
            |d| {
                assert!(
                    matches!(&d.data_image, Some(DataImageResult::Failed(m)) if m.contains("no virtual media"))
                );
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.data_image_failed.is_some()));
                assert_eq!(
                    st_or_none(d).and_then(|s| s.error_type),
                    None,
                    "not a host error"
                );
            },
        ),
        case(
            "a live ISO in the CD → refused without a BMC call",
            with(fx(S::Provisioned), |f| {
                f.status_mut().powered_on = false;
                f.data_image = Some(data_image(None, false));
            }),
            Some(Call::PowerOn),
            Some(Outcome::Done),
            |d| {
                assert!(
                    matches!(&d.data_image, Some(DataImageResult::Failed(m)) if m.contains("live ISO"))
                )
            },
        ),
        case(
            "on and running → nothing until the next boot",
            with(rebooting(data_image(None, false)), |f| {
                f.status_mut().powered_on = true
            }),
            None,
            None,
            |d| assert_eq!(d.data_image, None),
        ),
    ]);
}

fn st_or_none(d: &Decision) -> Option<&ferrometal_api::BareMetalHostStatus> {
    d.status.as_ref()
}
