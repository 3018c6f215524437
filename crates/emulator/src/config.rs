//! How an emulated fleet is set up.

use std::time::Duration;

use crate::state::PowerState;

/// How the emulated fleet behaves.
#[derive(Clone)]
pub struct EmulatorConfig {
    /// Number of systems, named `sys-0` .. `sys-{systems-1}`.
    pub systems: usize,
    /// Time a power transition takes to land after a reset request (0 = immediate).
    pub power_delay: Duration,
    pub username: String,
    pub password: String,
    /// Leave `PowerCycle` out of `ResetType@Redfish.AllowableValues` (and reject it),
    /// as some real BMCs do.
    pub omit_power_cycle: bool,
    /// Power state every system starts in.
    pub initial_power: PowerState,
    /// Fetch every image InsertMedia names and refuse one that is not served, as real BMCs and
    /// sushy-tools do. Off, any URL is recorded unfetched (for fleets without an image server).
    pub fetch_media: bool,
    /// Time a firmware update (`UpdateService.SimpleUpdate`) takes to complete.
    pub update_delay: Duration,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            systems: 20,
            power_delay: Duration::ZERO,
            username: "admin".into(),
            password: "password".into(),
            omit_power_cycle: false,
            initial_power: PowerState::Off,
            fetch_media: true,
            update_delay: Duration::from_millis(500),
        }
    }
}

// Hand-written so the password never reaches a log line.
impl std::fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("systems", &self.systems)
            .field("power_delay", &self.power_delay)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("omit_power_cycle", &self.omit_power_cycle)
            .field("initial_power", &self.initial_power)
            .field("fetch_media", &self.fetch_media)
            .field("update_delay", &self.update_delay)
            .finish()
    }
}
