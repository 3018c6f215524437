//! What the Machine, Job and Task reconcilers share.

use std::sync::Arc;
use std::time::Duration;

use crate::bmc_gate::BmcGate;

/// Shared by the three reconcilers.
pub struct RufioContext {
    pub client: kube::Client,
    /// How long a power task may take to show on the BMC (Rufio: 10 minutes).
    pub task_timeout: Duration,
    /// How often a Machine's power is read (Rufio: 3 minutes).
    pub machine_poll: Duration,
    pub bmc_timeout: Duration,
    /// Per-BMC limits and breakers, shared with the host controller.
    pub gate: Arc<BmcGate>,
}
