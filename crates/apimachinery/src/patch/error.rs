//! [`PatchError`]: why a patch was refused.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed (wrong shape, bad directive value).
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// A JSON patch operation could not be applied (missing path, failed test).
    #[error("json patch failed: {0}")]
    JsonPatch(String),
    /// A `$patch` or other directive the server does not understand.
    #[error("unsupported strategic merge patch directive: {0}")]
    UnsupportedDirective(String),
}
