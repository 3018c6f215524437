//! IPMI through `ipmitool -I lanplus`, the tool Ironic drives too.
//!
//! The password goes to ipmitool through its `IPMI_PASSWORD` environment variable (`-E`), so it
//! never shows on a command line (`ps`), and error texts are scrubbed of it as well.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::{
    Bmc, BmcAddress, BmcError, BmcOptions, BootDevice, BootMode, BootOverride, Credentials,
    Inventory, MediaStatus, PowerAction, PowerState, Protocol, SystemIdentity,
};

pub struct IpmiBmc {
    host: String,
    port: u16,
    privilege_level: Option<&'static str>,
    endpoint: String,
    credentials: Credentials,
    options: BmcOptions,
}

impl IpmiBmc {
    pub fn new(address: &BmcAddress, credentials: Credentials, options: BmcOptions) -> IpmiBmc {
        IpmiBmc {
            host: address.host.clone(),
            port: address.port,
            privilege_level: address.privilege_level,
            endpoint: address.authority(),
            credentials,
            options,
        }
    }

    /// The arguments of one ipmitool call; the password is not among them.
    fn args<'a>(&'a self, command: &[&'a str]) -> Vec<String> {
        // ipmitool's own per-try timeout; the whole call is bounded by `self.options.timeout`.
        let per_try =
            (self.options.timeout.as_secs() / u64::from(self.options.ipmi_retries + 1)).max(1);
        let mut args = vec![
            "-I".to_string(),
            "lanplus".into(),
            "-H".into(),
            self.host.clone(),
            "-p".into(),
            self.port.to_string(),
            "-U".into(),
            self.credentials.username.clone(),
            "-E".into(),
            // -v makes ipmitool say why a session failed (e.g. "RAKP 2 HMAC is invalid") on stderr.
            "-v".into(),
            "-C".into(),
            self.options.ipmi_cipher_suite.to_string(),
            "-N".into(),
            per_try.to_string(),
            "-R".into(),
            self.options.ipmi_retries.to_string(),
        ];
        // ipmitool's default is ADMINISTRATOR, as metal3's.
        if let Some(level) = self.privilege_level {
            args.extend(["-L".to_string(), level.to_string()]);
        }
        args.extend(command.iter().map(|s| s.to_string()));
        args
    }

    async fn run(&self, command: &[&str]) -> Result<String, BmcError> {
        if let Some(observer) = &self.options.observer {
            observer.on_request(Protocol::Ipmi, "IPMI");
        }
        let operation = command.join(" ");
        let mut cmd = Command::new(&self.options.ipmitool);
        cmd.args(self.args(command))
            .env("IPMI_PASSWORD", self.credentials.password())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| BmcError::Unreachable {
            bmc: self.endpoint.clone(),
            reason: format!("cannot run {}: {e}", self.options.ipmitool.display()),
        })?;
        let limit = self.options.timeout + Duration::from_secs(1);
        let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => {
                return Err(BmcError::Unreachable {
                    bmc: self.endpoint.clone(),
                    reason: format!("ipmitool failed to run: {e}"),
                });
            }
            Err(_) => {
                return Err(BmcError::Timeout {
                    bmc: self.endpoint.clone(),
                    operation,
                    timeout: self.options.timeout,
                });
            }
        };
        let stdout = self.scrub(&String::from_utf8_lossy(&output.stdout));
        if output.status.success() {
            return Ok(stdout);
        }
        let stderr = self.scrub(String::from_utf8_lossy(&output.stderr).trim());
        Err(classify_failure(
            &self.endpoint,
            &operation,
            &stderr,
            self.options.timeout,
        ))
    }

    fn scrub(&self, text: &str) -> String {
        let password = self.credentials.password();
        if password.is_empty() {
            text.to_string()
        } else {
            text.replace(password, "<redacted>")
        }
    }

    fn unsupported(&self, what: &str) -> BmcError {
        BmcError::Unsupported {
            bmc: self.endpoint.clone(),
            what: format!("{what} over IPMI"),
        }
    }
}

/// Maps ipmitool's complaints to typed errors. Texts vary by version; match loosely.
fn classify_failure(bmc: &str, operation: &str, stderr: &str, timeout: Duration) -> BmcError {
    let lower = stderr.to_ascii_lowercase();
    let bmc = bmc.to_string();
    if lower.contains("unauthorized")
        || lower.contains("invalid user name")
        || lower.contains("hmac is invalid")
        || lower.contains("insufficient privilege")
        || lower.contains("password")
    {
        return BmcError::Unauthorized { bmc };
    }
    if lower.contains("unable to establish")
        || lower.contains("no response")
        || lower.contains("timeout")
        || lower.contains("connection refused")
    {
        // lanplus reports an unknown user with the same "unable to establish" text as an
        // unreachable BMC when the BMC stays silent; both are retried with backoff.
        return BmcError::Timeout {
            bmc,
            operation: operation.to_string(),
            timeout,
        };
    }
    if lower.contains("address lookup") || lower.contains("unknown host") {
        return BmcError::Unreachable {
            bmc,
            reason: stderr
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect(),
        };
    }
    BmcError::Protocol {
        bmc,
        operation: operation.to_string(),
        reason: if stderr.is_empty() {
            "ipmitool failed without a message".into()
        } else {
            stderr.chars().take(300).collect()
        },
    }
}

#[async_trait::async_trait]
impl Bmc for IpmiBmc {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn power_state(&self) -> Result<PowerState, BmcError> {
        let out = self.run(&["chassis", "power", "status"]).await?;
        match PowerState::parse_lenient(&out) {
            PowerState::Unknown => Err(BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: "chassis power status".into(),
                reason: format!("unexpected answer {:?}", out.trim()),
            }),
            state => Ok(state),
        }
    }

    async fn power(&self, action: PowerAction) -> Result<(), BmcError> {
        let verb = match action {
            PowerAction::On | PowerAction::ForceOn => "on",
            PowerAction::ForceOff => "off",
            PowerAction::GracefulShutdown => "soft",
            PowerAction::PowerCycle => "cycle",
            PowerAction::ForceRestart => "reset",
            // IPMI has no graceful restart; doing a hard one instead would surprise.
            PowerAction::GracefulRestart => return Err(self.unsupported("GracefulRestart")),
        };
        self.run(&["chassis", "power", verb]).await.map(|_| ())
    }

    async fn set_boot(&self, boot: BootOverride) -> Result<(), BmcError> {
        let device = match boot.device {
            BootDevice::Pxe => "pxe",
            BootDevice::Hdd => "disk",
            BootDevice::Cd => "cdrom",
            BootDevice::BiosSetup => "bios",
            BootDevice::UefiHttp => return Err(self.unsupported("UEFI HTTP boot")),
        };
        let mut options = Vec::new();
        if !boot.once {
            options.push("persistent");
        }
        if boot.mode != Some(BootMode::Legacy) {
            options.push("efiboot");
        }
        let options = format!("options={}", options.join(","));
        self.run(&["chassis", "bootdev", device, &options])
            .await
            .map(|_| ())
    }

    async fn insert_media(&self, _image_url: &str) -> Result<(), BmcError> {
        Err(self.unsupported("virtual media"))
    }

    async fn eject_media(&self) -> Result<(), BmcError> {
        Err(self.unsupported("virtual media"))
    }

    async fn media_status(&self) -> Result<MediaStatus, BmcError> {
        Err(self.unsupported("virtual media"))
    }

    async fn identity(&self) -> Result<SystemIdentity, BmcError> {
        let out = self.run(&["mc", "guid"]).await?;
        let uuid = out
            .lines()
            .find(|l| l.trim_start().starts_with("System GUID"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string());
        Ok(SystemIdentity {
            uuid,
            ..SystemIdentity::default()
        })
    }

    async fn inventory(&self) -> Result<Inventory, BmcError> {
        Err(self.unsupported("out-of-band inventory"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_classified() {
        let t = Duration::from_secs(5);
        let rows = [
            (
                "RAKP 2 message indicates an error : unauthorized name",
                "unauthorized",
            ),
            ("RAKP 2 HMAC is invalid", "unauthorized"),
            (
                "Error: Unable to establish IPMI v2 / RMCP+ session",
                "timeout",
            ),
            ("Address lookup for nowhere failed", "unreachable"),
            ("Invalid chassis power command: foo", "protocol"),
            ("", "protocol"),
        ];
        for (stderr, category) in rows {
            assert_eq!(
                classify_failure("h:623", "op", stderr, t).category(),
                category,
                "{stderr}"
            );
        }
    }

    #[test]
    fn password_is_never_an_argument() {
        let address = BmcAddress::parse("ipmi://10.0.0.1").unwrap();
        let bmc = IpmiBmc::new(
            &address,
            Credentials::new("admin", "hunter2"),
            BmcOptions::default(),
        );
        let args = bmc.args(&["chassis", "power", "status"]);
        assert!(args.iter().all(|a| !a.contains("hunter2")), "{args:?}");
        assert!(args.contains(&"-E".to_string()));
    }
}
