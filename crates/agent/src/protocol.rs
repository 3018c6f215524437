//! The agent API's wire format, shared by the agent and the server that answers it.
//!
//! The hardware report has the JSON shape of metal3's `status.hardware` (`HardwareDetails`), so
//! the server stores what the agent sends without translating field by field; a test on the
//! server side parses this crate's output as metal3's type.
//!
//! The exchange: the agent reads its [`AgentConfig`] from the boot medium, then asks
//! `GET {api}/v1/instruction` what to do, does it and reports with `POST {api}/v1/report`. Every
//! answer is idempotent: the server hands out the same instruction until its report arrives,
//! and a report sent twice changes nothing the second time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where the agent's configuration sits in the ramdisk (appended to the initramfs per boot).
pub const CONFIG_PATH: &str = "/etc/ferrometal-agent/config.json";

/// Largest request or answer body either side accepts (a hardware report of a big server is
/// tens of KiB; a config drive is at most 64 MiB in Ironic, here it travels separately).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// What the agent is told at boot, per host and per boot.
#[derive(Serialize, Deserialize, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// The agent API's base URL, e.g. `https://10.0.2.2:6443/agent`.
    pub api_url: String,
    /// PEM of the CA that signed the agent API's certificate; the agent trusts nothing else.
    pub ca_pem: String,
    /// Bearer token bound to one host and one boot. Never logged.
    pub token: String,
    /// OpenStack `network_data.json` for the ramdisk's own addressing (the host's
    /// `preprovisioningNetworkDataName`); DHCP on every NIC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<serde_json::Value>,
    /// PEM certificates trusted for image and checksum downloads besides the system's roots
    /// (an image server signed by a private CA; `--agent-image-ca`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ca_pem: Option<String>,
    /// How long inspection listens for LLDP on the NICs (0: not at all); it stops sooner once
    /// every NIC heard its switch.
    #[serde(default)]
    pub lldp_wait_seconds: u32,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("api_url", &self.api_url)
            .field("token", &"<redacted>")
            .field("network_data", &self.network_data.is_some())
            .field("image_ca_pem", &self.image_ca_pem.is_some())
            .finish()
    }
}

/// What the server wants done next.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Instruction {
    /// Report the hardware.
    Inspect { id: String },
    /// Wipe partition tables and filesystem signatures on every disk.
    Clean { id: String },
    /// Write an image to the root disk, then the config drive.
    Deploy { id: String, deploy: Box<DeploySpec> },
    /// Nothing yet: ask again after this many seconds.
    Wait { seconds: u32 },
    /// All done: power off (or reboot) as the server says and stop asking.
    Finish { id: String, reboot: bool },
}

impl Instruction {
    pub fn id(&self) -> Option<&str> {
        match self {
            Instruction::Inspect { id }
            | Instruction::Clean { id }
            | Instruction::Deploy { id, .. }
            | Instruction::Finish { id, .. } => Some(id),
            Instruction::Wait { .. } => None,
        }
    }
}

/// An image deploy, as the agent needs it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploySpec {
    pub image_url: String,
    /// `raw` or `qcow2`.
    pub format: String,
    /// The checksum itself, or a URL to a checksum file (as metal3 allows).
    pub checksum: String,
    /// `md5`, `sha256`, `sha512` or `auto` (chosen by the checksum's length).
    pub checksum_type: String,
    #[serde(default)]
    pub root_device_hints: RootDeviceHints,
    /// URL (on the agent API) of the config drive (an ISO 9660 image labelled `config-2`) to
    /// write as its own partition; none when the host has no data for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_drive_url: Option<String>,
    /// metal3's `softwareRAIDVolumes`: md arrays built on the member disks before the image is
    /// written to the root one; empty: the image goes to the disk the hints choose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub software_raid: Vec<SoftwareRaidVolume>,
}

/// One of metal3's `softwareRAIDVolumes`, field for field.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SoftwareRaidVolume {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
    /// None or 0: the rest of each member disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_gibibytes: Option<i64>,
    /// `0`, `1` or `1+0`.
    pub level: String,
    /// One disk each (hints, as for the root device); none: every disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub physical_disks: Vec<RootDeviceHints>,
}

/// metal3's `rootDeviceHints`; every hint given must match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RootDeviceHints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size_gigabytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_with_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_vendor_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
}

/// What the agent sends back.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The instruction this answers (`None` for the hello sent at boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub outcome: Outcome,
    /// Seconds per phase of the work (`download+write`, `configDrive`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timings: BTreeMap<String, f64>,
    /// Mean write rate of an image deploy, MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_mb_per_s: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Outcome {
    /// The agent is up (the hello at boot).
    Alive,
    Inspected {
        hardware: Box<Hardware>,
    },
    Cleaned {
        disks: Vec<String>,
    },
    Deployed {
        root_disk: String,
    },
    /// The work failed; `message` says why in words a person can act on.
    Failed {
        message: String,
    },
}

/// The host's hardware, in metal3's `HardwareDetails` JSON shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Hardware {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_vendor: Option<SystemVendor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    #[serde(default)]
    pub ram_mebibytes: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<Nic>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<Disk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SystemVendor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Firmware {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<Bios>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Bios {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Nic {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(default)]
    pub speed_gbps: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vlans: Vec<Vlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_id: Option<i32>,
    #[serde(default)]
    pub pxe: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Vlan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `HDD`, `SSD` or `NVME`, as metal3 spells them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskType {
    #[serde(rename = "HDD")]
    Hdd,
    #[serde(rename = "SSD")]
    Ssd,
    #[serde(rename = "NVME")]
    Nvme,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// `/dev/NAME`.
    pub name: String,
    /// Other names of the same device (`/dev/disk/by-path/...`, `/dev/disk/by-id/...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternate_names: Vec<String>,
    #[serde(default)]
    pub rotational: bool,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<DiskType>,
    #[serde(default)]
    pub size_bytes: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_vendor_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_with_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    pub arch: String,
    pub model: String,
    #[serde(default)]
    pub clock_megahertz: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    pub count: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_and_reports_read_back_as_written() {
        let deploy = Instruction::Deploy {
            id: "d1".into(),
            deploy: Box::new(DeploySpec {
                image_url: "http://10.0.2.2:8088/disk.qcow2".into(),
                format: "qcow2".into(),
                checksum: "abc".into(),
                checksum_type: "sha256".into(),
                root_device_hints: RootDeviceHints {
                    min_size_gigabytes: Some(1),
                    ..RootDeviceHints::default()
                },
                config_drive_url: None,
                software_raid: Vec::new(),
            }),
        };
        let text = serde_json::to_string(&deploy).unwrap();
        assert!(text.contains(r#""action":"deploy""#), "{text}");
        assert!(text.contains(r#""minSizeGigabytes":1"#), "{text}");
        assert_eq!(serde_json::from_str::<Instruction>(&text).unwrap(), deploy);
        assert_eq!(deploy.id(), Some("d1"));
        assert_eq!(Instruction::Wait { seconds: 2 }.id(), None);

        let report = Report {
            id: Some("i1".into()),
            outcome: Outcome::Failed {
                message: "no disk".into(),
            },
            timings: BTreeMap::from([("inspect".to_string(), 0.5)]),
            write_mb_per_s: None,
        };
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains(r#""result":"failed""#), "{text}");
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
    }

    #[test]
    fn the_token_stays_out_of_debug_output() {
        let config = AgentConfig {
            api_url: "https://10.0.2.2:6443/agent".into(),
            ca_pem: "PEM".into(),
            token: "s3cret-token".into(),
            network_data: None,
            image_ca_pem: None,
            lldp_wait_seconds: 0,
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("10.0.2.2"), "{shown}");
    }
}
