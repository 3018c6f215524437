//! The errors every step reports: one [`FieldError`] per failure, shaped
//! like a Kubernetes `StatusCause`. A leaf module, so that every step can
//! report errors without depending on the others.

use std::fmt;

use serde::Serialize;

/// One validation failure, shaped like a Kubernetes `StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Kubernetes field path, e.g. `spec.bmc.address` or `spec.ports[0].name`.
    pub field: String,
    pub reason: Reason,
    /// The error body as kube-apiserver words it, e.g. `Required value`.
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(
        field: impl Into<String>,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            reason,
            message: message.into(),
        }
    }
}

/// The Kubernetes `CauseType` of a [`FieldError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Reason {
    FieldValueRequired,
    FieldValueInvalid,
    FieldValueNotSupported,
    FieldValueTypeInvalid,
    FieldValueDuplicate,
    FieldValueTooLong,
    FieldValueTooMany,
    FieldValueForbidden,
}

impl Reason {
    /// The `CauseType` string Kubernetes puts in `status.details.causes[].reason`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::FieldValueRequired => "FieldValueRequired",
            Reason::FieldValueInvalid => "FieldValueInvalid",
            Reason::FieldValueNotSupported => "FieldValueNotSupported",
            Reason::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            Reason::FieldValueDuplicate => "FieldValueDuplicate",
            Reason::FieldValueTooLong => "FieldValueTooLong",
            Reason::FieldValueTooMany => "FieldValueTooMany",
            Reason::FieldValueForbidden => "FieldValueForbidden",
        }
    }

    /// Parses the reasons a CEL rule may name (`x-kubernetes-validations[].reason`).
    pub(crate) fn from_rule_reason(s: &str) -> Option<Reason> {
        match s {
            "FieldValueInvalid" => Some(Reason::FieldValueInvalid),
            "FieldValueForbidden" => Some(Reason::FieldValueForbidden),
            "FieldValueRequired" => Some(Reason::FieldValueRequired),
            "FieldValueDuplicate" => Some(Reason::FieldValueDuplicate),
            _ => None,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
