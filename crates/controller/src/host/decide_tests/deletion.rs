//! Deletion from every state: deprovisioning, powering off, the provisioner's delete, detached
//! hosts, and giving up on a BMC that cannot be reached.

use super::*;

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
