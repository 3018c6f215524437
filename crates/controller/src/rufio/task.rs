//! The next step of a Rufio Task, as a pure function: Rufio's semantics (power actions done when
//! the BMC shows the state, 10 minutes at most; everything else done once sent), with the
//! action recorded as sent before it is sent so a restart never sends it twice.

use std::time::Duration;

use ferrometal_api::rufio::{Action, PowerAction};
use ferrometal_bmc::PowerState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStep {
    /// Record the start time.
    Start,
    /// Record the action as sent, then send it.
    Send,
    /// Read the power state.
    LookPower,
    Complete,
    Fail(String),
    /// Not there yet: look again later.
    Wait,
}

/// `elapsed`: since the task started; `seen`: a power reading made for this step.
pub fn next(
    action: &Action,
    started: bool,
    sent: bool,
    elapsed: Duration,
    seen: Option<PowerState>,
    timeout: Duration,
) -> TaskStep {
    if !started {
        return TaskStep::Start;
    }
    if !sent {
        return TaskStep::Send;
    }
    let target = match action.power_action {
        Some(PowerAction::On) => PowerState::On,
        Some(PowerAction::Off | PowerAction::Soft) => PowerState::Off,
        Some(PowerAction::Status) if seen.is_none() => return TaskStep::LookPower,
        // Cycle, reset, boot devices and media: Rufio counts them done once sent.
        _ => return TaskStep::Complete,
    };
    match seen {
        None => TaskStep::LookPower,
        Some(p) if p == target => TaskStep::Complete,
        Some(p) if elapsed >= timeout => TaskStep::Fail(format!(
            "timeout: power state is {p} after {}s, want {target}",
            timeout.as_secs()
        )),
        Some(_) => TaskStep::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::rufio::{BootDevice, OneTimeBootDeviceAction};

    fn power(p: PowerAction) -> Action {
        Action {
            power_action: Some(p),
            ..Action::default()
        }
    }

    #[test]
    fn rufio_task_steps() {
        let t = Duration::from_secs(600);
        let s = Duration::from_secs(1);
        let off = power(PowerAction::Off);
        let boot = Action {
            one_time_boot_device_action: Some(OneTimeBootDeviceAction {
                device: vec![BootDevice::Pxe],
                efi_boot: false,
            }),
            ..Action::default()
        };
        let rows: Vec<(&str, TaskStep)> = vec![
            ("new", next(&off, false, false, s, None, t)),
            ("started", next(&off, true, false, s, None, t)),
            ("sent: read", next(&off, true, true, s, None, t)),
            (
                "still on",
                next(&off, true, true, s, Some(PowerState::On), t),
            ),
            ("off", next(&off, true, true, s, Some(PowerState::Off), t)),
            ("boot sent", next(&boot, true, true, s, None, t)),
            (
                "status",
                next(&power(PowerAction::Status), true, true, s, None, t),
            ),
            (
                "status read",
                next(
                    &power(PowerAction::Status),
                    true,
                    true,
                    s,
                    Some(PowerState::On),
                    t,
                ),
            ),
            (
                "cycle sent",
                next(&power(PowerAction::Cycle), true, true, s, None, t),
            ),
        ];
        let want = [
            TaskStep::Start,
            TaskStep::Send,
            TaskStep::LookPower,
            TaskStep::Wait,
            TaskStep::Complete,
            TaskStep::Complete,
            TaskStep::LookPower,
            TaskStep::Complete,
            TaskStep::Complete,
        ];
        for ((name, got), want) in rows.into_iter().zip(want) {
            assert_eq!(got, want, "{name}");
        }
        assert_eq!(
            next(&off, true, true, t, Some(PowerState::On), t),
            TaskStep::Fail("timeout: power state is On after 600s, want Off".into())
        );
    }
}
