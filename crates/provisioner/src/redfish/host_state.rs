//! What the backend keeps per host, in memory only: the BMC client and what it was built from,
//! the one power action in flight, and the progress of a deployment or of BIOS settings.

use std::sync::Arc;
use std::time::Instant;

use ferrometal_bmc::{Bmc, BmcAddress, PowerAction, PowerState};

use crate::HostInfo;

/// What the client was built from; a change means a new client.
pub(super) struct Fingerprint {
    pub(super) address: BmcAddress,
    username: String,
    password: String,
    insecure: bool,
}

impl Fingerprint {
    pub(super) fn of(host: &HostInfo) -> Fingerprint {
        Fingerprint {
            address: host.bmc.clone(),
            username: host.credentials.username.clone(),
            password: host.credentials.password().to_string(),
            insecure: host.disable_certificate_verification,
        }
    }

    pub(super) fn matches(&self, other: &Fingerprint) -> bool {
        self.address == other.address
            && self.username == other.username
            && self.password == other.password
            && self.insecure == other.insecure
    }
}

/// A power action issued and not yet observed.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    pub(super) action: PowerAction,
    pub(super) issued: Instant,
}

impl InFlight {
    pub(super) fn target(&self) -> PowerState {
        self.action.target_state()
    }
}

/// How far this process got with one deployment (one image URL).
#[derive(Debug, Clone, Default)]
pub(super) struct DeployProgress {
    pub(super) url: String,
    /// This process inserted the media (so an On host did not boot it yet).
    pub(super) inserted: bool,
    pub(super) boot_set: bool,
    /// On was issued after the media and boot override were in place.
    pub(super) powered_on: bool,
    /// ForceRestart was issued after the media and boot override were in place.
    pub(super) restarted: bool,
}

/// The steps after the agent finished its work in one boot (`boot`): media out, then for a
/// deploy the boot device set to the disk and a restart into it, for the rest power off.
#[derive(Debug, Clone, Default)]
pub(super) struct AgentFinish {
    pub(super) boot: String,
    pub(super) ejected: bool,
    pub(super) boot_set: bool,
    pub(super) restarted: bool,
    /// When the restart into the disk was issued.
    pub(super) restarted_at: Option<Instant>,
}

/// How far this process got applying one set of BIOS settings.
#[derive(Debug, Clone, Default)]
pub(super) struct SettingsProgress {
    /// The settings this is about (name → wanted value).
    pub(super) wanted: std::collections::BTreeMap<String, String>,
    /// When the boot that applies them was issued.
    pub(super) booted: Option<Instant>,
}

/// How far this process got with one list of firmware updates.
#[derive(Debug, Clone, Default)]
pub(super) struct UpdatesProgress {
    /// The updates this is about.
    pub(super) wanted: Vec<crate::ComponentUpdate>,
    /// How many of them (from the front) completed.
    pub(super) done: usize,
    /// The BMC's task for the next one, once started.
    pub(super) task: Option<String>,
}

#[derive(Default)]
pub(super) struct HostState {
    pub(super) client: Option<(Fingerprint, Arc<dyn Bmc>)>,
    pub(super) in_flight: Option<InFlight>,
    pub(super) deploy: Option<DeployProgress>,
    pub(super) agent_finish: Option<AgentFinish>,
    /// When the BMC last showed this boot (by its ID) running the agent's media.
    pub(super) agent_checked: Option<(String, Instant)>,
    /// Deprovisioning a host whose power must stay on restarted it already.
    pub(super) teardown_restarted: bool,
    pub(super) settings: Option<SettingsProgress>,
    pub(super) updates: Option<UpdatesProgress>,
}
