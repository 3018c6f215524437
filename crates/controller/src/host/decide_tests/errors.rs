//! Errors and credentials: registration, inspection, preparation and provisioning failures,
//! credentials Secrets, restarts, and the provisioning retry limit.

use super::*;
use crate::conditions::{SPEC_ERROR, set_spec_fault, spec_fault};
use ferrometal_api::spec_fault::{DataField, SpecFault};

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
                    power_in_flight: None,
                    settings_done: None,
                    updates_done: Vec::new(),
                    data_image_failed: None,
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
            at_retry_limit(),
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

/// Available, its image failed the retry limit's number of times and still the spec's.
fn at_retry_limit() -> Fx {
    with(fx(S::Available), |f| {
        f.spec.image = Some(image("http://img/a.iso"));
        f.status_mut().provisioning_fail_count = 5;
        f.status_mut().last_attempted_image = Some(image("http://img/a.iso"));
    })
}

fn provisioning(tweak: fn(&mut Fx)) -> Fx {
    with(fx(S::Provisioning), |f| {
        f.spec.image = Some(image("http://img/a.qcow2"));
        f.status_mut().operation_history.provision.start = Some("t".into());
        tweak(f);
    })
}

fn failed_in_spec(kind: ErrorKind, msg: &str, fault: SpecFault) -> Outcome {
    Outcome::Failed(ProvisionerError::new(kind, msg).in_spec(fault))
}

/// A previous error marked as the spec's, still recorded.
fn with_spec_error(f: &mut Fx) {
    let s = f.status_mut();
    s.error_type = Some(ErrorType::Provisioning);
    s.error_message = "image format qcow2 needs the ironic provisioner".into();
    s.operational_status = OperationalStatus::Error;
    set_spec_fault(
        s,
        Some(SpecFault::ImageFormatNotSupported),
        Some(1),
        "2025-12-31T00:00:00Z",
    );
}

#[test]
fn errors_caused_by_the_spec_are_marked_as_such() {
    check_all(vec![
        case(
            "an image format the provisioner cannot deploy → blocked, marked as the spec's",
            provisioning(|_| {}),
            Some(Call::Provision),
            Some(failed_in_spec(
                ErrorKind::Unsupported,
                "image format qcow2 needs the ironic provisioner",
                SpecFault::ImageFormatNotSupported,
            )),
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, Some(ErrorType::Provisioning));
                assert!(condition(&s.conditions, BLOCKED).is_some());
                assert_eq!(spec_fault(s), Some(SpecFault::ImageFormatNotSupported));
                let c = condition(&s.conditions, SPEC_ERROR).unwrap();
                assert_eq!(
                    (c.status.as_str(), c.reason.as_str()),
                    ("True", "ImageFormatNotSupported")
                );
                assert_eq!(c.message, s.error_message, "names the error it classifies");
            },
        ),
        case(
            "a data Secret without its key → an ordinary failure, marked as the spec's",
            provisioning(|_| {}),
            Some(Call::Provision),
            Some(failed_in_spec(
                ErrorKind::InvalidInput,
                "spec.userData: Secret ns/h-userdata has no \"userData\" or \"value\" key",
                SpecFault::DataSecretKeyMissing(DataField::UserData),
            )),
            |d| {
                let s = st(d);
                assert_eq!(s.error_count, 1);
                assert_eq!(
                    spec_fault(s),
                    Some(SpecFault::DataSecretKeyMissing(DataField::UserData))
                );
            },
        ),
        case(
            "a BMC failure after a spec error → the mark goes with the old error",
            provisioning(with_spec_error),
            Some(Call::Provision),
            Some(failed(
                ErrorKind::Failed,
                "BMC 10.0.0.9:443 answered HTTP 400 to PATCH /redfish/v1/Systems/1",
            )),
            |d| {
                let s = st(d);
                assert!(s.error_message.contains("10.0.0.9"));
                assert_eq!(spec_fault(s), None);
                assert!(condition(&s.conditions, SPEC_ERROR).is_none());
            },
        ),
        case(
            "provisioned after a spec error → error and mark cleared",
            provisioning(with_spec_error),
            Some(Call::Provision),
            Some(Outcome::Done),
            |d| {
                let s = st(d);
                assert_eq!(s.error_type, None);
                assert!(condition(&s.conditions, SPEC_ERROR).is_none());
            },
        ),
        case(
            "available at the retry limit → the image is the spec's to change",
            at_retry_limit(),
            None,
            None,
            |d| assert_eq!(spec_fault(st(d)), Some(SpecFault::RetryLimitReached)),
        ),
    ]);
}

#[test]
fn a_mark_that_classifies_another_message_is_not_read() {
    let mut f = provisioning(with_spec_error);
    let s = f.status_mut();
    assert_eq!(spec_fault(s), Some(SpecFault::ImageFormatNotSupported));
    s.error_message = "BMC 10.0.0.9:443 is unreachable".into();
    assert_eq!(
        spec_fault(s),
        None,
        "a newer error, written without the mark"
    );
    s.error_type = None;
    s.error_message.clear();
    assert_eq!(spec_fault(s), None, "no error at all");
}
