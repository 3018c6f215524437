//! The state machine's transitions, one row per state and outcome: registration, inspection,
//! preparation, provisioning, deprovisioning and adoption.

use super::*;

#[test]
fn transitions() {
    check_all(vec![
        case(
            "new host with BMC → registering, finalizer added",
            with(fx(S::None), |f| f.has_finalizer = false),
            None,
            None,
            |d| {
                assert_eq!(state(d), Some(S::Registering));
                assert_eq!(d.finalizer, Some(FinalizerChange::Add));
                assert!(has_event(d, "Registering"));
                assert_eq!(d.requeue, Some(Duration::ZERO));
                assert!(st(d).operation_history.register.start.is_some());
            },
        ),
        case(
            "new host without BMC → unmanaged",
            with(fx(S::None), |f| f.spec.bmc = None),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Unmanaged)),
        ),
        case(
            "unmanaged gains a BMC → registering",
            fx(S::Unmanaged),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Registering)),
        ),
        case(
            "unmanaged without BMC waits for a change",
            with(fx(S::Unmanaged), |f| f.spec.bmc = None),
            None,
            None,
            |d| {
                assert_eq!(d.status, None);
                assert_eq!(d.requeue, None);
            },
        ),
        case(
            "registering → inspecting",
            fx(S::Registering),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::Off)),
            |d| {
                let s = st(d);
                assert_eq!(s.provisioning.state, S::Inspecting);
                assert_eq!(s.provisioning.id, "id-1");
                assert!(!s.powered_on);
                assert!(s.operation_history.register.end.is_some());
                assert!(has_event(d, "Registered") && has_event(d, "Inspecting"));
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.credentials_version == "1"));
            },
        ),
        case(
            "registering → preparing when inspection is disabled",
            with(fx(S::Registering), |f| {
                f.spec.inspection_mode = Some(InspectionMode::Disabled)
            }),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::On)),
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "registering → preparing with inspect.metal3.io: disabled",
            fx(S::Registering).ann(ann::INSPECT, "disabled"),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::On)),
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "registering → externally provisioned",
            with(fx(S::Registering), |f| f.spec.externally_provisioned = true),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::On)),
            |d| assert_eq!(state(d), Some(S::ExternallyProvisioned)),
        ),
        case(
            "inspecting asks for capacity first",
            fx(S::Inspecting),
            Some(Call::HasCapacity),
            Some(Outcome::Capacity(true)),
            |d| {
                assert_eq!(state(d), Some(S::Inspecting));
                assert!(st(d).operation_history.inspect.start.is_some());
                assert_eq!(d.requeue, Some(Duration::ZERO));
            },
        ),
        case(
            "inspecting without capacity → delayed",
            fx(S::Inspecting),
            Some(Call::HasCapacity),
            Some(Outcome::Capacity(false)),
            |d| {
                assert_eq!(st(d).operational_status, OperationalStatus::Delayed);
                assert!(has_event(d, "Delayed"));
                assert_eq!(d.requeue, Some(Duration::from_secs(30)));
            },
        ),
        case(
            "delayed host that gets capacity is OK again",
            with(fx(S::Provisioning), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.status_mut().operational_status = OperationalStatus::Delayed;
            }),
            Some(Call::HasCapacity),
            Some(Outcome::Capacity(true)),
            |d| {
                assert_eq!(st(d).operational_status, OperationalStatus::Ok);
                assert!(st(d).operation_history.provision.start.is_some());
            },
        ),
        case(
            "inspecting (started) → preparing with hardware data",
            with(fx(S::Inspecting), |f| {
                f.status_mut().operation_history.inspect.start = Some("t".into())
            }),
            Some(Call::Inspect { refresh: false }),
            Some(Outcome::Inspected(Some(HardwareDetails {
                ram_mebibytes: 1024,
                ..Default::default()
            }))),
            |d| {
                assert_eq!(state(d), Some(S::Preparing));
                assert_eq!(st(d).hardware.as_ref().unwrap().ram_mebibytes, 1024);
                assert_eq!(d.hardware_data.as_ref().unwrap().ram_mebibytes, 1024);
                assert!(st(d).operation_history.inspect.end.is_some());
                // No CPU, NIC or disk reported: recorded, named, and the host goes on.
                let c = condition(&st(d).conditions, INSPECTION_INCOMPLETE).unwrap();
                assert_eq!(c.status, "True");
                assert_eq!(
                    c.message,
                    "inspection found no processors, no network interfaces, no disks; recorded what the BMC reports (counts 0) and went on"
                );
                assert!(has_event(d, "InspectionIncomplete"));
                assert!(!has_event(d, "InspectionComplete"));
            },
        ),
        case(
            "a complete inspection clears InspectionIncomplete",
            with(fx(S::Inspecting), |f| {
                f.status_mut().operation_history.inspect.start = Some("t".into());
                f.status_mut().conditions.push(ferrometal_api::Condition {
                    type_: INSPECTION_INCOMPLETE.into(),
                    status: "True".into(),
                    ..Default::default()
                });
            }),
            Some(Call::Inspect { refresh: false }),
            Some(Outcome::Inspected(Some(HardwareDetails {
                ram_mebibytes: 1024,
                cpu: Some(ferrometal_api::CpuDetails {
                    count: 4,
                    ..Default::default()
                }),
                nics: vec![ferrometal_api::NicDetails::default()],
                storage: vec![ferrometal_api::StorageDetails::default()],
                ..Default::default()
            }))),
            |d| {
                assert_eq!(state(d), Some(S::Preparing));
                assert!(condition(&st(d).conditions, INSPECTION_INCOMPLETE).is_none());
                assert!(has_event(d, "InspectionComplete"));
            },
        ),
        case(
            "preparation the provisioner cannot do → blocked: named once, no backoff loop",
            fx(S::Preparing),
            Some(Call::Prepare),
            Some(failed(
                ErrorKind::Unsupported,
                "automated cleaning runs Ironic's agent ramdisk: set --deploy-kernel-url",
            )),
            |d| {
                assert_eq!(state(d), Some(S::Preparing));
                assert_eq!(st(d).error_type, Some(ErrorType::Preparation));
                assert_eq!(st(d).error_count, 1);
                let c = condition(&st(d).conditions, BLOCKED).unwrap();
                assert_eq!(
                    (c.status.as_str(), c.reason.as_str()),
                    ("True", "NotSupported")
                );
                assert!(c.message.contains("--deploy-kernel-url"));
                assert!(has_event(d, "Blocked"));
                // Looked at again after a spec change, a restart, or the longest backoff.
                assert_eq!(d.requeue, Some(timing().backoff_cap));
            },
        ),
        case(
            "still blocked for the same reason → no new event, no growing error count",
            with(fx(S::Preparing), |f| {
                let s = f.status_mut();
                s.error_type = Some(ErrorType::Preparation);
                s.error_message = "needs the agent".into();
                s.error_count = 1;
                s.operational_status = OperationalStatus::Error;
            }),
            Some(Call::Prepare),
            Some(failed(ErrorKind::Unsupported, "needs the agent")),
            |d| {
                assert!(!has_event(d, "Blocked"));
                assert_eq!(d.status.as_ref().map(|s| s.error_count).unwrap_or(1), 1);
                assert_eq!(d.requeue, Some(timing().backoff_cap));
            },
        ),
        case(
            "blocked, then the preparation works → condition and error cleared",
            with(fx(S::Preparing), |f| {
                let s = f.status_mut();
                s.error_type = Some(ErrorType::Preparation);
                s.error_message = "needs the agent".into();
                s.error_count = 1;
                s.conditions.push(ferrometal_api::Condition {
                    type_: BLOCKED.into(),
                    status: "True".into(),
                    ..Default::default()
                });
            }),
            Some(Call::Prepare),
            Some(Outcome::Done),
            |d| {
                assert_eq!(state(d), Some(S::Available));
                assert!(condition(&st(d).conditions, BLOCKED).is_none());
                assert_eq!(st(d).error_type, None);
            },
        ),
        case(
            "inspection waiting → requeue after",
            with(fx(S::Inspecting), |f| {
                f.status_mut().operation_history.inspect.start = Some("t".into())
            }),
            Some(Call::Inspect { refresh: false }),
            Some(Outcome::Waiting {
                requeue_after: Duration::from_secs(7),
                reason: "busy".into(),
            }),
            |d| {
                assert_eq!(d.status, None, "nothing changed: no status write");
                assert_eq!(d.requeue, Some(Duration::from_secs(7)));
            },
        ),
        case(
            "preparing → available",
            fx(S::Preparing),
            Some(Call::Prepare),
            Some(Outcome::Done),
            |d| assert_eq!(state(d), Some(S::Available)),
        ),
        case(
            "legacy ready reads as available",
            fx(S::Ready),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Available)),
        ),
        case(
            "available + image → provisioning",
            with(fx(S::Available), |f| {
                f.spec.image = Some(image("http://img/a.iso"))
            }),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Provisioning)),
        ),
        case(
            "available + customDeploy → provisioning",
            with(fx(S::Available), |f| {
                f.spec.custom_deploy = Some(CustomDeploy {
                    method: "install".into(),
                })
            }),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Provisioning)),
        ),
        case(
            "available + externallyProvisioned → externally provisioned",
            with(fx(S::Available), |f| f.spec.externally_provisioned = true),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::ExternallyProvisioned)),
        ),
        case(
            "provisioning (started) → provisioned, image recorded",
            with(fx(S::Provisioning), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.status_mut().operation_history.provision.start = Some("t".into());
                f.status_mut().powered_on = false;
            }),
            Some(Call::Provision),
            Some(Outcome::Done),
            |d| {
                let s = st(d);
                assert_eq!(s.provisioning.state, S::Provisioned);
                assert_eq!(
                    s.provisioning.image.as_ref().unwrap().url,
                    "http://img/a.iso"
                );
                assert!(s.powered_on);
                assert!(has_event(d, "ProvisioningComplete"));
            },
        ),
        case(
            "provisioning with the image removed → deprovisioning",
            fx(S::Provisioning),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deprovisioning)),
        ),
        case(
            "provisioning with userData in another namespace → error naming the field",
            with(fx(S::Provisioning), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.spec.user_data = Some(SecretReference {
                    name: Some("ud".into()),
                    namespace: Some("other".into()),
                });
            }),
            None,
            None,
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, Some(ErrorType::Provisioning));
                assert!(
                    s.error_message.contains("spec.userData"),
                    "{}",
                    s.error_message
                );
                assert!(s.error_message.contains("other/ud"));
            },
        ),
        case(
            "provisioned with the image changed → deprovisioning",
            with(fx(S::Provisioned), |f| {
                f.spec.image = Some(image("http://img/b.iso"))
            }),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deprovisioning)),
        ),
        case(
            "provisioned with the image removed → deprovisioning",
            with(fx(S::Provisioned), |f| f.spec.image = None),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deprovisioning)),
        ),
        case(
            "deprovisioning (started) → available",
            with(fx(S::Deprovisioning), |f| {
                f.status_mut().operation_history.deprovision.start = Some("t".into())
            }),
            Some(Call::Deprovision),
            Some(Outcome::Done),
            |d| {
                assert_eq!(state(d), Some(S::Available));
                assert!(st(d).provisioning.image.is_none());
                assert!(!st(d).powered_on);
            },
        ),
        case(
            "externally provisioned → provisioned when the flag is cleared (image kept)",
            with(fx(S::ExternallyProvisioned), |f| {
                f.spec.image = Some(image("http://img/a.iso"))
            }),
            None,
            None,
            |d| {
                assert_eq!(state(d), Some(S::Provisioned));
                assert_eq!(
                    st(d).provisioning.image.as_ref().unwrap().url,
                    "http://img/a.iso",
                    "status image copied so nothing is re-provisioned"
                );
            },
        ),
        case(
            "externally provisioned, flag cleared without image → preparing",
            fx(S::ExternallyProvisioned),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
        case(
            "externally provisioned not yet adopted by this process → adopt",
            with(fx(S::ExternallyProvisioned), |f| {
                f.spec.externally_provisioned = true;
                f.memo.as_mut().unwrap().adopted = false;
            }),
            Some(Call::Adopt),
            Some(Outcome::Done),
            |d| assert!(matches!(&d.memo, MemoChange::Set(m) if m.adopted)),
        ),
        case(
            "match profile (legacy) → preparing",
            fx(S::MatchProfile),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Preparing)),
        ),
    ]);
}
