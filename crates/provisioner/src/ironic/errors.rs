//! Errors inside a call and the messages they end in: a locked node becomes `Waiting`, an API
//! error says what the request was about, and no message carries the host's password.

use super::client::ApiError;
use crate::{ErrorKind, HostInfo, ProvisionerError};

/// Errors inside a call: a locked node becomes `Waiting`, everything else a `ProvisionerError`.
pub(super) enum Fail {
    Api(ApiError, String),
    P(ProvisionerError),
}

impl From<ProvisionerError> for Fail {
    fn from(e: ProvisionerError) -> Self {
        Fail::P(e)
    }
}

pub(super) type Inner<T> = std::result::Result<T, Fail>;

/// Adds what the request was about to an API error.
pub(super) trait Context<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Inner<T>;
}

impl<T> Context<T> for std::result::Result<T, ApiError> {
    fn ctx(self, what: impl FnOnce() -> String) -> Inner<T> {
        self.map_err(|e| Fail::Api(e, what()))
    }
}

/// A job's media task is a direct BMC action that its restore repeats until the slot shows it;
/// Ironic attaches media in the background, under the node's lock, so media tasks are refused
/// with the way out (DataImages do go through Ironic's vmedia API).
pub(super) fn vmedia_unsupported(host: &HostInfo) -> ProvisionerError {
    ProvisionerError::new(
        ErrorKind::Unsupported,
        format!(
            "virtual media tasks for host {} are not run through Ironic (it attaches media in the background, where a job cannot follow it step by step): use the redfish provisioner for media tasks",
            host.key
        ),
    )
}

/// Never let the host's password through, whatever Ironic echoed.
pub(super) fn redact(message: &str, host: &HostInfo) -> String {
    let password = host.credentials.password();
    if password.len() >= 3 {
        message.replace(password, "******")
    } else {
        message.to_string()
    }
}

/// A failed BMC verification, as credentials or other trouble.
pub(super) fn registration_error(host: &HostInfo, last_error: &str) -> ProvisionerError {
    let lower = last_error.to_ascii_lowercase();
    let kind = if [
        "401",
        "unauthorized",
        "authentication",
        "access denied",
        "accesserror",
        "password",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        ErrorKind::Credentials
    } else {
        ErrorKind::Failed
    };
    ProvisionerError::new(
        kind,
        redact(
            &format!(
                "Ironic could not verify BMC {}: {last_error}",
                host.bmc.authority()
            ),
            host,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::{AutomatedCleaningMode, InspectionMode};
    use ferrometal_bmc::{BmcAddress, Credentials};

    #[test]
    fn passwords_never_leave_in_messages() {
        let host = HostInfo {
            key: "ns~h".into(),
            provisioner_id: String::new(),
            bmc: BmcAddress::parse("redfish://10.0.0.1/redfish/v1/Systems/1").unwrap(),
            credentials: Credentials::new("admin", "hunter22"),
            disable_certificate_verification: false,
            boot_mac_address: None,
            boot_mode: None,
            inspection_mode: InspectionMode::Disabled,
            root_device_hints: None,
            automated_cleaning_mode: AutomatedCleaningMode::Disabled,
            disable_power_off: false,
            preprovisioning_network_data: None,
        };
        let e = registration_error(&host, "HTTP 401 Unauthorized for user admin / hunter22");
        assert_eq!(e.kind, ErrorKind::Credentials);
        assert!(!e.message.contains("hunter22"), "{e}");
        assert!(e.message.contains("10.0.0.1:443"), "{e}");
        let e = registration_error(&host, "connection refused");
        assert_eq!(e.kind, ErrorKind::Failed);
    }
}
