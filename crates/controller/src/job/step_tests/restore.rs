//! The restore's rows: back to the host's desired state after the tasks, and a failed job's
//! restore beside its Failed condition.

use super::*;

#[test]
fn restore_steps() {
    use TaskState::*;
    let rows = vec![
        Row {
            seen: Some(Seen::Media {
                inserted: true,
                image: Some("http://images/tools.iso".into()),
            }),
            ..row(
                "restore: media still in: eject (harmless to repeat)",
                reimage(),
                restoring(
                    RestoreStatus {
                        media_changed: true,
                        clear_boot: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| assert_eq!(s.act, Some(Act::EjectMedia)),
            )
        },
        Row {
            seen: Some(Seen::Media {
                inserted: false,
                image: None,
            }),
            ..row(
                "restore: slot empty: eject done",
                reimage(),
                restoring(
                    RestoreStatus {
                        media_changed: true,
                        clear_boot: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| {
                    assert!(!s.status.restore.as_ref().unwrap().media_changed);
                    assert!(s.act.is_none());
                },
            )
        },
        row(
            "restore: the boot override put back as it was",
            reimage(),
            restoring(
                RestoreStatus {
                    clear_boot: true,
                    boot_saved: true,
                    boot_before: Some(SavedBoot {
                        device: "Hdd".into(),
                        ..SavedBoot::default()
                    }),
                    ..RestoreStatus::default()
                },
                4,
            ),
            |s| {
                assert_eq!(
                    s.act,
                    Some(Act::RestoreBoot(Some(SavedBoot {
                        device: "Hdd".into(),
                        ..SavedBoot::default()
                    })))
                );
                assert!(!s.status.restore.as_ref().unwrap().clear_boot);
            },
        ),
        row(
            "restore: no override before the job: cleared",
            reimage(),
            restoring(
                RestoreStatus {
                    clear_boot: true,
                    boot_saved: true,
                    ..RestoreStatus::default()
                },
                4,
            ),
            |s| assert_eq!(s.act, Some(Act::RestoreBoot(None))),
        ),
        Row {
            seen: Some(Seen::Power(PowerState::Off)),
            ..row(
                "restore: spec.online true and the host off: power on, once",
                reimage(),
                restoring(RestoreStatus::default(), 4),
                |s| {
                    assert_eq!(s.act, Some(Act::Power(PowerAction::On)));
                    assert!(s.status.restore.as_ref().unwrap().power_issued);
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::Off)),
            ..row(
                "restore: power sent but not yet seen: not sent again",
                reimage(),
                restoring(
                    RestoreStatus {
                        power_issued: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| assert_eq!((s.act.clone(), s.requeue), (None, Some(POLL))),
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::On)),
            ..row(
                "restore: desired power observed: completed",
                reimage(),
                restoring(
                    RestoreStatus {
                        power_issued: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Completed);
                    assert_eq!(s.status.restore.as_ref().unwrap().state, Succeeded);
                    assert_eq!(
                        cond(s, "Completed").1,
                        "all tasks succeeded; desired state restored"
                    );
                    assert!(s.events.iter().any(|e| e.reason == "JobCompleted"));
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::Off)),
            host: HostView::Ready {
                online: false,
                media: None,
            },
            ..row(
                "restore after a failed task: the job stays Failed, restore recorded",
                reimage(),
                failed(RestoreStatus::default()),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    assert_eq!(s.status.completion_time.as_deref(), Some(T0));
                    assert_eq!(
                        cond(s, "Failed").1,
                        "task 2 failed: boom; desired state restored"
                    );
                    assert_eq!(s.status.restore.as_ref().unwrap().state, Succeeded);
                    assert!(!restore_pending(&s.status));
                    assert!(s.events.iter().any(|e| e.reason == "RestoreSucceeded"));
                    assert!(!s.events.iter().any(|e| e.reason == "JobFailed"));
                },
            )
        },
        Row {
            seen: Some(Seen::Error("BMC 10.0.0.1:443: HTTP 500".into())),
            ..row(
                "restore of a failed job: the BMC fails: retried, saying until when",
                reimage(),
                failed(RestoreStatus::default()),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    let r = s.status.restore.as_ref().unwrap();
                    assert_eq!(r.state, Running);
                    assert_eq!(
                        r.message,
                        "retrying until 2026-01-01T00:04:00Z: BMC 10.0.0.1:443: HTTP 500"
                    );
                    assert_eq!(s.requeue, Some(POLL));
                },
            )
        },
        Row {
            seen: Some(Seen::Error("BMC 10.0.0.1:443: HTTP 500".into())),
            at: 241,
            ..row(
                "restore of a failed job: past its bound: the restore fails",
                reimage(),
                failed(RestoreStatus::default()),
                |s| {
                    let r = s.status.restore.as_ref().unwrap();
                    assert_eq!(r.state, Failed);
                    assert_eq!(
                        cond(s, "Failed").1,
                        "task 2 failed: boom; restore failed: BMC 10.0.0.1:443: HTTP 500"
                    );
                    assert!(s.events.iter().any(|e| e.reason == "RestoreFailed"));
                },
            )
        },
        Row {
            seen: Some(Seen::Media {
                inserted: true,
                image: Some("http://images/tools.iso".into()),
            }),
            host: HostView::Ready {
                online: true,
                media: Some(ISO.into()),
            },
            ..row(
                "restore: a provisioned live ISO host: its ISO goes back in",
                reimage(),
                restoring(
                    RestoreStatus {
                        media_changed: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| assert_eq!(s.act, Some(Act::InsertMedia(ISO.into()))),
            )
        },
        Row {
            seen: Some(Seen::Media {
                inserted: true,
                image: Some(ISO.into()),
            }),
            host: HostView::Ready {
                online: true,
                media: Some(ISO.into()),
            },
            ..row(
                "restore: its ISO is back: the boot it needs next",
                reimage(),
                restoring(
                    RestoreStatus {
                        media_changed: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| {
                    let r = s.status.restore.as_ref().unwrap();
                    assert!(!r.media_changed && r.clear_boot);
                    assert!(s.act.is_none());
                },
            )
        },
        Row {
            host: HostView::Ready {
                online: true,
                media: Some(ISO.into()),
            },
            ..row(
                "restore: a live ISO host the job booted: Cd once, then a restart",
                reimage(),
                restoring(
                    RestoreStatus {
                        clear_boot: true,
                        booted: true,
                        boot_saved: true,
                        boot_before: Some(SavedBoot {
                            device: "Hdd".into(),
                            once: false,
                            mode: Some("UEFI".into()),
                        }),
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| {
                    assert_eq!(
                        s.act,
                        Some(Act::RestoreBoot(Some(SavedBoot {
                            device: "Cd".into(),
                            once: true,
                            mode: Some("UEFI".into()),
                        })))
                    );
                    assert!(s.status.restore.as_ref().unwrap().restart);
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::On)),
            host: HostView::Ready {
                online: true,
                media: Some(ISO.into()),
            },
            ..row(
                "restore: on, but running what the job booted: restarted once",
                reimage(),
                restoring(
                    RestoreStatus {
                        restart: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| {
                    assert_eq!(s.act, Some(Act::Power(PowerAction::Reset)));
                    assert!(s.status.restore.as_ref().unwrap().power_issued);
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::On)),
            host: HostView::Ready {
                online: true,
                media: Some(ISO.into()),
            },
            ..row(
                "restore: restart sent and the host on: restored",
                reimage(),
                restoring(
                    RestoreStatus {
                        restart: true,
                        power_issued: true,
                        ..RestoreStatus::default()
                    },
                    4,
                ),
                |s| {
                    assert!(s.act.is_none());
                    assert_eq!(s.status.phase, JobPhase::Completed);
                },
            )
        },
    ];
    check_rows(&rows);
}
