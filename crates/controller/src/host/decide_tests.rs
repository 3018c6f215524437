//! Table-driven tests of the pure state machine: one row per transition and annotation rule.

use std::collections::BTreeMap;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::annotations::Operation;
use ferrometal_api::{
    BareMetalHostSpec, BareMetalHostStatus, BmcDetails, CredentialsStatus, CustomDeploy, ErrorType,
    HardwareDetails, Image, ImageFormat, InspectionMode, OperationMetric, OperationalStatus,
    ProvisioningState as S,
};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::{ErrorKind, PowerOffMode, ProvisionerError, Registration};
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::jiff::Timestamp;

use super::decide::*;
use crate::conditions::{BLOCKED, INSPECTION_INCOMPLETE, condition};
use crate::config::Timing;
use crate::secrets::CredentialsObservation;

fn now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn timing() -> Timing {
    Timing {
        power_poll_interval: Duration::from_secs(60),
        backoff_base: Duration::from_secs(10),
        backoff_cap: Duration::from_secs(600),
        delayed_retry: Duration::from_secs(30),
        detached_recheck: Duration::from_secs(600),
        max_provisioning_retries: 5,
    }
}

#[derive(Clone)]
struct Fx {
    spec: BareMetalHostSpec,
    status: Option<BareMetalHostStatus>,
    annotations: BTreeMap<String, String>,
    deleting: bool,
    has_finalizer: bool,
    credentials: CredentialsObservation,
    memo: Option<Memo>,
    timing: Timing,
}

fn image(url: &str) -> Image {
    Image {
        url: url.into(),
        checksum: None,
        checksum_type: None,
        format: Some(ImageFormat::LiveIso),
        oci_auth_secret_name: None,
    }
}

fn fx(state: S) -> Fx {
    let mut status = BareMetalHostStatus::default();
    status.provisioning.state = state;
    status.powered_on = true;
    status.last_updated = Some("2025-12-31T00:00:00Z".into());
    status.good_credentials = Some(CredentialsStatus {
        credentials: Some(SecretReference {
            name: Some("bmc".into()),
            namespace: Some("ns".into()),
        }),
        credentials_version: Some("1".into()),
    });
    status.tried_credentials = status.good_credentials.clone();
    if matches!(state, S::Provisioned) {
        status.provisioning.image = Some(image("http://img/a.iso"));
    }
    update_conditions(
        &mut status,
        Some(1),
        "2025-12-31T00:00:00Z".parse().unwrap(),
    );
    let spec = BareMetalHostSpec {
        bmc: Some(BmcDetails {
            address: "redfish+http://10.0.0.1/redfish/v1/Systems/1".into(),
            credentials_name: "bmc".into(),
            disable_certificate_verification: false,
        }),
        online: true,
        image: matches!(state, S::Provisioned).then(|| image("http://img/a.iso")),
        ..Default::default()
    };
    Fx {
        spec,
        status: (state != S::None).then_some(status),
        annotations: BTreeMap::new(),
        deleting: false,
        has_finalizer: true,
        credentials: CredentialsObservation::Found {
            secret: "bmc".into(),
            version: "1".into(),
        },
        memo: Some(Memo {
            credentials_version: "1".into(),
            adopted: true,
            power_checked: Some(now()),
        }),
        timing: timing(),
    }
}

impl Fx {
    fn ann(mut self, k: &str, v: &str) -> Fx {
        self.annotations.insert(k.into(), v.into());
        self
    }
    fn status_mut(&mut self) -> &mut BareMetalHostStatus {
        self.status.get_or_insert_with(Default::default)
    }
    fn input(&self, last: Option<(Call, Outcome)>) -> Input<'_> {
        Input {
            namespace: "ns",
            spec: &self.spec,
            status: self.status.as_ref(),
            annotations: &self.annotations,
            generation: Some(1),
            deleting: self.deleting,
            has_finalizer: self.has_finalizer,
            credentials: self.credentials.clone(),
            memo: self.memo.as_ref(),
            last,
            now: now(),
            jitter: 0.5,
            timing: &self.timing,
        }
    }
}

fn failed(kind: ErrorKind, msg: &str) -> Outcome {
    Outcome::Failed(ProvisionerError::new(kind, msg))
}

fn registered(power: PowerState) -> Outcome {
    Outcome::Registered(Registration {
        provisioner_id: "id-1".into(),
        power,
    })
}

fn state(d: &Decision) -> Option<S> {
    d.status.as_ref().map(|s| s.provisioning.state)
}

fn st(d: &Decision) -> &BareMetalHostStatus {
    d.status.as_ref().expect("a status write")
}

fn has_event(d: &Decision, reason: &str) -> bool {
    d.events.iter().any(|e| e.reason == reason)
}

fn removes(d: &Decision, key: &str) -> bool {
    d.remove_annotations.iter().any(|k| k == key)
}

struct Case {
    name: &'static str,
    fx: Fx,
    /// The call the first pass asks for.
    call: Option<Call>,
    /// Its outcome, fed to the second pass.
    outcome: Option<Outcome>,
    check: fn(&Decision),
}

fn case(
    name: &'static str,
    fx: Fx,
    call: Option<Call>,
    outcome: Option<Outcome>,
    check: fn(&Decision),
) -> Case {
    Case {
        name,
        fx,
        call,
        outcome,
        check,
    }
}

fn run(c: &Case) -> Decision {
    let first = decide(&c.fx.input(None));
    assert_eq!(first.call, c.call, "{}: first-pass call", c.name);
    match (&c.call, &c.outcome) {
        (Some(call), Some(outcome)) => {
            let second = decide(&c.fx.input(Some((call.clone(), outcome.clone()))));
            assert_eq!(second.call, None, "{}: second pass makes no call", c.name);
            second
        }
        (None, None) => first,
        _ => panic!("{}: a call needs an outcome", c.name),
    }
}

fn check_all(cases: Vec<Case>) {
    for c in &cases {
        let d = run(c);
        (c.check)(&d);
        // Determinism: the same input gives the same decision.
        let again = match (&c.call, &c.outcome) {
            (Some(call), Some(o)) => decide(&c.fx.input(Some((call.clone(), o.clone())))),
            _ => decide(&c.fx.input(None)),
        };
        assert_eq!(d, again, "{}: deterministic", c.name);
    }
}

fn with<F: FnOnce(&mut Fx)>(mut f: Fx, tweak: F) -> Fx {
    tweak(&mut f);
    // Keep the fixture's conditions consistent so only real changes show as status writes.
    if let Some(s) = f.status.as_mut() {
        update_conditions(s, Some(1), "2025-12-31T00:00:00Z".parse().unwrap());
    }
    f
}

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

#[test]
fn steady_state_power() {
    check_all(vec![
        case(
            "available, power matches, poll not due → nothing, requeue ~ poll interval",
            fx(S::Available),
            None,
            None,
            |d| {
                assert_eq!(d.status, None, "no status write per poll");
                let r = d.requeue.unwrap();
                assert!(
                    r >= Duration::from_secs(54) && r <= Duration::from_secs(66),
                    "{r:?}"
                );
            },
        ),
        case(
            "poll due → one power_state call; unchanged → no status write",
            with(fx(S::Provisioned), |f| {
                f.memo.as_mut().unwrap().power_checked = None
            }),
            Some(Call::PowerState),
            Some(Outcome::Power(PowerState::On)),
            |d| {
                assert_eq!(d.status, None);
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.power_checked.is_some()));
            },
        ),
        case(
            "poll finds the host off while online → status updated, act at once",
            with(fx(S::Provisioned), |f| {
                f.memo.as_mut().unwrap().power_checked = None
            }),
            Some(Call::PowerState),
            Some(Outcome::Power(PowerState::Off)),
            |d| {
                assert!(!st(d).powered_on);
                assert_eq!(d.requeue, Some(Duration::ZERO));
            },
        ),
        case(
            "online but off → power on",
            with(fx(S::Available), |f| f.status_mut().powered_on = false),
            Some(Call::PowerOn),
            Some(Outcome::Done),
            |d| {
                assert!(st(d).powered_on);
                assert!(has_event(d, "PowerOn"));
            },
        ),
        case(
            "offline but on → soft power off",
            with(fx(S::Provisioned), |f| f.spec.online = false),
            Some(Call::PowerOff(PowerOffMode::Soft)),
            Some(Outcome::Done),
            |d| assert!(!st(d).powered_on),
        ),
        case(
            "power call fails → power management error with backoff",
            with(fx(S::Available), |f| f.status_mut().powered_on = false),
            Some(Call::PowerOn),
            Some(failed(ErrorKind::Unreachable, "BMC 10.0.0.1 timed out")),
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, Some(ErrorType::PowerManagement));
                assert_eq!(s.error_count, 1);
                assert_eq!(s.operational_status, OperationalStatus::Error);
                assert!(s.error_message.contains("timed out"));
                assert_eq!(d.requeue, Some(Duration::from_secs(10)));
                assert_eq!(d.error_category, Some("unreachable"));
                assert!(has_event(d, "PowerManagementError"));
            },
        ),
        case(
            "host in error polls at once and recovers when the BMC is back",
            with(fx(S::Available), |f| {
                let s = f.status_mut();
                s.error_type = Some(ErrorType::PowerManagement);
                s.error_message = "timed out".into();
                s.error_count = 3;
                s.operational_status = OperationalStatus::Error;
            }),
            Some(Call::PowerState),
            Some(Outcome::Power(PowerState::On)),
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, None);
                assert_eq!(s.error_count, 0);
                assert_eq!(s.error_message, "");
                assert_eq!(s.operational_status, OperationalStatus::Ok);
            },
        ),
        case(
            "detached host is left alone",
            with(fx(S::Provisioned), |f| {
                f.status_mut().operational_status = OperationalStatus::Detached;
                f.memo = None;
            })
            .ann(ann::DETACHED, ""),
            None,
            None,
            |d| {
                assert_eq!(d.status, None);
                assert_eq!(d.requeue, Some(Duration::from_secs(600)));
            },
        ),
    ]);
}

#[test]
fn backoff_is_exponential_jittered_and_capped() {
    let t = timing();
    assert_eq!(backoff(&t, 1, 0.5), Duration::from_secs(10));
    assert_eq!(backoff(&t, 2, 0.5), Duration::from_secs(20));
    assert_eq!(backoff(&t, 4, 0.5), Duration::from_secs(80));
    assert_eq!(backoff(&t, 30, 0.5), Duration::from_secs(600));
    assert!(backoff(&t, 3, 0.0) < backoff(&t, 3, 0.99));
    assert!(backoff(&t, 30, 0.99) <= Duration::from_secs(600));
}

#[test]
fn errors_and_credentials() {
    check_all(vec![
        case(
            "wrong credentials → registration error, backoff grows",
            with(fx(S::Registering), |f| {
                let s = f.status_mut();
                s.error_count = 2;
                s.good_credentials = None;
            }),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(failed(
                ErrorKind::Credentials,
                "BMC refused the credentials (401)",
            )),
            |d| {
                let s = st(d);
                assert_eq!(s.provisioning.state, S::Registering);
                assert_eq!(s.error_type, Some(ErrorType::Registration));
                assert_eq!(s.error_count, 3);
                assert_eq!(d.requeue, Some(Duration::from_secs(40)));
                assert_eq!(
                    s.tried_credentials
                        .as_ref()
                        .unwrap()
                        .credentials_version
                        .as_deref(),
                    Some("1")
                );
                assert!(s.good_credentials.is_none());
                assert_eq!(d.error_category, Some("credentials"));
            },
        ),
        case(
            "missing Secret → registration error naming it",
            with(fx(S::Registering), |f| {
                f.credentials = CredentialsObservation::Missing {
                    secret: "bmc".into(),
                }
            }),
            None,
            None,
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, Some(ErrorType::Registration));
                assert!(s.error_message.contains("ns/bmc"), "{}", s.error_message);
            },
        ),
        case(
            "Secret without password → registration error naming the key",
            with(fx(S::Available), |f| {
                f.credentials = CredentialsObservation::MissingKey {
                    secret: "bmc".into(),
                    key: "password",
                }
            }),
            None,
            None,
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, Some(ErrorType::Registration));
                assert!(
                    s.error_message.contains("\"password\""),
                    "{}",
                    s.error_message
                );
            },
        ),
        case(
            "provisioned host with missing Secret → provisioned registration error",
            with(fx(S::Provisioned), |f| {
                f.credentials = CredentialsObservation::Missing {
                    secret: "bmc".into(),
                }
            }),
            None,
            None,
            |d| assert_eq!(st(d).error_type, Some(ErrorType::ProvisionedRegistration)),
        ),
        case(
            "Secret changed → re-register with credentials_changed, goodCredentials updated",
            with(fx(S::Provisioned), |f| {
                f.credentials = CredentialsObservation::Found {
                    secret: "bmc".into(),
                    version: "2".into(),
                }
            }),
            Some(Call::Register {
                credentials_changed: true,
            }),
            Some(registered(PowerState::On)),
            |d| {
                let s = st(d);
                assert_eq!(s.provisioning.state, S::Provisioned, "no re-provisioning");
                assert_eq!(
                    s.good_credentials
                        .as_ref()
                        .unwrap()
                        .credentials_version
                        .as_deref(),
                    Some("2")
                );
                assert!(has_event(d, "CredentialsChanged"));
            },
        ),
        case(
            "fixed Secret after a registration error → registering recovers",
            with(fx(S::Registering), |f| {
                let s = f.status_mut();
                s.error_type = Some(ErrorType::Registration);
                s.error_count = 4;
                s.error_message = "401".into();
                s.operational_status = OperationalStatus::Error;
                s.good_credentials = None;
                f.credentials = CredentialsObservation::Found {
                    secret: "bmc".into(),
                    version: "2".into(),
                };
            }),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::On)),
            |d| {
                let s = st(d);
                assert_eq!(s.error_count, 0);
                assert_eq!(s.error_type, None);
                assert_eq!(s.operational_status, OperationalStatus::Ok);
                assert_eq!(s.provisioning.state, S::Inspecting);
            },
        ),
        case(
            "after a restart (no memo) an available host registers again first",
            with(fx(S::Available), |f| f.memo = None),
            Some(Call::Register {
                credentials_changed: false,
            }),
            Some(registered(PowerState::On)),
            |d| {
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.credentials_version == "1"));
                assert_eq!(d.requeue, Some(Duration::ZERO));
            },
        ),
        case(
            "provisioned host after a restart is adopted, not re-provisioned",
            with(fx(S::Provisioned), |f| {
                f.memo = Some(Memo {
                    credentials_version: "1".into(),
                    adopted: false,
                    power_checked: Some(now()),
                })
            }),
            Some(Call::Adopt),
            Some(Outcome::Done),
            |d| assert!(matches!(&d.memo, MemoChange::Set(m) if m.adopted)),
        ),
        case(
            "adopt failure → provisioned registration error",
            with(fx(S::Provisioned), |f| {
                f.memo.as_mut().unwrap().adopted = false
            }),
            Some(Call::Adopt),
            Some(failed(ErrorKind::Failed, "no such system")),
            |d| assert_eq!(st(d).error_type, Some(ErrorType::ProvisionedRegistration)),
        ),
        case(
            "inspection failure → inspection error",
            with(fx(S::Inspecting), |f| {
                f.status_mut().operation_history.inspect.start = Some("t".into())
            }),
            Some(Call::Inspect { refresh: false }),
            Some(failed(ErrorKind::Failed, "Processors missing")),
            |d| assert_eq!(st(d).error_type, Some(ErrorType::Inspection)),
        ),
        case(
            "preparation failure → preparation error",
            fx(S::Preparing),
            Some(Call::Prepare),
            Some(failed(ErrorKind::Failed, "cleaning failed")),
            |d| assert_eq!(st(d).error_type, Some(ErrorType::Preparation)),
        ),
        case(
            "provisioning failure → provisioning error",
            with(fx(S::Provisioning), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.status_mut().operation_history.provision.start = Some("t".into());
            }),
            Some(Call::Provision),
            Some(failed(ErrorKind::Unsupported, "IPMI cannot boot an image")),
            |d| {
                assert_eq!(st(d).error_type, Some(ErrorType::Provisioning));
                assert_eq!(st(d).provisioning.state, S::Provisioning);
                assert_eq!(st(d).provisioning_fail_count, 1);
                assert_eq!(
                    st(d).last_attempted_image.as_ref().map(|i| i.url.as_str()),
                    Some("http://img/a.iso")
                );
            },
        ),
        case(
            "the failure reaching the retry limit → deprovisioning",
            with(fx(S::Provisioning), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.status_mut().operation_history.provision.start = Some("t".into());
                f.status_mut().provisioning_fail_count = 4;
            }),
            Some(Call::Provision),
            Some(failed(ErrorKind::Failed, "deploy failed")),
            |d| {
                assert_eq!(st(d).provisioning_fail_count, 5);
                assert_eq!(st(d).provisioning.state, S::Deprovisioning);
            },
        ),
        case(
            "available at the retry limit with the same image → stays, error says why",
            with(fx(S::Available), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.status_mut().provisioning_fail_count = 5;
                f.status_mut().last_attempted_image = Some(image("http://img/a.iso"));
            }),
            None,
            None,
            |d| {
                assert_eq!(st(d).provisioning.state, S::Available);
                assert_eq!(st(d).error_type, Some(ErrorType::Provisioning));
                assert_eq!(
                    st(d).error_message,
                    "provisioning failed 5 times, retry limit (5) reached; change image or reset provisioningFailCount to retry"
                );
                assert_eq!(d.call, None);
            },
        ),
        case(
            "at the retry limit, a later power poll keeps the error and adds no Warning",
            with(fx(S::Available), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                let s = f.status_mut();
                s.provisioning_fail_count = 5;
                s.last_attempted_image = Some(image("http://img/a.iso"));
                s.error_type = Some(ErrorType::Provisioning);
                s.error_message = "provisioning failed 5 times, retry limit (5) reached; change image or reset provisioningFailCount to retry".into();
                s.operational_status = OperationalStatus::Error;
                f.memo.as_mut().unwrap().power_checked = None;
            }),
            Some(Call::PowerState),
            Some(Outcome::Power(PowerState::On)),
            |d| {
                // Unchanged, so no status write at all (the error stays as stored).
                if let Some(s) = &d.status {
                    assert_eq!(s.error_type, Some(ErrorType::Provisioning));
                    assert_eq!(s.error_count, 0, "a standing condition, not a new failure");
                }
                assert!(d.events.is_empty(), "{:?}", d.events);
            },
        ),
        case(
            "an unreachable provisioner does not count as a failed attempt",
            with(fx(S::Provisioning), |f| {
                f.spec.image = Some(image("http://img/a.iso"));
                f.status_mut().operation_history.provision.start = Some("t".into());
                f.status_mut().provisioning_fail_count = 4;
            }),
            Some(Call::Provision),
            Some(failed(ErrorKind::Unreachable, "connection refused")),
            |d| {
                assert_eq!(st(d).provisioning_fail_count, 4);
                assert_eq!(st(d).provisioning.state, S::Provisioning);
            },
        ),
        case(
            "available at the retry limit with another image → provisions again",
            with(fx(S::Available), |f| {
                f.spec.image = Some(image("http://img/b.iso"));
                f.status_mut().provisioning_fail_count = 5;
                f.status_mut().last_attempted_image = Some(image("http://img/a.iso"));
            }),
            None,
            None,
            |d| {
                assert_eq!(st(d).provisioning.state, S::Provisioning);
                assert_eq!(st(d).provisioning_fail_count, 0);
            },
        ),
        case(
            "image removed → failed attempts forgotten",
            with(fx(S::Available), |f| {
                f.status_mut().provisioning_fail_count = 5;
                f.status_mut().last_attempted_image = Some(image("http://img/a.iso"));
            }),
            None,
            None,
            |d| {
                assert_eq!(st(d).provisioning_fail_count, 0);
                assert_eq!(st(d).last_attempted_image, None);
            },
        ),
    ]);
}

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

#[test]
fn deletion() {
    let deleting = |state: S| with(fx(state), |f| f.deleting = true);
    check_all(vec![
        case(
            "no finalizer: nothing to do",
            with(deleting(S::Available), |f| f.has_finalizer = false),
            None,
            None,
            |d| {
                assert_eq!(d.finalizer, None);
                assert_eq!(d.requeue, None);
            },
        ),
        case(
            "registering → deleting",
            deleting(S::Registering),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deleting)),
        ),
        case(
            "unmanaged → deleting",
            deleting(S::Unmanaged),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deleting)),
        ),
        case(
            "new host → deleting",
            deleting(S::None),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deleting)),
        ),
        case(
            "provisioned → deprovisioning",
            deleting(S::Provisioned),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deprovisioning)),
        ),
        case(
            "provisioning → deprovisioning",
            with(deleting(S::Provisioning), |f| {
                f.spec.image = Some(image("http://x"))
            }),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deprovisioning)),
        ),
        case(
            "provisioned with many errors → skip deprovision",
            with(deleting(S::Provisioned), |f| f.status_mut().error_count = 4),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::PoweringOffBeforeDelete)),
        ),
        case(
            "available → powering off before delete",
            deleting(S::Available),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::PoweringOffBeforeDelete)),
        ),
        case(
            "inspecting → powering off before delete",
            deleting(S::Inspecting),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::PoweringOffBeforeDelete)),
        ),
        case(
            "preparing → powering off before delete",
            deleting(S::Preparing),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::PoweringOffBeforeDelete)),
        ),
        case(
            "externally provisioned → powering off before delete",
            deleting(S::ExternallyProvisioned),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::PoweringOffBeforeDelete)),
        ),
        case(
            "deprovisioning while deleting → powering off before delete",
            with(deleting(S::Deprovisioning), |f| {
                f.status_mut().operation_history.deprovision.start = Some("t".into())
            }),
            Some(Call::Deprovision),
            Some(Outcome::Done),
            |d| assert_eq!(state(d), Some(S::PoweringOffBeforeDelete)),
        ),
        case(
            "powering off before delete → deleting",
            deleting(S::PoweringOffBeforeDelete),
            Some(Call::PowerOff(PowerOffMode::Hard)),
            Some(Outcome::Done),
            |d| {
                assert_eq!(state(d), Some(S::Deleting));
                assert!(!st(d).powered_on);
            },
        ),
        case(
            "power-off keeps failing → deletion goes on",
            with(deleting(S::PoweringOffBeforeDelete), |f| {
                f.status_mut().error_count = 4
            }),
            None,
            None,
            |d| assert_eq!(state(d), Some(S::Deleting)),
        ),
        case(
            "deleting → provisioner delete, finalizer removed",
            deleting(S::Deleting),
            Some(Call::Delete),
            Some(Outcome::Done),
            |d| {
                assert_eq!(d.finalizer, Some(FinalizerChange::Remove));
                assert_eq!(d.memo, MemoChange::Forget);
                assert!(has_event(d, "Deleted"));
            },
        ),
        case(
            "deleting an unmanaged host removes the finalizer without calls",
            with(deleting(S::Deleting), |f| f.spec.bmc = None),
            None,
            None,
            |d| assert_eq!(d.finalizer, Some(FinalizerChange::Remove)),
        ),
        case(
            "deleting a detached host: no deprovision, no power-off",
            with(deleting(S::Provisioned), |f| {
                f.status_mut().operational_status = OperationalStatus::Detached
            })
            .ann(ann::DETACHED, ""),
            None,
            None,
            |d| {
                assert_eq!(d.finalizer, Some(FinalizerChange::Remove));
                assert_eq!(state(d), Some(S::Deleting));
            },
        ),
        case(
            "deleting a detached host with deleteAction delay waits",
            with(deleting(S::Provisioned), |f| {
                f.status_mut().operational_status = OperationalStatus::Detached
            })
            .ann(ann::DETACHED, r#"{"deleteAction":"delay"}"#),
            None,
            None,
            |d| {
                assert_eq!(d.finalizer, None);
                assert_eq!(d.status, None);
                assert_eq!(d.requeue, Some(Duration::from_secs(600)));
            },
        ),
        case(
            "deleting with the credentials Secret gone does not hang",
            with(deleting(S::Available), |f| {
                f.credentials = CredentialsObservation::Missing {
                    secret: "bmc".into(),
                }
            }),
            None,
            None,
            |d| {
                assert_eq!(d.finalizer, Some(FinalizerChange::Remove));
                assert!(has_event(d, "DeletedWithoutBMC"));
            },
        ),
    ]);
}

#[test]
fn one_call_per_reconcile() {
    // A second pass never asks for a different call; if the first call's outcome leads
    // somewhere that needs another, the decision requeues at once instead.
    let f = fx(S::Available);
    let d = decide(&f.input(Some((Call::Detach, Outcome::Done))));
    assert_eq!(d.call, None);
}

#[test]
fn conditions_follow_state() {
    let f = with(fx(S::Preparing), |_| {});
    let d = decide(&f.input(Some((Call::Prepare, Outcome::Done))));
    let s = st(&d);
    // Available: available for provisioning, but not Ready (metal3: Ready means provisioned).
    let available = condition(&s.conditions, "AvailableForProvisioning").unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_str()),
        ("True", "Available")
    );
    let ready = condition(&s.conditions, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NotProvisioned")
    );
    let provisioned = condition(&s.conditions, "Provisioned").unwrap();
    assert_eq!(provisioned.status, "False");
    assert!(s.last_updated.as_deref() == Some("2026-01-01T00:00:00Z"));
}
