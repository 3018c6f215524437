//! Annotation keys users and automation put on hosts, and the parsing of their values.
//! Bad values get errors that name the annotation and the value.

use serde::Deserialize;

pub const PAUSED: &str = "baremetalhost.metal3.io/paused";
/// The paused value CAPM3 uses; ours for claims.
pub const PAUSED_BY_CAPM3: &str = "metal3.io/capm3";
pub const PAUSED_BY_HOSTCLAIM: &str = "metal3.io/hostclaim";
pub const STATUS: &str = "baremetalhost.metal3.io/status";
pub const HARDWARE_DETAILS: &str = "inspect.metal3.io/hardwaredetails";
pub const DETACHED: &str = "baremetalhost.metal3.io/detached";
pub const INSPECT: &str = "inspect.metal3.io";
pub const REBOOT: &str = "reboot.metal3.io";
pub const REBOOT_PREFIX: &str = "reboot.metal3.io/";
pub const OPERATION: &str = "ferrometal.io/operation";
/// Set on a host by the BMCJob controller while one of its jobs runs (the job's name): the host
/// controller then neither enforces power nor starts a transition, as when paused.
pub const JOB: &str = "ferrometal.io/bmcjob";
/// The finalizer every managed host carries.
pub const FINALIZER: &str = "baremetalhost.metal3.io";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: {reason} (value {value:?})")]
pub struct AnnotationError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

fn error(key: &str, value: &str, reason: impl Into<String>) -> AnnotationError {
    AnnotationError {
        key: key.to_string(),
        value: value.chars().take(200).collect(),
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteAction {
    /// Deleting the host waits until the annotation is removed.
    Delay,
    /// Deleting the host removes it at once, without deprovisioning.
    #[default]
    Delete,
}

/// `baremetalhost.metal3.io/detached`: empty or `{"deleteAction":"delay|delete","force":bool}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Detached {
    #[serde(default)]
    pub delete_action: DeleteAction,
    /// Detach outside provisioned/externally provisioned/available too.
    #[serde(default)]
    pub force: bool,
}

pub fn parse_detached(value: &str) -> Result<Detached, AnnotationError> {
    if value.trim().is_empty() {
        return Ok(Detached::default());
    }
    serde_json::from_str(value).map_err(|e| error(DETACHED, value, e.to_string()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RebootMode {
    #[default]
    Hard,
    Soft,
}

/// `reboot.metal3.io[/key]`: empty or `{"mode":"hard|soft","force":bool}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reboot {
    #[serde(default)]
    pub mode: RebootMode,
    /// Count the annotation outside provisioned / externally provisioned too.
    #[serde(default)]
    pub force: bool,
}

pub fn parse_reboot(key: &str, value: &str) -> Result<Reboot, AnnotationError> {
    if value.trim().is_empty() {
        // metal3 defaults an empty reboot annotation to a soft reboot.
        return Ok(Reboot {
            mode: RebootMode::Soft,
            force: false,
        });
    }
    serde_json::from_str(value).map_err(|e| error(key, value, e.to_string()))
}

pub fn is_reboot_key(key: &str) -> bool {
    key == REBOOT || key.starts_with(REBOOT_PREFIX)
}

/// `ferrometal.io/operation` values: one imperative BMC action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    PowerCycle,
    GracefulRestart,
    ForceRestart,
    ForceOff,
    ForceOn,
    GracefulShutdown,
    PxeOnce,
}

impl Operation {
    pub const ALL: [Operation; 7] = [
        Operation::PowerCycle,
        Operation::GracefulRestart,
        Operation::ForceRestart,
        Operation::ForceOff,
        Operation::ForceOn,
        Operation::GracefulShutdown,
        Operation::PxeOnce,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::PowerCycle => "PowerCycle",
            Operation::GracefulRestart => "GracefulRestart",
            Operation::ForceRestart => "ForceRestart",
            Operation::ForceOff => "ForceOff",
            Operation::ForceOn => "ForceOn",
            Operation::GracefulShutdown => "GracefulShutdown",
            Operation::PxeOnce => "PxeOnce",
        }
    }

    /// A restart or cycle only makes sense on a host that is on.
    pub fn needs_power_on(self) -> bool {
        matches!(
            self,
            Operation::PowerCycle | Operation::GracefulRestart | Operation::ForceRestart
        )
    }
}

pub fn parse_operation(value: &str) -> Result<Operation, AnnotationError> {
    Operation::ALL
        .into_iter()
        .find(|o| o.as_str() == value.trim())
        .ok_or_else(|| {
            let all: Vec<_> = Operation::ALL.iter().map(|o| o.as_str()).collect();
            error(
                OPERATION,
                value,
                format!("unknown operation; expected one of {}", all.join(", ")),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detached_values() {
        assert_eq!(parse_detached("").unwrap(), Detached::default());
        assert_eq!(
            parse_detached(r#"{"deleteAction":"delay","force":true}"#).unwrap(),
            Detached {
                delete_action: DeleteAction::Delay,
                force: true
            }
        );
        let err = parse_detached(r#"{"deleteAction":"later"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains(DETACHED) && err.contains("later"), "{err}");
        assert!(parse_detached("{not json").is_err());
    }

    #[test]
    fn reboot_values() {
        assert_eq!(parse_reboot(REBOOT, "").unwrap().mode, RebootMode::Soft);
        assert_eq!(
            parse_reboot(REBOOT, r#"{"mode":"hard"}"#).unwrap().mode,
            RebootMode::Hard
        );
        assert!(
            parse_reboot(REBOOT, r#"{"mode":"hard","force":true}"#)
                .unwrap()
                .force
        );
        let err = parse_reboot("reboot.metal3.io/capm3", r#"{"mode":"gentle"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reboot.metal3.io/capm3") && err.contains("gentle"),
            "{err}"
        );
        assert!(is_reboot_key("reboot.metal3.io") && is_reboot_key("reboot.metal3.io/x"));
        assert!(!is_reboot_key("reboot.metal3.iox"));
    }

    #[test]
    fn operation_values() {
        for op in Operation::ALL {
            assert_eq!(parse_operation(op.as_str()).unwrap(), op);
        }
        let err = parse_operation("Explode").unwrap_err().to_string();
        assert!(
            err.contains("Explode") && err.contains("PowerCycle"),
            "{err}"
        );
    }
}
