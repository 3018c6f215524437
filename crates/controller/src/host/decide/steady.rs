//! The steady state and power: reboot annotations, operations, `online`, and the power poll
//! of available and provisioned hosts.

use std::time::Duration;

use ferrometal_api::annotations::{self as ann, Operation, RebootMode};
use ferrometal_api::{ErrorType, ProvisioningState};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::PowerOffMode;

use super::engine::{Engine, Flow, NOW};
use super::protocol::{Call, Outcome};

fn jittered(d: Duration, jitter: f64) -> Duration {
    d.mul_f64(0.9 + 0.2 * jitter.clamp(0.0, 1.0))
}

impl Engine<'_, '_> {
    /// Reboot annotations that count now: (key, hard).
    fn active_reboots(&mut self) -> Vec<(String, bool)> {
        let steady = matches!(
            self.state(),
            ProvisioningState::Provisioned | ProvisioningState::ExternallyProvisioned
        );
        let mut out = Vec::new();
        for (key, value) in self.input.annotations {
            if !ann::is_reboot_key(key) {
                continue;
            }
            match ann::parse_reboot(key, value) {
                Ok(r) if steady || r.force => out.push((key.clone(), r.mode == RebootMode::Hard)),
                Ok(_) => {}
                Err(e) => self.warning("InvalidAnnotation", e.to_string()),
            }
        }
        out
    }

    /// Available, provisioned and externally provisioned hosts: reboots, operations, `online`,
    /// and one power-state poll per interval.
    pub(super) fn steady_state(&mut self) -> Flow {
        let mut reboots = self.active_reboots();
        if self.spec().disable_power_off && !reboots.is_empty() {
            self.restart_instead_of_reboot(&reboots)?;
            // Nothing can hold such a host off: keyed reboots do not count.
            reboots.clear();
        }
        let want_on = self.spec().online && reboots.is_empty();
        let is_on = self.st.powered_on;
        if !reboots.is_empty() {
            let bare = reboots.iter().any(|(k, _)| k == ann::REBOOT);
            if is_on {
                let hard = reboots.iter().any(|(_, h)| *h) || self.st.error_count > 0;
                let mode = if hard {
                    PowerOffMode::Hard
                } else {
                    PowerOffMode::Soft
                };
                return match self.call(Call::PowerOff(mode))? {
                    Outcome::Done => {
                        self.clear_error();
                        self.st.powered_on = false;
                        self.memo_mut().power_checked = Some(self.input.now);
                        let keys: Vec<_> = reboots.iter().map(|(k, _)| k.as_str()).collect();
                        self.event(
                            "PowerOff",
                            format!(
                                "powered off ({}) for reboot requested by {}",
                                if hard { "hard" } else { "soft" },
                                keys.join(", ")
                            ),
                        );
                        if bare {
                            self.remove_annotation(ann::REBOOT);
                        }
                        self.requeue(NOW)
                    }
                    Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
                    Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
                    _ => self.unexpected(),
                };
            }
            if bare {
                // The host is off: the bare reboot is complete, power comes back.
                self.remove_annotation(ann::REBOOT);
                return self.requeue(NOW);
            }
        } else if let Some(value) = self.annotation(ann::OPERATION) {
            self.operation(value)?;
        }
        self.data_image(want_on)?;
        self.servicing(want_on)?;
        let in_flight = self.memo.as_ref().and_then(|m| m.power_in_flight);
        if want_on != is_on || in_flight.is_some_and(|target| target != want_on) {
            let call = if want_on {
                Call::PowerOn
            } else if self.st.error_count > 0 {
                Call::PowerOff(PowerOffMode::Hard)
            } else {
                Call::PowerOff(PowerOffMode::Soft)
            };
            return match self.call(call)? {
                Outcome::Done => {
                    self.clear_error();
                    self.st.powered_on = want_on;
                    let now = self.input.now;
                    let m = self.memo_mut();
                    m.power_checked = Some(now);
                    m.power_in_flight = None;
                    if want_on {
                        self.event("PowerOn", "host powered on");
                    } else {
                        self.event("PowerOff", "host powered off");
                    }
                    self.requeue(self.poll_interval())
                }
                Outcome::Waiting { requeue_after, .. } => {
                    self.memo_mut().power_in_flight = Some(want_on);
                    self.waiting(requeue_after)
                }
                Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
                _ => self.unexpected(),
            };
        }
        // A poll is due when the last observation is older than most of an interval, so a
        // jittered requeue that fires a little early still polls.
        let interval = self.input.timing.power_poll_interval;
        let due = self
            .memo
            .as_ref()
            .and_then(|m| m.power_checked)
            .is_none_or(|t| {
                let elapsed = self.input.now.duration_since(t);
                elapsed.as_secs_f64() >= interval.as_secs_f64() * 0.8
            });
        if !due && self.st.error_count == 0 {
            return self.requeue(self.poll_interval());
        }
        match self.call(Call::PowerState)? {
            Outcome::Power(p) => {
                // A power reading clears a power error, not the retry limit's standing one.
                if !self.at_retry_limit() {
                    self.clear_error();
                }
                self.observe_power(p);
                let (powered_on, now) = (self.st.powered_on, self.input.now);
                let m = self.memo_mut();
                m.power_checked = Some(now);
                if m.power_in_flight == Some(powered_on) {
                    m.power_in_flight = None;
                }
                if self.st.powered_on != want_on && p != PowerState::Unknown {
                    // Enforce `online` on the next pass.
                    self.requeue(NOW)
                } else {
                    self.requeue(self.poll_interval())
                }
            }
            Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
            _ => self.unexpected(),
        }
    }

    /// A host with `disablePowerOff` is never switched off: the bare reboot annotation becomes
    /// one restart, then goes.
    fn restart_instead_of_reboot(&mut self, reboots: &[(String, bool)]) -> Flow {
        if !reboots.iter().any(|(k, _)| k == ann::REBOOT) {
            return Ok(());
        }
        let op = if reboots.iter().any(|(_, hard)| *hard) {
            Operation::ForceRestart
        } else {
            Operation::GracefulRestart
        };
        match self.call(Call::Operation(op))? {
            Outcome::Done => {
                self.clear_error();
                self.remove_annotation(ann::REBOOT);
                self.event(
                    "Rebooted",
                    format!(
                        "{} issued (disablePowerOff: never powered off)",
                        op.as_str()
                    ),
                );
                self.requeue(self.poll_interval())
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => self.fail_with(ErrorType::PowerManagement, &e),
            _ => self.unexpected(),
        }
    }

    fn poll_interval(&self) -> Duration {
        jittered(self.input.timing.power_poll_interval, self.input.jitter)
    }

    fn operation(&mut self, value: &str) -> Flow {
        let op = match ann::parse_operation(value) {
            Ok(op) => op,
            Err(e) => {
                self.remove_annotation(ann::OPERATION);
                self.warning("UnknownOperation", e.to_string());
                return self.requeue(NOW);
            }
        };
        if op.needs_power_on() && !self.st.powered_on {
            self.remove_annotation(ann::OPERATION);
            self.event(
                "OperationSkipped",
                format!("{}: not run, the host is powered off", op.as_str()),
            );
            return self.requeue(NOW);
        }
        match self.call(Call::Operation(op))? {
            Outcome::Done => {
                self.clear_error();
                self.remove_annotation(ann::OPERATION);
                // `online` stays the desired power: the next poll (a full interval away)
                // observes the operation's effect and restores it if needed.
                self.memo_mut().power_checked = Some(self.input.now);
                self.event("OperationSucceeded", format!("{} issued", op.as_str()));
                self.requeue(self.poll_interval())
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => {
                let message = format!("operation {}: {}", op.as_str(), e.message);
                self.warning("OperationFailed", message.clone());
                self.fail(ErrorType::PowerManagement, message, e.kind.as_str())
            }
            _ => self.unexpected(),
        }
    }
}
