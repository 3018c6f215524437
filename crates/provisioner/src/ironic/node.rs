//! Pure translations between ferrometal's host data and Ironic's node fields: driver and
//! interfaces per BMC scheme, driver_info, instance_info, configdrive, root device hints, and
//! inspection inventory back into `HardwareDetails`. No I/O here, so all of it is unit-tested.

use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{
    AutomatedCleaningMode, BootMode, ChecksumType, CpuDetails, DiskType, HardwareDetails,
    HardwareSystemVendor, ImageFormat, NicDetails, RootDeviceHints, StorageDetails,
};
use ferrometal_bmc::{Flavour, PowerState, Protocol};
use serde_json::{Map, Value, json};

use crate::{Deployment, ErrorKind, HostInfo, ProvisionerError, Result};

/// Hardware type and interfaces for one BMC scheme (what metal3 configures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    pub driver: &'static str,
    pub boot: &'static str,
    pub power: &'static str,
    pub management: &'static str,
    pub inspect: &'static str,
    /// The boot interface that serves images over the BMC's virtual media, if any.
    pub virtual_media_boot: Option<&'static str>,
}

pub fn driver_for(flavour: Flavour) -> Driver {
    let redfish = |boot| Driver {
        driver: "redfish",
        boot,
        power: "redfish",
        management: "redfish",
        inspect: "redfish",
        virtual_media_boot: Some("redfish-virtual-media"),
    };
    let idrac = |boot| Driver {
        driver: "idrac",
        boot,
        power: "idrac-redfish",
        management: "idrac-redfish",
        inspect: "idrac-redfish",
        virtual_media_boot: Some("idrac-redfish-virtual-media"),
    };
    match flavour {
        Flavour::Ipmi | Flavour::Libvirt => Driver {
            driver: "ipmi",
            boot: "ipxe",
            power: "ipmitool",
            management: "ipmitool",
            // IPMI has no inventory to read out of band.
            inspect: "no-inspect",
            virtual_media_boot: None,
        },
        Flavour::Redfish | Flavour::Ilo5Redfish => redfish("ipxe"),
        Flavour::RedfishVirtualMedia | Flavour::Ilo5VirtualMedia => {
            redfish("redfish-virtual-media")
        }
        Flavour::RedfishUefiHttp => redfish("redfish-https"),
        Flavour::IdracRedfish => idrac("ipxe"),
        Flavour::IdracVirtualMedia => idrac("idrac-redfish-virtual-media"),
    }
}

/// Options that shape driver_info beyond what the host says.
#[derive(Debug, Clone, Default)]
pub struct DriverInfoOptions {
    /// `ipmi_cipher_suite`; 3 is the one IPMI 2.0 requires every BMC to offer.
    pub ipmi_cipher_suite: Option<u8>,
    /// The agent ramdisk Ironic boots to write disk images and clean (`direct` deploys):
    /// kernel and initramfs URLs for network boot, an ISO for virtual media.
    pub deploy_kernel: Option<String>,
    pub deploy_ramdisk: Option<String>,
    pub deploy_iso: Option<String>,
    /// An EFI system partition image with a boot loader, which Ironic puts into the ISOs it
    /// builds from kernel and initramfs for UEFI machines (driver_info `bootloader`).
    pub bootloader: Option<String>,
}

impl DriverInfoOptions {
    /// Whether Ironic has an agent ramdisk to boot.
    pub fn has_ramdisk(&self) -> bool {
        (self.deploy_kernel.is_some() && self.deploy_ramdisk.is_some()) || self.deploy_iso.is_some()
    }
}

/// The inspect interface: in-band through the agent ramdisk when there is one and the BMC can
/// boot it without a PXE network (metal3's default, Ironic's built-in inspection: the
/// ramdisk reports what the OS sees), else the BMC's own inventory.
pub fn inspect_interface(flavour: Flavour, opts: &DriverInfoOptions) -> &'static str {
    let d = driver_for(flavour);
    let boots_media = d.virtual_media_boot == Some(d.boot) || d.boot == "redfish-https";
    if opts.has_ramdisk() && boots_media {
        "agent"
    } else {
        d.inspect
    }
}

/// driver_info with the BMC address and credentials. Contains the password: never log it.
pub fn driver_info(host: &HostInfo, opts: &DriverInfoOptions) -> Value {
    let creds = &host.credentials;
    let mut info = Map::new();
    if host.bmc.protocol() == Protocol::Ipmi {
        info.insert("ipmi_address".into(), json!(host.bmc.host));
        info.insert("ipmi_port".into(), json!(host.bmc.port));
        info.insert("ipmi_username".into(), json!(creds.username));
        info.insert("ipmi_password".into(), json!(creds.password()));
        let level = host.bmc.privilege_level.unwrap_or("ADMINISTRATOR");
        info.insert("ipmi_priv_level".into(), json!(level));
        if let Some(suite) = opts.ipmi_cipher_suite {
            info.insert("ipmi_cipher_suite".into(), json!(suite));
        }
    } else {
        info.insert("redfish_address".into(), json!(host.bmc.base_url()));
        if let Some(path) = &host.bmc.system_path {
            info.insert("redfish_system_id".into(), json!(path));
        }
        info.insert("redfish_username".into(), json!(creds.username));
        info.insert("redfish_password".into(), json!(creds.password()));
        if host.disable_certificate_verification {
            info.insert("redfish_verify_ca".into(), json!(false));
        }
    }
    for (key, value) in [
        ("deploy_kernel", &opts.deploy_kernel),
        ("deploy_ramdisk", &opts.deploy_ramdisk),
        ("deploy_iso", &opts.deploy_iso),
        ("bootloader", &opts.bootloader),
    ] {
        if let Some(v) = value {
            info.insert(key.into(), json!(v));
        }
    }
    Value::Object(info)
}

/// driver_info as Ironic shows it back (passwords masked), for comparing with a node's.
pub fn masked(info: &Value) -> Value {
    let mut out = info.clone();
    if let Some(map) = out.as_object_mut() {
        for (k, v) in map.iter_mut() {
            if k.ends_with("_password") {
                *v = json!("******");
            }
        }
    }
    out
}

/// The boot mode capabilities Ironic reads from `properties.capabilities` (metal3's values:
/// secure boot is `secure_boot:true` beside `boot_mode:uefi`, never a plain UEFI boot).
pub fn boot_mode_capability(mode: Option<BootMode>) -> Option<&'static str> {
    match mode? {
        BootMode::Uefi => Some("boot_mode:uefi"),
        BootMode::UefiSecureBoot => Some("boot_mode:uefi,secure_boot:true"),
        BootMode::Legacy => Some("boot_mode:bios"),
    }
}

/// The same as `instance_info.capabilities`, which is what Ironic acts on while deploying: with
/// `secure_boot` it turns UEFI Secure Boot on through the BMC before booting the instance.
pub fn instance_capabilities(mode: Option<BootMode>) -> Option<Value> {
    match mode? {
        BootMode::Uefi => Some(json!({"boot_mode": "uefi"})),
        BootMode::UefiSecureBoot => Some(json!({"boot_mode": "uefi", "secure_boot": "true"})),
        BootMode::Legacy => Some(json!({"boot_mode": "bios"})),
    }
}

/// The body that creates the node for `host`.
pub fn create_body(host: &HostInfo, opts: &DriverInfoOptions) -> Value {
    let d = driver_for(host.bmc.flavour);
    let mut body = json!({
        "name": host.key,
        "driver": d.driver,
        "boot_interface": d.boot,
        "power_interface": d.power,
        "management_interface": d.management,
        "inspect_interface": inspect_interface(host.bmc.flavour, opts),
        "driver_info": driver_info(host, opts),
        "automated_clean": host.automated_cleaning_mode != AutomatedCleaningMode::Disabled,
    });
    let mut properties = Map::new();
    if let Some(cap) = boot_mode_capability(host.boot_mode) {
        properties.insert("capabilities".into(), json!(cap));
    }
    if let Some(hints) = &host.root_device_hints {
        properties.insert("root_device".into(), root_device(hints));
    }
    if !properties.is_empty() {
        body["properties"] = Value::Object(properties);
    }
    body
}

/// Root device hints in Ironic's vocabulary.
pub fn root_device(h: &RootDeviceHints) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    };
    put("name", &h.device_name);
    put("hctl", &h.hctl);
    put("model", &h.model);
    put("vendor", &h.vendor);
    put("serial", &h.serial_number);
    put("wwn", &h.wwn);
    put("wwn_with_extension", &h.wwn_with_extension);
    put("wwn_vendor_extension", &h.wwn_vendor_extension);
    if let Some(size) = h.min_size_gigabytes {
        m.insert("size".into(), json!(format!(">= {size}")));
    }
    if let Some(r) = h.rotational {
        m.insert("rotational".into(), json!(r));
    }
    Value::Object(m)
}

/// What a deployment turns into on the node: interfaces, instance_info, deploy steps.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploySpec {
    pub deploy_interface: String,
    pub boot_interface: String,
    pub instance_info: Value,
    /// The custom deploy method, run as the single deploy step.
    pub deploy_step: Option<String>,
    /// What identifies this deployment in instance_info (image URL or custom method).
    pub identity: String,
}

fn invalid(message: impl Into<String>) -> ProvisionerError {
    ProvisionerError::new(ErrorKind::InvalidInput, message)
}

fn unsupported(message: impl Into<String>) -> ProvisionerError {
    ProvisionerError::new(ErrorKind::Unsupported, message)
}

pub fn deploy_spec(host: &HostInfo, deployment: &Deployment) -> Result<DeploySpec> {
    let mut spec = deploy_method(host, deployment)?;
    if let (Some(caps), Some(info)) = (
        instance_capabilities(host.boot_mode),
        spec.instance_info.as_object_mut(),
    ) {
        info.insert("capabilities".into(), caps);
    }
    Ok(spec)
}

/// Interfaces and instance_info for the kind of deployment (custom, live ISO, disk image).
fn deploy_method(host: &HostInfo, deployment: &Deployment) -> Result<DeploySpec> {
    let d = driver_for(host.bmc.flavour);
    if let Some(custom) = &deployment.custom_deploy {
        let mut info = Map::new();
        if let Some(image) = &deployment.image {
            info.insert("image_source".into(), json!(image.url));
        }
        return Ok(DeploySpec {
            deploy_interface: "custom-agent".into(),
            boot_interface: d.boot.into(),
            instance_info: Value::Object(info),
            deploy_step: Some(custom.method.clone()),
            identity: format!("custom:{}", custom.method),
        });
    }
    let Some(image) = &deployment.image else {
        return Err(invalid("no image to provision"));
    };
    if image.url.trim().is_empty() {
        return Err(invalid("image.url is empty").in_spec(SpecFault::ImageUrlEmpty));
    }
    if image.is_live_iso() {
        // A live ISO boots from the BMC's virtual media with Ironic's ramdisk deploy; there is
        // no PXE/iPXE infrastructure to boot it from otherwise.
        let Some(boot) = d.virtual_media_boot else {
            return Err(unsupported(format!(
                "BMC {} speaks IPMI, which has no virtual media: a live-iso image needs a Redfish BMC",
                host.bmc.authority()
            )));
        };
        return Ok(DeploySpec {
            deploy_interface: "ramdisk".into(),
            boot_interface: boot.into(),
            instance_info: json!({
                "boot_iso": image.url,
                // Let the BMC fetch the image from its URL instead of Ironic caching it.
                "ramdisk_image_download_source": "http",
            }),
            deploy_step: None,
            identity: image.url.clone(),
        });
    }
    let mut info = Map::new();
    info.insert("image_source".into(), json!(image.url));
    let checksum = image.checksum.as_deref().map(str::trim).unwrap_or("");
    if checksum.is_empty() {
        return Err(invalid(format!(
            "image {} has no checksum (only live-iso images may omit it)",
            image.url
        ))
        .in_spec(SpecFault::ImageChecksumMissing));
    }
    let is_url = checksum.starts_with("http://") || checksum.starts_with("https://");
    match image.checksum_type {
        Some(ChecksumType::Sha256 | ChecksumType::Sha512) if !is_url => {
            let algo = if image.checksum_type == Some(ChecksumType::Sha256) {
                "sha256"
            } else {
                "sha512"
            };
            info.insert("image_os_hash_algo".into(), json!(algo));
            info.insert("image_os_hash_value".into(), json!(checksum));
        }
        // md5, auto (Ironic guesses from the length) and checksum-file URLs.
        _ => {
            info.insert("image_checksum".into(), json!(checksum));
        }
    }
    if let Some(format) = image.format {
        let disk = match format {
            ImageFormat::Raw => "raw",
            ImageFormat::Qcow2 => "qcow2",
            ImageFormat::Vdi => "vdi",
            ImageFormat::Vmdk => "vmdk",
            ImageFormat::LiveIso => unreachable!("handled above"),
        };
        info.insert("image_disk_format".into(), json!(disk));
    }
    info.insert("image_type".into(), json!("whole-disk"));
    Ok(DeploySpec {
        deploy_interface: "direct".into(),
        boot_interface: d.boot.into(),
        instance_info: Value::Object(info),
        deploy_step: None,
        identity: image.url.clone(),
    })
}

/// Whether the node's instance_info already describes this deployment.
pub fn instance_matches(node_instance_info: &Value, spec: &DeploySpec) -> bool {
    let url_keys = ["boot_iso", "image_source"];
    if spec.identity.starts_with("custom:") {
        return true;
    }
    url_keys
        .iter()
        .any(|k| node_instance_info.get(*k).and_then(Value::as_str) == Some(spec.identity.as_str()))
}

pub use crate::config_drive::configdrive;

pub fn power_of(node: &Value) -> PowerState {
    match node.get("power_state").and_then(Value::as_str) {
        Some("power on") => PowerState::On,
        Some("power off") => PowerState::Off,
        _ => PowerState::Unknown,
    }
}

/// On (or being turned on), with an agent heartbeat on record but no agent address: the agent
/// that sent it is gone (a power-off wipes the address) and the node was powered on again
/// outside a deploy. Ironic's
/// fast track would take it for a running agent (recent heartbeat, power on) and wait for its
/// call-back forever instead of booting the ramdisk.
pub(super) fn stale_fast_track(node: &Value) -> bool {
    let info = node.get("driver_internal_info").unwrap_or(&Value::Null);
    let set = |k: &str| info.get(k).is_some_and(|v| !v.is_null());
    let on = power_of(node) == PowerState::On
        || node.get("target_power_state").and_then(Value::as_str) == Some("power on");
    on && set("agent_last_heartbeat") && !set("agent_url")
}

/// Provision states in which Ironic is working on the node (they count against capacity).
pub const BUSY_STATES: [&str; 10] = [
    "inspecting",
    "inspect wait",
    "cleaning",
    "clean wait",
    "deploying",
    "wait call-back",
    "deleting",
    "adopting",
    "servicing",
    "service wait",
];

pub(super) fn uuid(node: &Value) -> &str {
    str_of(node, "uuid")
}

pub(super) fn str_of<'a>(node: &'a Value, key: &str) -> &'a str {
    node.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn provision_state(node: &Value) -> &str {
    str_of(node, "provision_state")
}

pub(super) fn last_error(node: &Value) -> Option<String> {
    node.get("last_error")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// The newest error in a node's history (`GET /v1/nodes/{id}/history?detail=true`): where the
/// cause of a failure stays when `last_error` does not (a failed deploy step's clean-up powers
/// the node off, and a power action clears `last_error`).
pub fn newest_history_error(history: &Value) -> Option<String> {
    history
        .get("history")?
        .as_array()?
        .iter()
        .filter(|e| e.get("severity").and_then(Value::as_str) == Some("ERROR"))
        .max_by(|a, b| {
            let at = |e: &Value| {
                e.get("created_at")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            at(a).cmp(&at(b))
        })
        .and_then(|e| e.get("event").and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// A node in a failed state that Ironic still holds a lock on: it is finishing its failure
/// handling (a deploy failure powers the node off, which clears `last_error` until Ironic sets
/// it again), so its error is not final yet.
pub(super) fn settling(node: &Value) -> bool {
    provision_state(node).ends_with(" failed")
        && node.get("reservation").is_some_and(|r| !r.is_null())
}

pub(super) fn is_busy(state: &str) -> bool {
    BUSY_STATES.contains(&state)
}

/// Turns Ironic's inspection inventory (the agent's format, which out-of-band redfish
/// inspection also writes) and the node's properties into `status.hardware`.
pub fn hardware_details(
    inventory: &Value,
    properties: &Value,
    boot_mac: Option<&str>,
) -> Result<HardwareDetails> {
    let cpu_count = inventory
        .pointer("/cpu/count")
        .and_then(Value::as_i64)
        .or_else(|| properties.get("cpus").and_then(as_i64_loose))
        .unwrap_or(0);
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let arch = text(inventory.pointer("/cpu/architecture"))
        .or_else(|| text(properties.get("cpu_arch")))
        .unwrap_or_default();
    let cpu = CpuDetails {
        arch,
        model: text(inventory.pointer("/cpu/model_name")).unwrap_or_default(),
        clock_megahertz: inventory
            .pointer("/cpu/frequency")
            .and_then(|f| f.as_f64().or_else(|| f.as_str()?.parse().ok()))
            .unwrap_or(0.0),
        flags: inventory
            .pointer("/cpu/flags")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        count: cpu_count,
    };
    let ram = inventory
        .pointer("/memory/physical_mb")
        .and_then(as_i64_loose)
        .or_else(|| properties.get("memory_mb").and_then(as_i64_loose))
        .unwrap_or(0);
    let boot_mac = boot_mac.map(str::to_ascii_lowercase);
    let pxe_mac = text(inventory.pointer("/boot/pxe_interface")).map(|m| m.to_ascii_lowercase());
    let nics: Vec<NicDetails> = inventory
        .get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let mac = text(i.get("mac_address"))?;
            let lower = mac.to_ascii_lowercase();
            Some(NicDetails {
                name: text(i.get("name")).unwrap_or_else(|| mac.clone()),
                model: text(i.get("product")),
                ip: text(i.get("ipv4_address")).or_else(|| text(i.get("ipv6_address"))),
                speed_gbps: i.get("speed_mbps").and_then(as_i64_loose).unwrap_or(0) / 1000,
                pxe: boot_mac.as_deref().or(pxe_mac.as_deref()) == Some(lower.as_str()),
                pci_address: text(i.get("pci_address")),
                mac,
                ..NicDetails::default()
            })
        })
        .collect();
    let storage = inventory
        .get("disks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| {
            let rotational = d
                .get("rotational")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let name = text(d.get("name")).unwrap_or_default();
            let kind = if name.contains("nvme") {
                DiskType::Nvme
            } else if rotational {
                DiskType::Hdd
            } else {
                DiskType::Ssd
            };
            StorageDetails {
                name,
                rotational,
                type_: Some(kind),
                size_bytes: d.get("size").and_then(as_i64_loose).unwrap_or(0),
                vendor: text(d.get("vendor")),
                model: text(d.get("model")),
                serial_number: text(d.get("serial")),
                wwn: text(d.get("wwn")),
                wwn_vendor_extension: text(d.get("wwn_vendor_extension")),
                wwn_with_extension: text(d.get("wwn_with_extension")),
                hctl: text(d.get("hctl")),
                ..StorageDetails::default()
            }
        })
        .collect();
    let vendor = inventory.get("system_vendor");
    Ok(HardwareDetails {
        system_vendor: Some(HardwareSystemVendor {
            manufacturer: text(vendor.and_then(|v| v.get("manufacturer")))
                .or_else(|| text(properties.get("vendor"))),
            product_name: text(vendor.and_then(|v| v.get("product_name"))),
            serial_number: text(vendor.and_then(|v| v.get("serial_number"))),
        }),
        firmware: None,
        ram_mebibytes: ram,
        nics,
        storage,
        cpu: Some(cpu),
        hostname: None,
    })
}

fn as_i64_loose(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .or_else(|| v.as_str()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::{CustomDeploy, Image, ImageFormat, InspectionMode};
    use ferrometal_bmc::{BmcAddress, Credentials};

    #[test]
    fn a_node_on_without_its_agent_is_told_from_fast_track() {
        let node = |power: &str, info: serde_json::Value| serde_json::json!({"power_state": power, "driver_internal_info": info});
        let beat = "2026-11-27T18:03:46.000000";
        // Powered on again after the agent went: fast track would wait for nobody.
        assert!(stale_fast_track(&node(
            "power on",
            serde_json::json!({"agent_last_heartbeat": beat})
        )));
        // The agent runs (fast track from cleaning): deploy on it.
        assert!(!stale_fast_track(&node(
            "power on",
            serde_json::json!({"agent_last_heartbeat": beat, "agent_url": "http://172.22.100.140:9999"})
        )));
        // Off, or never an agent: Ironic boots the ramdisk itself.
        assert!(!stale_fast_track(&node(
            "power off",
            serde_json::json!({"agent_last_heartbeat": beat})
        )));
        assert!(!stale_fast_track(&node("power on", serde_json::json!({}))));
        // Being turned on counts as on: the deploy would start once it is.
        let mut turning = node(
            "power off",
            serde_json::json!({"agent_last_heartbeat": beat}),
        );
        turning["target_power_state"] = "power on".into();
        assert!(stale_fast_track(&turning));
        assert!(!stale_fast_track(&node(
            "power on",
            serde_json::json!({"agent_last_heartbeat": null})
        )));
    }

    fn host(address: &str) -> HostInfo {
        HostInfo {
            key: "ns~h1".into(),
            provisioner_id: String::new(),
            bmc: BmcAddress::parse(address).unwrap(),
            credentials: Credentials::new("admin", "s3cret"),
            disable_certificate_verification: true,
            boot_mac_address: Some("52:54:00:00:00:01".into()),
            boot_mode: Some(BootMode::Uefi),
            inspection_mode: InspectionMode::Fast,
            root_device_hints: None,
            automated_cleaning_mode: AutomatedCleaningMode::Disabled,
            disable_power_off: false,
            preprovisioning_network_data: None,
        }
    }

    #[test]
    fn schemes_pick_drivers_like_metal3() {
        let cases = [
            ("ipmi://10.0.0.1", "ipmi", "ipxe"),
            ("10.0.0.1:6230", "ipmi", "ipxe"),
            ("redfish://10.0.0.1/redfish/v1/Systems/1", "redfish", "ipxe"),
            (
                "redfish-virtualmedia+http://10.0.0.1/redfish/v1/Systems/1",
                "redfish",
                "redfish-virtual-media",
            ),
            (
                "ilo5-virtualmedia://10.0.0.1/x",
                "redfish",
                "redfish-virtual-media",
            ),
            ("redfish-uefihttp://10.0.0.1/x", "redfish", "redfish-https"),
            ("idrac-redfish://10.0.0.1/x", "idrac", "ipxe"),
            (
                "idrac-virtualmedia://10.0.0.1/x",
                "idrac",
                "idrac-redfish-virtual-media",
            ),
        ];
        for (address, driver, boot) in cases {
            let d = driver_for(BmcAddress::parse(address).unwrap().flavour);
            assert_eq!((d.driver, d.boot), (driver, boot), "{address}");
        }
    }

    #[test]
    fn driver_info_per_protocol() {
        let h = host("redfish-virtualmedia+https://10.0.0.1:8443/redfish/v1/Systems/abc");
        let info = driver_info(&h, &DriverInfoOptions::default());
        assert_eq!(info["redfish_address"], "https://10.0.0.1:8443");
        assert_eq!(info["redfish_system_id"], "/redfish/v1/Systems/abc");
        assert_eq!(info["redfish_username"], "admin");
        assert_eq!(info["redfish_password"], "s3cret");
        assert_eq!(info["redfish_verify_ca"], false);
        assert_eq!(masked(&info)["redfish_password"], "******");

        let h = host("ipmi://10.0.0.2:6230");
        let info = driver_info(
            &h,
            &DriverInfoOptions {
                ipmi_cipher_suite: Some(3),
                deploy_kernel: Some("http://i/ipa.kernel".into()),
                deploy_ramdisk: Some("http://i/ipa.initramfs".into()),
                deploy_iso: None,
                bootloader: None,
            },
        );
        assert_eq!(info["ipmi_address"], "10.0.0.2");
        assert_eq!(info["ipmi_port"], 6230);
        assert_eq!(info["ipmi_priv_level"], "ADMINISTRATOR");
        assert_eq!(info["ipmi_cipher_suite"], 3);
        assert_eq!(info["deploy_kernel"], "http://i/ipa.kernel");
        assert!(info.get("deploy_iso").is_none());
        // metal3's VirtualBMC hosts (`libvirt://`) are IPMI, their privilege level passed on.
        let vbmc = host("libvirt://192.168.122.1:6233/?privilegelevel=OPERATOR");
        let info = driver_info(&vbmc, &DriverInfoOptions::default());
        assert_eq!(info["ipmi_address"], "192.168.122.1");
        assert_eq!(info["ipmi_port"], 6233);
        assert_eq!(info["ipmi_priv_level"], "OPERATOR");
        assert_eq!(
            create_body(&vbmc, &DriverInfoOptions::default())["driver"],
            "ipmi"
        );
        let body = create_body(&h, &DriverInfoOptions::default());
        assert_eq!(body["name"], "ns~h1");
        assert_eq!(body["driver"], "ipmi");
        assert_eq!(body["automated_clean"], false);
        assert_eq!(body["properties"]["capabilities"], "boot_mode:uefi");
    }

    #[test]
    fn the_newest_error_of_a_history_is_the_cause() {
        let history = json!({"history": [
            {"created_at": "2026-11-27T14:42:37+00:00", "severity": "INFO", "event": "Starting deployment"},
            {"created_at": "2026-11-27T14:45:20+00:00", "severity": "ERROR", "event": "old failure"},
            {"created_at": "2026-11-27T14:48:39+00:00", "severity": "ERROR", "event": "Image failed to verify against checksum."},
            {"created_at": "2026-11-27T14:48:53+00:00", "severity": "INFO", "event": "Starting deployment"},
        ]});
        assert_eq!(
            newest_history_error(&history).as_deref(),
            Some("Image failed to verify against checksum.")
        );
        assert_eq!(newest_history_error(&json!({"history": []})), None);
        assert_eq!(newest_history_error(&Value::Null), None);
    }

    #[test]
    fn a_failed_node_still_locked_is_settling() {
        let n = |state: &str, reservation: Value| json!({"provision_state": state, "reservation": reservation, "last_error": null});
        assert!(settling(&n("deploy failed", json!("conductor-1"))));
        assert!(settling(&n("clean failed", json!("conductor-1"))));
        assert!(!settling(&n("deploy failed", Value::Null)));
        assert!(!settling(&n("deploying", json!("conductor-1"))));
        assert!(!settling(&json!({"provision_state": "deploy failed"})));
    }

    #[test]
    fn inspection_is_in_band_when_the_ramdisk_can_boot_from_virtual_media() {
        let ramdisk = DriverInfoOptions {
            deploy_kernel: Some("http://i/k".into()),
            deploy_ramdisk: Some("http://i/r".into()),
            ..DriverInfoOptions::default()
        };
        let iso = DriverInfoOptions {
            deploy_iso: Some("http://i/ipa.iso".into()),
            ..DriverInfoOptions::default()
        };
        let none = DriverInfoOptions::default();
        let half = DriverInfoOptions {
            deploy_kernel: Some("http://i/k".into()),
            ..DriverInfoOptions::default()
        };
        for (flavour, opts, want) in [
            (Flavour::RedfishVirtualMedia, &ramdisk, "agent"),
            (Flavour::RedfishVirtualMedia, &iso, "agent"),
            (Flavour::IdracVirtualMedia, &ramdisk, "agent"),
            (Flavour::RedfishUefiHttp, &ramdisk, "agent"),
            (Flavour::RedfishVirtualMedia, &none, "redfish"),
            (Flavour::RedfishVirtualMedia, &half, "redfish"),
            // iPXE needs a PXE network the supervised Ironic does not run.
            (Flavour::Redfish, &ramdisk, "redfish"),
            (Flavour::Ipmi, &ramdisk, "no-inspect"),
        ] {
            assert_eq!(inspect_interface(flavour, opts), want, "{flavour:?}");
        }
        let h = host("redfish-virtualmedia+https://10.0.0.1:8443/redfish/v1/Systems/abc");
        assert_eq!(create_body(&h, &ramdisk)["inspect_interface"], "agent");
        assert_eq!(create_body(&h, &none)["inspect_interface"], "redfish");
    }

    fn image(
        url: &str,
        format: Option<ImageFormat>,
        checksum: Option<(&str, ChecksumType)>,
    ) -> Deployment {
        Deployment {
            image: Some(Image {
                url: url.into(),
                checksum: checksum.map(|c| c.0.into()),
                checksum_type: checksum.map(|c| c.1),
                format,
                oci_auth_secret_name: None,
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn images_become_instance_info() {
        let rf = host("redfish-virtualmedia+http://10.0.0.1/redfish/v1/Systems/1");
        let live = deploy_spec(
            &rf,
            &image("http://i/live.iso", Some(ImageFormat::LiveIso), None),
        )
        .unwrap();
        assert_eq!(live.deploy_interface, "ramdisk");
        assert_eq!(live.boot_interface, "redfish-virtual-media");
        assert_eq!(live.instance_info["boot_iso"], "http://i/live.iso");
        assert!(instance_matches(&live.instance_info, &live));

        // Plain redfish still boots a live ISO from virtual media.
        let plain = host("redfish://10.0.0.1/redfish/v1/Systems/1");
        let spec = deploy_spec(
            &plain,
            &image("http://i/l.iso", Some(ImageFormat::LiveIso), None),
        )
        .unwrap();
        assert_eq!(spec.boot_interface, "redfish-virtual-media");

        let ipmi = host("ipmi://10.0.0.2");
        let err = deploy_spec(
            &ipmi,
            &image("http://i/l.iso", Some(ImageFormat::LiveIso), None),
        )
        .unwrap_err();
        assert_eq!((err.kind, err.spec_fault), (ErrorKind::Unsupported, None));

        let disk = deploy_spec(
            &rf,
            &image(
                "http://i/d.qcow2",
                Some(ImageFormat::Qcow2),
                Some(("abc", ChecksumType::Sha256)),
            ),
        )
        .unwrap();
        assert_eq!(disk.deploy_interface, "direct");
        assert_eq!(disk.instance_info["image_source"], "http://i/d.qcow2");
        assert_eq!(disk.instance_info["image_os_hash_algo"], "sha256");
        assert_eq!(disk.instance_info["image_os_hash_value"], "abc");
        assert_eq!(disk.instance_info["image_disk_format"], "qcow2");

        let md5 = deploy_spec(
            &rf,
            &image(
                "http://i/d.raw",
                None,
                Some(("http://i/d.md5", ChecksumType::Sha512)),
            ),
        )
        .unwrap();
        assert_eq!(md5.instance_info["image_checksum"], "http://i/d.md5");

        let err = deploy_spec(&rf, &image("http://i/d.raw", None, None)).unwrap_err();
        let fault = Some(SpecFault::ImageChecksumMissing);
        assert_eq!((err.kind, err.spec_fault), (ErrorKind::InvalidInput, fault));

        let custom = Deployment {
            custom_deploy: Some(CustomDeploy {
                method: "install_coreos".into(),
            }),
            ..Deployment::default()
        };
        let spec = deploy_spec(&rf, &custom).unwrap();
        assert_eq!(spec.deploy_interface, "custom-agent");
        assert_eq!(spec.deploy_step.as_deref(), Some("install_coreos"));
    }

    #[test]
    fn configdrive_from_secrets() {
        let h = host("redfish://10.0.0.1/x");
        assert_eq!(configdrive(&h, "u", &Deployment::default()), None);
        let d = Deployment {
            user_data: Some("#cloud-config\n".into()),
            network_data: Some("links: []\n".into()),
            meta_data: Some("{\"role\": \"worker\"}".into()),
            ..Deployment::default()
        };
        let drive = configdrive(&h, "u-1", &d).unwrap();
        assert_eq!(drive["user_data"], "#cloud-config\n");
        let live = Deployment {
            image: Some(Image {
                url: "http://x/live.iso".into(),
                format: Some(ImageFormat::LiveIso),
                ..Default::default()
            }),
            ..d.clone()
        };
        assert_eq!(
            configdrive(&h, "u-1", &live),
            None,
            "no config drive for a live ISO"
        );
        assert_eq!(drive["network_data"], json!({"links": []}));
        assert_eq!(drive["meta_data"]["role"], "worker");
        assert_eq!(drive["meta_data"]["uuid"], "u-1");
        assert_eq!(drive["meta_data"]["metal3-namespace"], "ns");
        assert_eq!(drive["meta_data"]["local-hostname"], "h1");
    }

    #[test]
    fn root_device_hints_in_ironic_words() {
        let hints = RootDeviceHints {
            device_name: Some("/dev/sda".into()),
            min_size_gigabytes: Some(100),
            rotational: Some(false),
            serial_number: Some("S".into()),
            ..RootDeviceHints::default()
        };
        assert_eq!(
            root_device(&hints),
            json!({"name": "/dev/sda", "size": ">= 100", "rotational": false, "serial": "S"})
        );
    }

    #[test]
    fn inventory_becomes_hardware_details() {
        let inventory = json!({
            "cpu": {"count": 8, "architecture": "x86_64", "model_name": "Xeon", "frequency": "2400", "flags": ["vmx"]},
            "memory": {"physical_mb": 32768},
            "interfaces": [
                {"name": "eth0", "mac_address": "52:54:00:00:00:01", "ipv4_address": "192.0.2.1", "speed_mbps": 10000},
                {"name": "eth1", "mac_address": "52:54:00:00:00:02"}
            ],
            "disks": [
                {"name": "/dev/sda", "size": 1000, "rotational": true, "serial": "D1", "model": "M"},
                {"name": "/dev/nvme0n1", "size": 500, "rotational": false}
            ],
            "system_vendor": {"manufacturer": "Acme", "product_name": "R1", "serial_number": "S1"}
        });
        let hw = hardware_details(&inventory, &json!({}), Some("52:54:00:00:00:01")).unwrap();
        let cpu = hw.cpu.unwrap();
        assert_eq!(
            (cpu.count, cpu.arch.as_str(), cpu.clock_megahertz),
            (8, "x86_64", 2400.0)
        );
        assert_eq!(hw.ram_mebibytes, 32768);
        assert!(hw.nics[0].pxe && !hw.nics[1].pxe);
        assert_eq!(hw.nics[0].speed_gbps, 10);
        assert_eq!(hw.storage[0].type_, Some(DiskType::Hdd));
        assert_eq!(hw.storage[1].type_, Some(DiskType::Nvme));
        assert_eq!(
            hw.system_vendor.unwrap().product_name.as_deref(),
            Some("R1")
        );

        // Less than a full inventory is recorded as found (Ironic's defaults), not refused.
        let hw = hardware_details(&json!({}), &json!({"memory_mb": "1024"}), None).unwrap();
        assert_eq!(hw.cpu.unwrap().count, 0);
        assert_eq!(hw.ram_mebibytes, 1024);
        assert!(hw.nics.is_empty() && hw.storage.is_empty());
    }
}
