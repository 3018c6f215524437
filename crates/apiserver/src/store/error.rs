//! [`StoreError`]: why a store operation failed.

use super::limits::MAX_OBJECT_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store database: {0}")]
    Db(String),
    #[error("corrupt object {key}: {source}")]
    Corrupt {
        key: String,
        source: serde_json::Error,
    },
    #[error("the store is closed")]
    Closed,
    /// A commit failed (a full disk, an I/O error): nothing from it was acknowledged, and
    /// writes are refused until a probe commit succeeds again.
    #[error(
        "the store cannot write ({0}); writes are refused until it can, which is checked every second"
    )]
    Unwritable(String),
    /// Refused before anything was written: the object would exceed [`MAX_OBJECT_BYTES`].
    #[error("object {key} is too large: {bytes} bytes, the limit is {MAX_OBJECT_BYTES}")]
    TooLarge { key: String, bytes: usize },
    /// Refused before anything was written: the object nests deeper than
    /// [`MAX_DEPTH`](super::MAX_DEPTH).
    #[error("object {key} nests {depth} levels deep at {path}, the limit is {limit}")]
    TooDeep {
        key: String,
        depth: usize,
        path: String,
        limit: usize,
    },
    #[error("store task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

pub(super) fn db_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Db(e.to_string())
}
