//! What the [`Store`](super::Store) handle and the committer share.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use redb::Database;
use tokio::sync::{Mutex, Notify, watch};

use super::batch::{Queue, Writer};
use super::index::Volatile;
use super::state::State;

pub(super) struct Inner {
    /// `None` once closed, so the file lock is released even while handles to the store live on.
    pub(super) db: RwLock<Option<Arc<Database>>>,
    /// Where the database lives, to reopen it after a failed commit.
    pub(super) path: PathBuf,
    pub(super) state: RwLock<State>,
    pub(super) writer: Mutex<Writer>,
    pub(super) queue: std::sync::Mutex<Queue>,
    /// The last revision visible to readers.
    pub(super) published: std::sync::atomic::AtomicU64,
    /// Shared with the committer, which holds the store only weakly so dropping the last
    /// handle closes the file.
    pub(super) wake: Arc<Notify>,
    pub(super) rev_tx: watch::Sender<u64>,
    /// The resources kept in memory only, and their bounds.
    pub(super) volatile: Volatile,
    /// The revision stored in the file: every revision handed out so far, volatile ones
    /// included, is at or below it, so none is handed out again after a restart.
    pub(super) reserved: std::sync::atomic::AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Let the committer see that the store is gone.
        self.wake.notify_one();
    }
}
