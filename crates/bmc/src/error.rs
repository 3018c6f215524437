//! Typed BMC errors. They name the BMC by `host:port` and never carry credentials.

use std::time::Duration;

/// Why an HTTPS request to a BMC that speaks plain HTTP failed, and the fix.
pub const PLAIN_HTTP_TO_HTTPS: &str = "the BMC answered plain HTTP to HTTPS; use redfish+http://";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BmcError {
    #[error("BMC {bmc} rejected the credentials")]
    Unauthorized { bmc: String },
    #[error("BMC {bmc} did not answer {operation} within {timeout:?}")]
    Timeout {
        bmc: String,
        operation: String,
        timeout: Duration,
    },
    #[error("BMC {bmc} is unreachable: {reason}")]
    Unreachable { bmc: String, reason: String },
    #[error("BMC {bmc} dropped the connection during {operation}")]
    Disconnected { bmc: String, operation: String },
    #[error("BMC {bmc} answered HTTP {status} to {operation}: {message}")]
    Http {
        bmc: String,
        status: u16,
        operation: String,
        message: String,
    },
    #[error("BMC {bmc} sent an answer that could not be understood ({operation}): {reason}")]
    Protocol {
        bmc: String,
        operation: String,
        reason: String,
    },
    #[error("BMC {bmc} does not support {what}")]
    Unsupported { bmc: String, what: String },
}

impl BmcError {
    /// A low-cardinality name for metrics labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            BmcError::Unauthorized { .. } => "unauthorized",
            BmcError::Timeout { .. } => "timeout",
            BmcError::Unreachable { .. } => "unreachable",
            BmcError::Disconnected { .. } => "disconnected",
            BmcError::Http { .. } => "http_status",
            BmcError::Protocol { .. } => "protocol",
            BmcError::Unsupported { .. } => "unsupported",
        }
    }

    /// Worth retrying later without any change by the user.
    pub fn is_transient(&self) -> bool {
        match self {
            BmcError::Timeout { .. }
            | BmcError::Unreachable { .. }
            | BmcError::Disconnected { .. } => true,
            BmcError::Http { status, .. } => *status >= 500 || *status == 409 || *status == 429,
            _ => false,
        }
    }
}
