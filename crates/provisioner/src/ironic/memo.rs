//! What the process remembers per host between calls: the provision-state action it issued and
//! has not reported yet, the driver_info it wrote, the phase the host reached, and the power
//! request in flight. It is what lets a host recover when Ironic loses its database.

use std::time::Instant;

use super::node::DeploySpec;

/// A provision-state action this process issued and has not reported the outcome of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pending {
    Manage,
    Inspect,
    Provide,
    Deploy,
    Undeploy,
    Adopt,
}

/// How far the host got, as far as this process knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Phase {
    #[default]
    Unknown,
    Manageable,
    Available,
    Active(DeploySpec),
}

#[derive(Debug, Clone)]
pub(super) struct PowerRequest {
    pub(super) target: &'static str,
    pub(super) issued: Instant,
    /// The node's last_error when the request was made: a new one is this request's failure.
    pub(super) error_before: Option<String>,
}

#[derive(Debug, Default)]
pub(super) struct Memo {
    /// Hash of the driver_info last written (with the password); none: not written by us.
    pub(super) written: Option<u64>,
    pub(super) pending: Option<Pending>,
    pub(super) phase: Phase,
    pub(super) power: Option<PowerRequest>,
    /// The node's `provision_updated_at` when firmware steps were asked for, and the changes
    /// they asked for: another time, with the node at rest again, means those steps ran.
    pub(super) firmware_since: Option<(String, crate::FirmwareChanges)>,
    /// The virtual media last asked of Ironic (an image, or none). Ironic clears the node's
    /// `last_error` when it accepts the request, so an attach or detach error after it is
    /// that request's failure.
    pub(super) vmedia_asked: Option<Option<String>>,
    /// The node's `provision_updated_at` when the cleaning that builds (or removes) its
    /// software RAID was asked for: another time, with the node at rest again, means it ran.
    pub(super) raid_since: Option<String>,
}
