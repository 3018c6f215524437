//! One host being moved, as every host phase sees it (a leaf: the phases import it).

use super::common::progress;
use super::objects::{Key, show};
use super::phase::Outcome;

/// One host being moved.
pub(super) struct Item {
    pub(super) key: Key,
    /// The paused value the copy at the target carries: ours, or the one someone else paused
    /// the host with (then it stays paused at the target too).
    pub(super) pause: String,
    pub(super) source_state: String,
    pub(super) source_power: bool,
    pub(super) secrets: Vec<Key>,
    pub(super) hardware_data: bool,
    /// Set once a phase failed for this host; later phases skip it.
    pub(super) error: Option<String>,
    pub(super) target_state: Option<String>,
}

impl Item {
    pub(super) fn alive(&self) -> bool {
        self.error.is_none()
    }
    /// Names the host and the error on a line of its own; later phases skip the host.
    pub(super) fn fail(&mut self, phase: &str, e: anyhow::Error) -> Outcome {
        let message = format!("{phase}: {e:#}");
        progress("failed", &show(&self.key), &message);
        self.error = Some(message);
        Outcome::Failed
    }
}

/// The hosts no phase has failed for yet.
pub(super) fn alive(items: &mut [Item]) -> Vec<&mut Item> {
    items.iter_mut().filter(|i| i.alive()).collect()
}
