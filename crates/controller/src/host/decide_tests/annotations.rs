//! The annotations: pause, status and hardware details, inspect, detach, reboots and
//! operations.

use super::*;

#[test]
fn annotations() {
    check_all(vec![
        case(
            "paused: nothing at all",
            with(fx(S::Available), |f| f.status_mut().powered_on = false).ann(ann::PAUSED, ""),
            None,
            None,
            |d| assert_eq!(*d, Decision::default()),
        ),
        case(
            "paused beats deletion",
            with(fx(S::Provisioned), |f| f.deleting = true).ann(ann::PAUSED, "metal3.io/capm3"),
            None,
            None,
            |d| assert_eq!(*d, Decision::default()),
        ),
        case(
            "status annotation restores a missing status, then goes",
            with(fx(S::None), |f| {
                let mut restored = BareMetalHostStatus::default();
                restored.provisioning.state = S::Provisioned;
                restored.provisioning.id = "moved".into();
                f.annotations.insert(
                    ann::STATUS.into(),
                    serde_json::to_string(&restored).unwrap(),
                );
            }),
            None,
            None,
            |d| {
                assert_eq!(state(d), Some(S::Provisioned));
                assert_eq!(st(d).provisioning.id, "moved");
                assert!(removes(d, ann::STATUS));
                assert!(has_event(d, "StatusRestored"));
            },
        ),
        case(
            "status annotation on a host that has a status is only removed",
            fx(S::Available).ann(ann::STATUS, r#"{"provisioning":{"state":"provisioned"}}"#),
            None,
            None,
            |d| {
                assert!(removes(d, ann::STATUS));
                assert_eq!(d.status, None);
            },
        ),
        case(
            "hardwaredetails fills missing hardware and is removed",
            fx(S::Available).ann(ann::HARDWARE_DETAILS, r#"{"ramMebibytes": 2048}"#),
            None,
            None,
            |d| {
                assert_eq!(st(d).hardware.as_ref().unwrap().ram_mebibytes, 2048);
                assert_eq!(d.hardware_data.as_ref().unwrap().ram_mebibytes, 2048);
                assert!(removes(d, ann::HARDWARE_DETAILS));
            },
        ),
        case(
            "hardwaredetails ignored when inspected hardware exists (still removed)",
            with(fx(S::Available), |f| {
                f.status_mut().hardware = Some(HardwareDetails {
                    ram_mebibytes: 1,
                    ..Default::default()
                })
            })
            .ann(ann::HARDWARE_DETAILS, r#"{"ramMebibytes": 2048}"#),
            None,
            None,
            |d| {
                assert!(removes(d, ann::HARDWARE_DETAILS));
                assert!(d.status.is_none() && d.hardware_data.is_none());
            },
        ),
        case(
            "hardwaredetails overrides hardware when inspection is disabled",
            with(fx(S::Available), |f| {
                f.spec.inspection_mode = Some(InspectionMode::Disabled);
                f.status_mut().hardware = Some(HardwareDetails::default());
            })
            .ann(ann::HARDWARE_DETAILS, r#"{"ramMebibytes": 4096}"#),
            None,
            None,
            |d| assert_eq!(st(d).hardware.as_ref().unwrap().ram_mebibytes, 4096),
        ),
        case(
            "inspect annotation on available → inspecting, annotation removed",
            fx(S::Available).ann(ann::INSPECT, ""),
            None,
            None,
            |d| {
                assert_eq!(state(d), Some(S::Inspecting));
                assert!(removes(d, ann::INSPECT));
            },
        ),
        case(
            "re-inspection refreshes",
            with(fx(S::Inspecting), |f| {
                f.status_mut().hardware = Some(HardwareDetails::default());
                f.status_mut().operation_history.inspect = OperationMetric {
                    start: Some("t".into()),
                    end: None,
                };
            }),
            Some(Call::Inspect { refresh: true }),
            Some(Outcome::Inspected(None)),
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "inspect: disabled does not re-inspect",
            fx(S::Available).ann(ann::INSPECT, "disabled"),
            None,
            None,
            |d| assert!(d.status.is_none() && !removes(d, ann::INSPECT)),
        ),
        case(
            "detach a provisioned host: no deprovision, no power change",
            fx(S::Provisioned).ann(ann::DETACHED, ""),
            Some(Call::Detach),
            Some(Outcome::Done),
            |d| {
                let s = st(d);
                assert_eq!(s.operational_status, OperationalStatus::Detached);
                assert_eq!(s.provisioning.state, S::Provisioned);
                assert!(s.powered_on);
                assert!(has_event(d, "Detached"));
                assert_eq!(d.memo, MemoChange::Forget);
            },
        ),
        case(
            "detach waits outside steady states",
            with(fx(S::Inspecting), |f| {
                f.status_mut().operation_history.inspect.start = Some("t".into())
            })
            .ann(ann::DETACHED, ""),
            Some(Call::Inspect { refresh: false }),
            Some(Outcome::Waiting {
                requeue_after: Duration::from_secs(1),
                reason: "".into(),
            }),
            |d| assert_eq!(d.requeue, Some(Duration::from_secs(1))),
        ),
        case(
            "detach with force acts in any state",
            with(fx(S::Inspecting), |f| {
                f.status_mut().operation_history.inspect.start = Some("t".into())
            })
            .ann(ann::DETACHED, r#"{"force":true}"#),
            Some(Call::Detach),
            Some(Outcome::Done),
            |d| assert_eq!(st(d).operational_status, OperationalStatus::Detached),
        ),
        case(
            "detach failure → registration error (metal3's schema has no detach error)",
            fx(S::Available).ann(ann::DETACHED, ""),
            Some(Call::Detach),
            Some(failed(ErrorKind::Failed, "busy")),
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Registration));
                assert_eq!(st(d).error_message, "detach failed: busy");
                assert_eq!(st(d).operational_status, OperationalStatus::Error);
            },
        ),
        case(
            "detach failure of a provisioned host → provisioned registration error",
            fx(S::Provisioned).ann(ann::DETACHED, ""),
            Some(Call::Detach),
            Some(failed(ErrorKind::Failed, "busy")),
            |d| assert_eq!(st(d).error_type, Some(ErrorType::ProvisionedRegistration)),
        ),
        case(
            "annotation removed → re-attach (register) and resume",
            with(fx(S::Provisioned), |f| {
                f.status_mut().operational_status = OperationalStatus::Detached;
                f.memo = None;
            }),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::On)),
            |d| {
                let s = st(d);
                assert_eq!(s.operational_status, OperationalStatus::Ok);
                assert_eq!(s.provisioning.state, S::Provisioned);
                assert!(has_event(d, "Attached"));
                assert!(matches!(&d.memo, MemoChange::Set(m) if !m.adopted));
            },
        ),
        case(
            "bare reboot on a provisioned host → soft power off, bare key removed",
            fx(S::Provisioned).ann(ann::REBOOT, ""),
            Some(Call::PowerOff(PowerOffMode::Soft)),
            Some(Outcome::Done),
            |d| {
                assert!(!st(d).powered_on);
                assert!(removes(d, ann::REBOOT));
                assert_eq!(d.requeue, Some(Duration::ZERO));
            },
        ),
        case(
            "bare reboot on a host already off → removed, power comes back next",
            with(fx(S::Provisioned), |f| f.status_mut().powered_on = false).ann(ann::REBOOT, ""),
            None,
            None,
            |d| assert!(removes(d, ann::REBOOT)),
        ),
        case(
            "keyed reboot keeps the host off",
            with(fx(S::Provisioned), |f| f.status_mut().powered_on = false)
                .ann("reboot.metal3.io/capm3", ""),
            None,
            None,
            |d| {
                assert!(d.remove_annotations.is_empty());
                assert!(d.status.is_none(), "stays off, no power on");
            },
        ),
        case(
            "hard wins over soft",
            fx(S::Provisioned)
                .ann("reboot.metal3.io/a", r#"{"mode":"soft"}"#)
                .ann("reboot.metal3.io/b", r#"{"mode":"hard"}"#),
            Some(Call::PowerOff(PowerOffMode::Hard)),
            Some(Outcome::Done),
            |d| {
                assert!(!st(d).powered_on);
                assert!(d.remove_annotations.is_empty(), "keyed ones stay");
            },
        ),
        case(
            "disablePowerOff: a bare reboot is one restart, then removed",
            with(fx(S::Provisioned), |f| f.spec.disable_power_off = true).ann(ann::REBOOT, ""),
            Some(Call::Operation(Operation::GracefulRestart)),
            Some(Outcome::Done),
            |d| {
                assert!(removes(d, ann::REBOOT));
                assert!(has_event(d, "Rebooted"));
                assert!(d.status.is_none() || st(d).powered_on);
            },
        ),
        case(
            "disablePowerOff: keyed reboots never hold the host off",
            with(fx(S::Provisioned), |f| f.spec.disable_power_off = true)
                .ann("reboot.metal3.io/x", r#"{"mode":"hard"}"#),
            None,
            None,
            |d| assert!(d.status.is_none() && d.remove_annotations.is_empty()),
        ),
        case(
            "reboot outside provisioned does not count without force",
            fx(S::Available).ann(ann::REBOOT, ""),
            None,
            None,
            |d| assert!(d.status.is_none() && d.remove_annotations.is_empty()),
        ),
        case(
            "forced reboot counts on an available host",
            fx(S::Available).ann(ann::REBOOT, r#"{"force":true}"#),
            Some(Call::PowerOff(PowerOffMode::Hard)),
            Some(Outcome::Done),
            |d| assert!(removes(d, ann::REBOOT)),
        ),
        case(
            "operation runs once, then removed with an Event",
            fx(S::Provisioned).ann(ann::OPERATION, "PowerCycle"),
            Some(Call::Operation(Operation::PowerCycle)),
            Some(Outcome::Done),
            |d| {
                assert!(removes(d, ann::OPERATION));
                assert!(has_event(d, "OperationSucceeded"));
            },
        ),
        case(
            "operation PxeOnce on an available host",
            fx(S::Available).ann(ann::OPERATION, "PxeOnce"),
            Some(Call::Operation(Operation::PxeOnce)),
            Some(Outcome::Done),
            |d| assert!(removes(d, ann::OPERATION)),
        ),
        case(
            "restart of an off host is a recorded no-op",
            with(fx(S::Provisioned), |f| {
                f.status_mut().powered_on = false;
                f.spec.online = false;
            })
            .ann(ann::OPERATION, "GracefulRestart"),
            None,
            None,
            |d| {
                assert!(removes(d, ann::OPERATION));
                assert!(has_event(d, "OperationSkipped"));
            },
        ),
        case(
            "ForceOn of an off host is issued",
            with(fx(S::Provisioned), |f| {
                f.status_mut().powered_on = false;
                f.spec.online = false;
            })
            .ann(ann::OPERATION, "ForceOn"),
            Some(Call::Operation(Operation::ForceOn)),
            Some(Outcome::Done),
            |d| assert!(removes(d, ann::OPERATION)),
        ),
        case(
            "unknown operation → warning Event and removed",
            fx(S::Provisioned).ann(ann::OPERATION, "Explode"),
            None,
            None,
            |d| {
                assert!(removes(d, ann::OPERATION));
                let e = d
                    .events
                    .iter()
                    .find(|e| e.reason == "UnknownOperation")
                    .unwrap();
                assert!(e.warning && e.note.contains("Explode"));
            },
        ),
        case(
            "failed operation keeps the annotation and backs off",
            fx(S::Provisioned).ann(ann::OPERATION, "ForceOff"),
            Some(Call::Operation(Operation::ForceOff)),
            Some(failed(ErrorKind::Unreachable, "connection reset")),
            |d| {
                assert!(!removes(d, ann::OPERATION));
                assert_eq!(st(d).error_type, Some(ErrorType::PowerManagement));
                assert!(has_event(d, "OperationFailed"));
                assert_eq!(d.requeue, Some(Duration::from_secs(10)));
            },
        ),
        case(
            "invalid reboot JSON → warning, ignored",
            fx(S::Provisioned).ann(ann::REBOOT, "{bad"),
            None,
            None,
            |d| {
                assert!(has_event(d, "InvalidAnnotation"));
                assert!(d.remove_annotations.is_empty());
            },
        ),
    ]);
}
