//! [`SelectorError`], and the one way selectors build it.

/// Errors from parsing a selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid selector {input:?}: {reason}")]
    Invalid { input: String, reason: String },
}

pub(super) fn invalid(input: &str, reason: impl Into<String>) -> SelectorError {
    SelectorError::Invalid {
        input: input.to_string(),
        reason: reason.into(),
    }
}
