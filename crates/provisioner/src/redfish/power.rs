//! Power: observing it, issuing one action at a time, and driving it towards a target (a soft
//! power-off forced after its grace period, an action the BMC never carried out reported).

use std::time::Instant;

use ferrometal_api::annotations::Operation;
use ferrometal_bmc::{Bmc, PowerAction, PowerState};

use super::host_state::{HostState, InFlight};
use super::provisioner::RedfishProvisioner;
use crate::{ErrorKind, ProvisionerError, Result, Step};

impl RedfishProvisioner {
    pub(super) fn waiting_power<T>(&self, reason: String) -> Result<Step<T>> {
        Ok(Step::waiting(self.options.poll_interval, reason))
    }

    /// Reads the power and settles the action in flight once the BMC shows its effect, so a
    /// stale one (say, from an operation nobody waited for) never blocks or fails a later call.
    pub(super) async fn observe_power(
        &self,
        st: &mut HostState,
        bmc: &dyn Bmc,
    ) -> Result<PowerState> {
        let now = bmc.power_state().await?;
        Self::observed_power(st, now);
        Ok(now)
    }

    /// A power action in flight ends when the BMC shows its target state.
    pub(super) fn observed_power(st: &mut HostState, now: PowerState) {
        if st.in_flight.is_some_and(|f| f.target() == now) {
            st.in_flight = None;
        }
    }

    /// Issues `action` once, remembering it as the BMC's one action in flight.
    pub(super) async fn issue(
        &self,
        st: &mut HostState,
        bmc: &dyn Bmc,
        action: PowerAction,
    ) -> Result<()> {
        bmc.power(action).await?;
        st.in_flight = Some(InFlight {
            action,
            issued: Instant::now(),
        });
        tracing::debug!(
            bmc = bmc.endpoint(),
            action = action.as_str(),
            "power action issued"
        );
        Ok(())
    }

    /// Observes the power and moves it towards the target of `action`: Done once the BMC
    /// reports it; otherwise the action is issued once and later calls only check. A soft
    /// power-off that outlasts the grace period is followed by ForceOff.
    pub(super) async fn drive_power(
        &self,
        st: &mut HostState,
        bmc: &dyn Bmc,
        action: PowerAction,
    ) -> Result<Step> {
        let now = self.observe_power(st, bmc).await?;
        self.drive_power_from(st, bmc, action, now).await
    }

    /// [`Self::drive_power`] with the power this call already observed.
    pub(super) async fn drive_power_from(
        &self,
        st: &mut HostState,
        bmc: &dyn Bmc,
        action: PowerAction,
        now: PowerState,
    ) -> Result<Step> {
        let target = action.target_state();
        if let Some(f) = st.in_flight.filter(|f| f.target() != target)
            && f.issued.elapsed() < self.options.action_timeout
        {
            // An opposite action has not landed yet (`observe_power` settles landed ones): the
            // BMC may still carry it out, so the power read now says nothing about the end
            // state. Issue this one too; BMCs apply them in order. A machine not yet up is
            // switched off hard: a soft request to a machine reading Off may be refused.
            let action = if action == PowerAction::GracefulShutdown && now != PowerState::On {
                PowerAction::ForceOff
            } else {
                action
            };
            self.issue(st, bmc, action).await?;
            return self.waiting_power(format!(
                "{} issued over {} still in flight; BMC reports {now}",
                action.as_str(),
                f.action.as_str()
            ));
        }
        if now == target {
            return Ok(Step::Done(()));
        }
        if let Some(f) = st.in_flight.filter(|f| f.target() == target) {
            let age = f.issued.elapsed();
            if f.action == PowerAction::GracefulShutdown {
                if action == PowerAction::ForceOff {
                    // A hard request does not wait out a soft one's grace period.
                    self.issue(st, bmc, PowerAction::ForceOff).await?;
                    return self.waiting_power("ForceOff issued over a soft power off".into());
                }
                if age < self.options.soft_power_off_grace {
                    return self.waiting_power(format!(
                        "soft power off issued {}s ago; BMC reports {now}",
                        age.as_secs()
                    ));
                }
                self.issue(st, bmc, PowerAction::ForceOff).await?;
                return self.waiting_power(format!(
                    "soft power off did not finish within {}s; forced off",
                    self.options.soft_power_off_grace.as_secs()
                ));
            }
            if age < self.options.action_timeout {
                return self.waiting_power(format!(
                    "{} issued {}s ago; BMC reports {now}",
                    f.action.as_str(),
                    age.as_secs()
                ));
            }
            // Forget it so the next call (after the controller's backoff) issues it again.
            st.in_flight = None;
            return Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!(
                    "BMC {} still reports power {now} {}s after {} was issued",
                    bmc.endpoint(),
                    age.as_secs(),
                    f.action.as_str()
                ),
            ));
        }
        if is_moving_to(now, target) {
            return self.waiting_power(format!("BMC reports {now}"));
        }
        match self.issue(st, bmc, action).await {
            Err(e)
                if action == PowerAction::GracefulShutdown && e.kind == ErrorKind::Unsupported =>
            {
                // No ACPI shutdown on this BMC: the soft request degrades to hard at once.
                self.issue(st, bmc, PowerAction::ForceOff).await?;
            }
            other => other?,
        }
        self.waiting_power(format!(
            "{} issued; BMC reported {now}",
            st.in_flight.map_or("power action", |f| f.action.as_str())
        ))
    }
}

fn is_moving_to(now: PowerState, target: PowerState) -> bool {
    matches!(
        (now, target),
        (PowerState::PoweringOn, PowerState::On) | (PowerState::PoweringOff, PowerState::Off)
    )
}

pub(super) fn power_action_of(op: Operation) -> Option<PowerAction> {
    Some(match op {
        Operation::PowerCycle => PowerAction::PowerCycle,
        Operation::GracefulRestart => PowerAction::GracefulRestart,
        Operation::ForceRestart => PowerAction::ForceRestart,
        Operation::ForceOff => PowerAction::ForceOff,
        Operation::ForceOn => PowerAction::ForceOn,
        Operation::GracefulShutdown => PowerAction::GracefulShutdown,
        Operation::PxeOnce => return None,
    })
}
