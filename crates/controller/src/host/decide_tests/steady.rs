//! The steady state and power: polls, `online`, power errors and detached hosts.

use super::*;

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
            "power on issued, not yet seen → remembered as in flight",
            with(fx(S::Available), |f| f.status_mut().powered_on = false),
            Some(Call::PowerOn),
            Some(Outcome::Waiting {
                requeue_after: Duration::from_secs(5),
                reason: "On issued".into(),
            }),
            |d| {
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.power_in_flight == Some(true)));
            },
        ),
        case(
            "online set false while a power on was in flight (paused meanwhile) → power off \
             now, although the status still reads off",
            with(fx(S::Available), |f| {
                f.spec.online = false;
                f.status_mut().powered_on = false;
                f.memo.as_mut().unwrap().power_in_flight = Some(true);
            }),
            Some(Call::PowerOff(PowerOffMode::Soft)),
            Some(Outcome::Done),
            |d| {
                assert!(has_event(d, "PowerOff"));
                assert!(matches!(&d.memo, MemoChange::Set(m) if m.power_in_flight.is_none()));
            },
        ),
        case(
            "a power on in flight that is still wished → no second call before the poll",
            with(fx(S::Available), |f| {
                f.status_mut().powered_on = true;
                f.memo.as_mut().unwrap().power_in_flight = Some(true);
            }),
            None,
            None,
            |d| assert_eq!(d.status, None),
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
