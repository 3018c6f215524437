//! The one-shot requests a VM claim carries (metal3's reboot annotation, ferrometal's
//! `ferrometal.io/operation`), read from the claim: a pure function, tested on its own.

use ferrometal_api::HostClaim;
use ferrometal_api::annotations::{self as ann, Operation};
use kube::ResourceExt;

use crate::vm_pass::OneShot;

/// A one-shot request the claim carries: metal3's reboot annotation, or a
/// `ferrometal.io/operation` a VM can do.
pub(super) struct OneShotRequest {
    pub annotation: &'static str,
    pub token: String,
    pub action: OneShot,
    /// As the tenant wrote it, for Events.
    pub name: &'static str,
    pub needs_power_on: bool,
    /// The Event reasons and note once done, or skipped.
    pub reason: &'static str,
    pub skipped: &'static str,
    pub done: &'static str,
}

pub(super) enum Request {
    Act(OneShotRequest),
    /// Not something to do: the annotation is removed with a warning Event.
    Refused {
        annotation: &'static str,
        reason: &'static str,
        note: String,
    },
}

/// The one-shot request the claim carries, if any: metal3's reboot annotation first (a reset,
/// as a BMC's ForceRestart), then `ferrometal.io/operation`.
pub(super) fn one_shot(claim: &HostClaim) -> Option<Request> {
    let uid = claim.uid().unwrap_or_default();
    if let Some(v) = claim.annotations().get(ann::REBOOT) {
        return Some(Request::Act(OneShotRequest {
            annotation: ann::REBOOT,
            token: format!("{uid}/reboot={v}"),
            action: OneShot::Reset,
            name: "reboot",
            needs_power_on: true,
            reason: "Rebooted",
            skipped: "Rebooted",
            done: "the virtual machine was reset",
        }));
    }
    let value = claim.annotations().get(ann::OPERATION)?;
    let op = match ann::parse_operation(value) {
        Ok(op) => op,
        Err(e) => {
            return Some(Request::Refused {
                annotation: ann::OPERATION,
                reason: "UnknownOperation",
                note: e.to_string(),
            });
        }
    };
    let action = match op {
        Operation::PowerCycle => OneShot::Cycle,
        Operation::GracefulRestart => OneShot::Reboot,
        Operation::ForceRestart => OneShot::Reset,
        Operation::ForceOff => OneShot::Off,
        Operation::ForceOn => OneShot::On,
        Operation::GracefulShutdown => OneShot::Shutdown,
        Operation::PxeOnce => {
            return Some(Request::Refused {
                annotation: ann::OPERATION,
                reason: "OperationNotSupported",
                note: "PxeOnce: a virtual machine of a HostClass boots its own disk; there is \
                       no network boot to ask for"
                    .into(),
            });
        }
    };
    Some(Request::Act(OneShotRequest {
        annotation: ann::OPERATION,
        token: format!("{uid}/operation={value}"),
        action,
        name: op.as_str(),
        needs_power_on: op.needs_power_on(),
        reason: "OperationSucceeded",
        skipped: "OperationSkipped",
        done: match action {
            OneShot::Cycle => "PowerCycle issued: the virtual machine was powered off and on",
            OneShot::Reboot => "GracefulRestart issued: the guest was asked to restart",
            OneShot::Reset => "ForceRestart issued: the virtual machine was reset",
            OneShot::Off => "ForceOff issued: the virtual machine was powered off",
            OneShot::On => "ForceOn issued: the virtual machine was powered on",
            OneShot::Shutdown => "GracefulShutdown issued: the guest was asked to shut down",
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::HostClaimSpec;

    fn claim(annotations: &[(&str, &str)]) -> HostClaim {
        let mut c = HostClaim::new("web-0", HostClaimSpec::default());
        c.metadata.uid = Some("u1".into());
        c.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        c
    }

    fn act(c: &HostClaim) -> (&'static str, String, OneShot, bool) {
        match one_shot(c) {
            Some(Request::Act(r)) => (r.annotation, r.token, r.action, r.needs_power_on),
            _ => panic!("no action"),
        }
    }

    #[test]
    fn each_request_maps_to_one_action() {
        assert!(one_shot(&claim(&[])).is_none());
        assert_eq!(
            act(&claim(&[(ann::REBOOT, "")])),
            (ann::REBOOT, "u1/reboot=".to_string(), OneShot::Reset, true)
        );
        for (op, action, needs_on) in [
            ("PowerCycle", OneShot::Cycle, true),
            ("GracefulRestart", OneShot::Reboot, true),
            ("ForceRestart", OneShot::Reset, true),
            ("ForceOff", OneShot::Off, false),
            ("ForceOn", OneShot::On, false),
            ("GracefulShutdown", OneShot::Shutdown, false),
        ] {
            assert_eq!(
                act(&claim(&[(ann::OPERATION, op)])),
                (
                    ann::OPERATION,
                    format!("u1/operation={op}"),
                    action,
                    needs_on
                ),
                "{op}"
            );
        }
        // The reboot first; the operation waits for the next pass.
        assert_eq!(
            act(&claim(&[(ann::OPERATION, "ForceOff"), (ann::REBOOT, "x")])).2,
            OneShot::Reset
        );
        for (op, reason) in [
            ("PxeOnce", "OperationNotSupported"),
            ("Explode", "UnknownOperation"),
        ] {
            match one_shot(&claim(&[(ann::OPERATION, op)])) {
                Some(Request::Refused {
                    annotation,
                    reason: r,
                    note,
                }) => {
                    assert_eq!((annotation, r), (ann::OPERATION, reason));
                    assert!(note.contains(op), "{note}");
                }
                _ => panic!("{op} not refused"),
            }
        }
    }
}
