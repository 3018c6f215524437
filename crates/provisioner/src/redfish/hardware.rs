//! Inspection: the BMC's out-of-band inventory becomes `status.hardware`.

use ferrometal_api::{
    CpuDetails, DiskType, HardwareDetails, HardwareSystemVendor, NicDetails, StorageDetails,
};
use ferrometal_bmc::Inventory;

/// Turns an out-of-band inventory into `status.hardware`. What the BMC does not report stays
/// empty (a CPU count of 0, no NICs), as Ironic records it: the controller names the gaps in
/// a condition and the host goes on, since neither backend needs them to deploy.
pub fn hardware_details(inv: &Inventory, boot_mac: Option<&str>) -> HardwareDetails {
    let unknown = ferrometal_bmc::Cpu::default();
    let first = inv.cpus.first().unwrap_or(&unknown);
    let cpu = CpuDetails {
        arch: cpu_arch(&first.architecture),
        model: first.model.clone(),
        clock_megahertz: inv.cpus.iter().map(|c| c.speed_mhz).max().unwrap_or(0) as f64,
        flags: Vec::new(),
        // metal3 counts logical CPUs: threads, else cores, else one per socket.
        count: inv
            .cpus
            .iter()
            .map(|c| {
                if c.threads > 0 {
                    i64::from(c.threads)
                } else {
                    i64::from(c.cores.max(1))
                }
            })
            .sum(),
    };
    let boot_mac = boot_mac.map(str::to_ascii_lowercase);
    let nics = inv
        .nics
        .iter()
        .map(|n| NicDetails {
            name: n.name.clone(),
            model: None,
            mac: n.mac.clone(),
            ip: None,
            speed_gbps: (n.speed_mbps / 1000) as i64,
            pxe: boot_mac
                .as_deref()
                .is_some_and(|b| b == n.mac.to_ascii_lowercase()),
            ..NicDetails::default()
        })
        .collect();
    let storage = inv
        .disks
        .iter()
        .map(|d| {
            let kind = if d.protocol.eq_ignore_ascii_case("nvme") {
                Some(DiskType::Nvme)
            } else if d.media_type.eq_ignore_ascii_case("ssd") {
                Some(DiskType::Ssd)
            } else if d.media_type.eq_ignore_ascii_case("hdd") {
                Some(DiskType::Hdd)
            } else {
                None
            };
            let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
            StorageDetails {
                name: d.name.clone(),
                rotational: kind == Some(DiskType::Hdd),
                type_: kind,
                size_bytes: i64::try_from(d.size_bytes).unwrap_or(i64::MAX),
                // The BMC client reports no drive manufacturer.
                vendor: None,
                model: text(&d.model),
                serial_number: text(&d.serial_number),
                ..StorageDetails::default()
            }
        })
        .collect();
    let id = &inv.identity;
    HardwareDetails {
        system_vendor: Some(HardwareSystemVendor {
            manufacturer: id.manufacturer.clone(),
            product_name: id.model.clone(),
            serial_number: id.serial_number.clone(),
        }),
        firmware: None,
        ram_mebibytes: i64::try_from(inv.total_memory_mib()).unwrap_or(i64::MAX),
        nics,
        storage,
        cpu: Some(cpu),
        hostname: None,
    }
}

/// Redfish `ProcessorArchitecture`/`InstructionSet` to the names inspection agents report.
fn cpu_arch(redfish: &str) -> String {
    match redfish.to_ascii_lowercase().as_str() {
        "x86" | "x86-64" | "x86_64" => "x86_64".into(),
        "arm" | "arm-a64" | "aarch64" => "aarch64".into(),
        "arm-a32" => "arm".into(),
        "ia-64" => "ia64".into(),
        "power" | "powerisa" => "ppc64le".into(),
        "mips" | "mips64" => "mips64".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_bmc::{Cpu, Disk, MemoryModule, Nic, SystemIdentity};

    fn inventory() -> Inventory {
        Inventory {
            identity: SystemIdentity {
                uuid: Some("u".into()),
                manufacturer: Some("Acme".into()),
                model: Some("R1".into()),
                serial_number: Some("S1".into()),
            },
            cpus: vec![
                Cpu {
                    model: "Xeon".into(),
                    architecture: "x86".into(),
                    cores: 16,
                    threads: 32,
                    speed_mhz: 3000,
                },
                Cpu {
                    model: "Xeon".into(),
                    architecture: "x86".into(),
                    cores: 16,
                    threads: 0,
                    speed_mhz: 3200,
                },
            ],
            memory: vec![
                MemoryModule {
                    capacity_mib: 16384,
                    ..MemoryModule::default()
                };
                4
            ],
            nics: vec![
                Nic {
                    name: "NIC0".into(),
                    mac: "52:54:00:00:00:01".into(),
                    speed_mbps: 25_000,
                    link_up: Some(true),
                },
                Nic {
                    name: "NIC1".into(),
                    mac: "52:54:00:00:00:02".into(),
                    speed_mbps: 10_000,
                    link_up: None,
                },
            ],
            disks: vec![
                Disk {
                    name: "Disk0".into(),
                    size_bytes: 960,
                    media_type: "SSD".into(),
                    model: "NV".into(),
                    serial_number: "D0".into(),
                    protocol: "NVMe".into(),
                },
                Disk {
                    name: "Disk1".into(),
                    size_bytes: 4000,
                    media_type: "HDD".into(),
                    model: String::new(),
                    serial_number: "D1".into(),
                    protocol: "SAS".into(),
                },
                Disk {
                    name: "Disk2".into(),
                    size_bytes: 480,
                    media_type: "SSD".into(),
                    protocol: "SATA".into(),
                    ..Disk::default()
                },
            ],
            memory_summary_mib: None,
            warnings: vec![],
        }
    }

    #[test]
    fn inventory_becomes_hardware_details() {
        let hw = hardware_details(
            &inventory(),
            Some("52:54:00:00:00:02".to_uppercase().as_str()),
        );
        let cpu = hw.cpu.unwrap();
        assert_eq!(cpu.arch, "x86_64");
        assert_eq!(cpu.model, "Xeon");
        assert_eq!(cpu.count, 32 + 16);
        assert_eq!(cpu.clock_megahertz, 3200.0);
        assert_eq!(hw.ram_mebibytes, 65536);
        assert_eq!(hw.nics.len(), 2);
        assert_eq!((hw.nics[0].speed_gbps, hw.nics[0].pxe), (25, false));
        assert_eq!((hw.nics[1].speed_gbps, hw.nics[1].pxe), (10, true));
        let kinds: Vec<_> = hw
            .storage
            .iter()
            .map(|s| (s.type_.unwrap(), s.rotational))
            .collect();
        assert_eq!(
            kinds,
            [
                (DiskType::Nvme, false),
                (DiskType::Hdd, true),
                (DiskType::Ssd, false)
            ]
        );
        assert_eq!(hw.storage[1].model, None);
        assert_eq!(hw.storage[0].serial_number.as_deref(), Some("D0"));
        let vendor = hw.system_vendor.unwrap();
        assert_eq!(vendor.manufacturer.as_deref(), Some("Acme"));
        assert_eq!(vendor.product_name.as_deref(), Some("R1"));
        assert_eq!(vendor.serial_number.as_deref(), Some("S1"));
    }

    #[test]
    fn missing_cpus_or_nics_are_recorded_empty() {
        let mut inv = inventory();
        inv.cpus.clear();
        inv.nics.clear();
        inv.warnings = vec!["processors: the BMC reports none".into()];
        let hw = hardware_details(&inv, None);
        let cpu = hw.cpu.unwrap();
        assert_eq!((cpu.count, cpu.arch.as_str()), (0, ""));
        assert!(hw.nics.is_empty());
        // What the BMC did report is kept.
        assert_eq!(hw.ram_mebibytes, 65536);
        assert_eq!(hw.storage.len(), 3);
    }

    #[test]
    fn ram_comes_from_the_summary_when_no_module_is_listed() {
        let mut inv = inventory();
        inv.memory.clear();
        inv.memory_summary_mib = Some(2048);
        assert_eq!(hardware_details(&inv, None).ram_mebibytes, 2048);
        // Modules, when listed, win over the summary.
        let mut inv = inventory();
        inv.memory_summary_mib = Some(1024);
        assert_eq!(hardware_details(&inv, None).ram_mebibytes, 65536);
        inv.memory.clear();
        inv.memory_summary_mib = None;
        assert_eq!(hardware_details(&inv, None).ram_mebibytes, 0);
    }
}
