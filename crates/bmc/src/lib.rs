//! Talking to baseboard management controllers: address parsing, the [`Bmc`] trait, and its
//! Redfish (reqwest + rustls) and IPMI (`ipmitool -I lanplus`) implementations.
//!
//! Every call issues one action and returns; nothing here waits for a power state to land,
//! so callers (the reconcilers) can requeue and observe instead of blocking a worker.

pub mod address;
mod connect;
mod error;
pub mod ipmi;
mod observe;
pub mod redfish;
mod types;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use address::{AddressError, BmcAddress, Flavour, Protocol, Transport};
pub use connect::connect;
pub use error::{BmcError, PLAIN_HTTP_TO_HTTPS};
pub use observe::{RequestCounter, RequestObserver};
pub use types::*;

/// One BMC, whatever its protocol.
#[async_trait::async_trait]
pub trait Bmc: Send + Sync {
    /// The BMC's `host:port`, for logs and errors (never credentials).
    fn endpoint(&self) -> &str;
    async fn power_state(&self) -> Result<PowerState, BmcError>;
    /// Issues one power action; does not wait for the new state.
    async fn power(&self, action: PowerAction) -> Result<(), BmcError>;
    async fn set_boot(&self, boot: BootOverride) -> Result<(), BmcError>;
    async fn insert_media(&self, image_url: &str) -> Result<(), BmcError>;
    async fn eject_media(&self) -> Result<(), BmcError>;
    async fn media_status(&self) -> Result<MediaStatus, BmcError>;
    async fn identity(&self) -> Result<SystemIdentity, BmcError>;
    /// Out-of-band hardware inventory for inspection.
    async fn inventory(&self) -> Result<Inventory, BmcError>;
    /// The boot source override in force (`None`: none), to put it back after a change.
    async fn boot_override(&self) -> Result<Option<BootOverride>, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "reading the boot override".into(),
        })
    }
    /// The power state and the boot override from one reading, where the BMC reports both in
    /// one document (Redfish's ComputerSystem): a job that confirms one task and reads the
    /// boot override for the next asks the BMC once. Unsupported elsewhere: read them apart.
    async fn power_and_boot(&self) -> Result<(PowerState, Option<BootOverride>), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "reading power and boot override together".into(),
        })
    }
    /// Clears a boot source override (Redfish `BootSourceOverrideEnabled: Disabled`).
    async fn clear_boot(&self) -> Result<(), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "clearing a boot override".into(),
        })
    }
    /// Whether UEFI Secure Boot is enabled (Redfish `SecureBoot.SecureBootEnable`).
    async fn secure_boot(&self) -> Result<bool, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "UEFI Secure Boot".into(),
        })
    }
    /// Enables or disables UEFI Secure Boot; takes effect at the next boot.
    async fn set_secure_boot(&self, _enable: bool) -> Result<(), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "UEFI Secure Boot".into(),
        })
    }
    /// The BIOS settings: current, pending, and the attribute registry when there is one.
    async fn bios(&self) -> Result<Bios, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "BIOS settings".into(),
        })
    }
    /// Stages BIOS settings in the BMC's pending settings; they take effect at the next boot.
    async fn set_bios(
        &self,
        _changes: &std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<(), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "BIOS settings".into(),
        })
    }
    /// The BIOS and BMC firmware versions.
    async fn firmware_versions(&self) -> Result<FirmwareVersions, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "firmware versions".into(),
        })
    }
    /// Starts a firmware update of `component` from the image at `image` (Redfish
    /// `UpdateService.SimpleUpdate`); returns the task that follows it.
    async fn start_update(
        &self,
        _component: FirmwareComponent,
        _image: &str,
    ) -> Result<String, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "firmware updates".into(),
        })
    }
    /// Where the update `task` (from `start_update`) is.
    async fn update_state(&self, _task: &str) -> Result<UpdateState, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "firmware updates".into(),
        })
    }
    /// The hardware RAID volumes of the system's storage controller.
    async fn volumes(&self) -> Result<Vec<RaidVolume>, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "hardware RAID".into(),
        })
    }
    /// The controller's drives (paths), for volumes that name their disks.
    async fn drives(&self) -> Result<Vec<String>, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "hardware RAID".into(),
        })
    }
    async fn create_volume(&self, _request: &VolumeRequest) -> Result<(), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "hardware RAID".into(),
        })
    }
    async fn delete_volume(&self, _path: &str) -> Result<(), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "hardware RAID".into(),
        })
    }
    /// The EventService's subscriptions.
    async fn subscriptions(&self) -> Result<Vec<EventSubscription>, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "event subscriptions".into(),
        })
    }
    /// Subscribes `destination` to the BMC's events; `headers` go with every event (they may
    /// hold a token: never logged).
    async fn subscribe(
        &self,
        _destination: &str,
        _context: &str,
        _headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<EventSubscription, BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "event subscriptions".into(),
        })
    }
    /// Deletes a subscription (one already gone is fine).
    async fn unsubscribe(&self, _path: &str) -> Result<(), BmcError> {
        Err(BmcError::Unsupported {
            bmc: self.endpoint().to_string(),
            what: "event subscriptions".into(),
        })
    }
    /// Ends any session the client holds; basic-auth clients have nothing to do.
    async fn logout(&self) -> Result<(), BmcError> {
        Ok(())
    }
}

/// Credentials from the host's Secret. The password is redacted from `Debug`.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    password: Password,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            username: username.into(),
            password: Password(password.into()),
        }
    }

    pub fn password(&self) -> &str {
        &self.password.0
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

#[derive(Clone)]
struct Password(String);

/// How the Redfish client authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// HTTP basic auth on every request: no session to exhaust on the BMC.
    #[default]
    Basic,
    /// A Redfish session (X-Auth-Token), reused and always logged out.
    Session,
}

/// Knobs for a client. The defaults suit production BMCs.
#[derive(Clone)]
pub struct BmcOptions {
    /// Per-request timeout.
    pub timeout: Duration,
    /// Skip TLS certificate verification (the host's `disableCertificateVerification`).
    pub disable_certificate_verification: bool,
    pub auth: AuthMode,
    /// IPMI cipher suite passed to `ipmitool -C` (3 is what most BMCs and ipmi_sim accept).
    pub ipmi_cipher_suite: u8,
    /// The `ipmitool` program.
    pub ipmitool: PathBuf,
    /// Retries for one IPMI command (`ipmitool -R`).
    pub ipmi_retries: u32,
    /// Told about every request sent, for counting.
    pub observer: Option<Arc<dyn RequestObserver>>,
}

impl Default for BmcOptions {
    fn default() -> Self {
        BmcOptions {
            timeout: Duration::from_secs(20),
            disable_certificate_verification: false,
            auth: AuthMode::Basic,
            ipmi_cipher_suite: 3,
            ipmitool: PathBuf::from("ipmitool"),
            ipmi_retries: 2,
            observer: None,
        }
    }
}
