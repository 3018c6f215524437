//! What the Machine, Job and Task reconcilers share.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::rufio::{Machine, Task};
use ferrometal_bmc::PowerState;

use crate::bmc_gate::BmcGate;
use crate::detached::Detached;

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
    /// Machines' power reads, off the workers (the host controller's way: never a worker
    /// waiting on a BMC).
    pub reads: Detached<Machine, MachineRead>,
    /// Tasks' actions and power looks, off the workers.
    pub calls: Detached<Task, TaskCall>,
}

/// What a Machine's power read found: its power in Rufio's words, and why the BMC was not
/// reached (empty when it was).
pub type MachineRead = (&'static str, String);

/// A Task's BMC call, run off the workers.
pub enum TaskCall {
    /// The action was sent (or failed, with Rufio's words).
    Sent(Result<(), String>),
    /// The power the BMC shows.
    Power(Result<PowerState, String>),
    /// No BMC client: the connection or its Secret is wrong.
    Unreachable(String),
}
