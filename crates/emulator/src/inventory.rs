//! Redfish documents: service root, collections, systems and their inventory.
//!
//! Inventory varies a little with the system index (CPU model, sockets, DIMMs,
//! NIC speed, drives) so fleets are not trivially identical, yet stays
//! deterministic so tests can predict it.

use serde_json::{Value, json};

use crate::state::{BOOT_ENABLED, BOOT_MODES, BOOT_TARGETS, SystemState};

pub const SERVICE_UUID: &str = "6b1c2f2e-8d0a-4f6e-9a51-f3e7a1c00000";

pub struct Cpu {
    pub model: &'static str,
    pub manufacturer: &'static str,
    pub cores: u32,
    pub threads: u32,
    pub max_mhz: u32,
}

const CPUS: [Cpu; 3] = [
    Cpu {
        model: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
        manufacturer: "Intel(R) Corporation",
        cores: 32,
        threads: 64,
        max_mhz: 3200,
    },
    Cpu {
        model: "AMD EPYC 7543 32-Core Processor",
        manufacturer: "Advanced Micro Devices, Inc.",
        cores: 32,
        threads: 64,
        max_mhz: 3700,
    },
    Cpu {
        model: "Intel(R) Xeon(R) Silver 4314 CPU @ 2.40GHz",
        manufacturer: "Intel(R) Corporation",
        cores: 16,
        threads: 32,
        max_mhz: 3400,
    },
];

pub struct Drive {
    pub model: &'static str,
    pub media: &'static str,
    pub protocol: &'static str,
    pub bytes: u64,
}

const NVME_960: Drive = Drive {
    model: "SAMSUNG MZQL2960HCJR-00A07",
    media: "SSD",
    protocol: "NVMe",
    bytes: 960_197_124_096,
};
const SATA_480: Drive = Drive {
    model: "INTEL SSDSC2KB480G8",
    media: "SSD",
    protocol: "SATA",
    bytes: 480_103_981_056,
};
const SAS_4T: Drive = Drive {
    model: "SEAGATE ST4000NM0295",
    media: "HDD",
    protocol: "SAS",
    bytes: 4_000_787_030_016,
};

/// The deterministic hardware of system `index`.
pub struct Profile {
    pub cpu: &'static Cpu,
    pub sockets: usize,
    pub dimms: usize,
    pub dimm_mib: u64,
    pub nic_mbps: u32,
    pub drives: &'static [Drive],
}

pub fn profile(index: usize) -> Profile {
    const SMALL: &[Drive] = &[NVME_960, NVME_960];
    const MIXED: &[Drive] = &[SATA_480, SAS_4T, SAS_4T];
    let (dimms, dimm_mib) = [(8, 32_768), (16, 16_384), (8, 65_536), (4, 32_768)][index % 4];
    Profile {
        cpu: &CPUS[index % 3],
        sockets: if index % 5 == 4 { 1 } else { 2 },
        dimms,
        dimm_mib,
        nic_mbps: if index.is_multiple_of(2) {
            25_000
        } else {
            10_000
        },
        drives: if index.is_multiple_of(2) {
            SMALL
        } else {
            MIXED
        },
    }
}

pub const NICS: usize = 2;

pub fn uuid(index: usize) -> String {
    format!(
        "8f0e5a3c-1d2b-4c6e-9f00-{:012x}",
        index as u64 & 0xffff_ffff_ffff
    )
}

/// `52:54:0N:HH:MM:LL`: N is the NIC number, the rest the system index, so
/// MACs are unique across up to 16M systems.
pub fn mac(index: usize, nic: usize) -> String {
    format!(
        "52:54:{:02x}:{:02x}:{:02x}:{:02x}",
        nic,
        (index >> 16) & 0xff,
        (index >> 8) & 0xff,
        index & 0xff
    )
}

fn serial(index: usize) -> String {
    format!("FM{index:08}")
}

pub fn odata(id: &str) -> Value {
    json!({ "@odata.id": id })
}

fn collection(odata_type: &str, odata_id: &str, name: &str, members: Vec<String>) -> Value {
    json!({
        "@odata.type": odata_type,
        "@odata.id": odata_id,
        "Name": name,
        "Members@odata.count": members.len(),
        "Members": members.iter().map(|m| odata(m)).collect::<Vec<_>>(),
    })
}

fn to_vec(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a serde_json::Value always serialises")
}

pub fn redfish_version_doc() -> Vec<u8> {
    to_vec(&json!({ "v1": "/redfish/v1/" }))
}

pub fn service_root() -> Vec<u8> {
    to_vec(&json!({
        "@odata.type": "#ServiceRoot.v1_11_0.ServiceRoot",
        "@odata.id": "/redfish/v1",
        "Id": "RootService",
        "Name": "Ferrometal Redfish Emulator",
        "RedfishVersion": "1.11.0",
        "UUID": SERVICE_UUID,
        "Vendor": "Ferrometal",
        "Product": "ferrometal-emulator",
        "Systems": odata("/redfish/v1/Systems"),
        "Managers": odata("/redfish/v1/Managers"),
        "Chassis": odata("/redfish/v1/Chassis"),
        "SessionService": odata("/redfish/v1/SessionService"),
        "UpdateService": odata("/redfish/v1/UpdateService"),
        "EventService": odata("/redfish/v1/EventService"),
        "TaskService": odata("/redfish/v1/TaskService"),
        "Links": { "Sessions": odata("/redfish/v1/SessionService/Sessions") },
        "ProtocolFeaturesSupported": {
            "ExpandQuery": {
                "ExpandAll": true,
                "Levels": true,
                "MaxLevels": MAX_EXPAND_LEVELS,
                "NoLinks": true,
                "Links": false,
            },
            "FilterQuery": false,
            "SelectQuery": false,
            "OnlyMemberQuery": false,
            "ExcludeQuery": false,
        },
    }))
}

/// Deepest `$levels` the service accepts (advertised in the service root).
pub const MAX_EXPAND_LEVELS: usize = 3;

/// What a `$expand` query asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expand {
    /// `*`: the `Links` section is expanded too; `.` leaves it as links.
    pub links: bool,
    pub levels: usize,
}

/// The system with its subordinate collections inline (`$expand`): level 1 inlines the
/// Processors, Memory, EthernetInterfaces and Storage collections, level 2 also their
/// members. A Storage member always comes with its Drives inline, as several BMCs send
/// it, so one request reads the whole inventory.
pub fn system_expanded(
    index: usize,
    s: &SystemState,
    reset_types: &[&str],
    expand: Expand,
) -> Value {
    let mut doc = system(index, s, reset_types);
    let members = expand.levels >= 2;
    let inline = |mut collection: Value, member: &dyn Fn(usize) -> Option<Value>| {
        if members {
            let count = collection["Members"].as_array().map_or(0, Vec::len);
            collection["Members"] = Value::Array((0..count).filter_map(member).collect());
        }
        collection
    };
    doc["Processors"] = inline(processors(index), &|n| processor(index, n));
    doc["Memory"] = inline(memory(index), &|n| dimm(index, n));
    doc["EthernetInterfaces"] = inline(ethernet_interfaces(index), &|n| {
        ethernet_interface(index, n)
    });
    doc["Storage"] = inline(storage_collection(index), &|_| {
        let mut controller = storage(index);
        let drives = (0..profile(index).drives.len())
            .filter_map(|d| drive(index, d))
            .collect();
        controller["Drives"] = Value::Array(drives);
        Some(controller)
    });
    if expand.links {
        doc["Links"]["ManagedBy"] = json!([manager(index, s)]);
    }
    doc
}

pub fn systems_collection(count: usize) -> Vec<u8> {
    to_vec(&collection(
        "#ComputerSystemCollection.ComputerSystemCollection",
        "/redfish/v1/Systems",
        "Computer System Collection",
        (0..count)
            .map(|i| format!("/redfish/v1/Systems/sys-{i}"))
            .collect(),
    ))
}

pub fn managers_collection(count: usize) -> Vec<u8> {
    to_vec(&collection(
        "#ManagerCollection.ManagerCollection",
        "/redfish/v1/Managers",
        "Manager Collection",
        (0..count)
            .map(|i| format!("/redfish/v1/Managers/bmc-sys-{i}"))
            .collect(),
    ))
}

pub fn system(index: usize, s: &SystemState, reset_types: &[&str]) -> Value {
    let base = format!("/redfish/v1/Systems/sys-{index}");
    let p = profile(index);
    let memory_gib = p.dimms as u64 * p.dimm_mib / 1024;
    json!({
        "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
        "@odata.id": base,
        "Id": format!("sys-{index}"),
        "Name": format!("sys-{index}"),
        "SystemType": "Physical",
        "UUID": uuid(index),
        "Manufacturer": "Ferrometal",
        "Model": if p.sockets == 1 { "Emulated 1U Server" } else { "Emulated 2U Server" },
        "SerialNumber": serial(index),
        "BiosVersion": s.bios_version,
        "SKU": format!("FM-SKU-{}", index % 3),
        "HostName": "",
        "PowerState": s.power.as_str(),
        "Status": { "State": "Enabled", "Health": "OK" },
        "Boot": {
            "BootSourceOverrideTarget": s.boot_target,
            "BootSourceOverrideEnabled": s.boot_enabled,
            "BootSourceOverrideMode": s.boot_mode,
            "BootSourceOverrideTarget@Redfish.AllowableValues": BOOT_TARGETS,
            "BootSourceOverrideEnabled@Redfish.AllowableValues": BOOT_ENABLED,
            "BootSourceOverrideMode@Redfish.AllowableValues": BOOT_MODES,
        },
        "ProcessorSummary": {
            "Count": p.sockets,
            "CoreCount": p.sockets as u32 * p.cpu.cores,
            "LogicalProcessorCount": p.sockets as u32 * p.cpu.threads,
            "Model": p.cpu.model,
            "Status": { "State": "Enabled", "Health": "OK" },
        },
        "MemorySummary": {
            "TotalSystemMemoryGiB": memory_gib,
            "Status": { "State": "Enabled", "Health": "OK" },
        },
        "Processors": odata(&format!("{base}/Processors")),
        "Memory": odata(&format!("{base}/Memory")),
        "EthernetInterfaces": odata(&format!("{base}/EthernetInterfaces")),
        "Storage": odata(&format!("{base}/Storage")),
        "Bios": odata(&format!("{base}/Bios")),
        "Links": {
            "ManagedBy": [odata(&format!("/redfish/v1/Managers/bmc-sys-{index}"))],
            "Chassis": [odata(&format!("/redfish/v1/Chassis/chassis-sys-{index}"))],
        },
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": format!("{base}/Actions/ComputerSystem.Reset"),
                "ResetType@Redfish.AllowableValues": reset_types,
            }
        },
    })
}

/// [`system`] rendered straight to JSON text, without building a `Value`
/// tree: this is the benchmarks' hot path. Every interpolated string but the
/// BIOS version comes from a fixed list or a number, so none needs escaping. `reset_types_json`
/// is the allowable reset types, already rendered as a JSON array.
pub fn system_json(index: usize, s: &SystemState, reset_types_json: &str) -> Vec<u8> {
    use std::fmt::Write as _;
    let p = profile(index);
    let memory_gib = p.dimms as u64 * p.dimm_mib / 1024;
    let base = SystemBase(index);
    let mut out = String::with_capacity(1800);
    let _ = write!(
        out,
        concat!(
            r##"{{"@odata.type":"#ComputerSystem.v1_20_0.ComputerSystem","@odata.id":"{base}","##,
            r#""Id":"sys-{index}","Name":"sys-{index}","SystemType":"Physical","UUID":"{uuid}","#,
            r#""Manufacturer":"Ferrometal","Model":"{model}","SerialNumber":"FM{index:08}","#,
            r#""BiosVersion":{bios_version},"#,
            r#""SKU":"FM-SKU-{sku}","HostName":"","PowerState":"{power}","#,
            r#""Status":{{"State":"Enabled","Health":"OK"}},"#,
            r#""Boot":{{"BootSourceOverrideTarget":"{target}","BootSourceOverrideEnabled":"{enabled}","#,
            r#""BootSourceOverrideMode":"{mode}","#,
            r#""BootSourceOverrideTarget@Redfish.AllowableValues":{targets},"#,
            r#""BootSourceOverrideEnabled@Redfish.AllowableValues":{enableds},"#,
            r#""BootSourceOverrideMode@Redfish.AllowableValues":{modes}}},"#,
            r#""ProcessorSummary":{{"Count":{sockets},"CoreCount":{cores},"LogicalProcessorCount":{threads},"#,
            r#""Model":"{cpu}","Status":{{"State":"Enabled","Health":"OK"}}}},"#,
            r#""MemorySummary":{{"TotalSystemMemoryGiB":{memory_gib},"Status":{{"State":"Enabled","Health":"OK"}}}},"#,
            r#""Processors":{{"@odata.id":"{base}/Processors"}},"Memory":{{"@odata.id":"{base}/Memory"}},"#,
            r#""EthernetInterfaces":{{"@odata.id":"{base}/EthernetInterfaces"}},"#,
            r#""Storage":{{"@odata.id":"{base}/Storage"}},"Bios":{{"@odata.id":"{base}/Bios"}},"#,
            r#""Links":{{"ManagedBy":[{{"@odata.id":"/redfish/v1/Managers/bmc-sys-{index}"}}],"#,
            r#""Chassis":[{{"@odata.id":"/redfish/v1/Chassis/chassis-sys-{index}"}}]}},"#,
            r##""Actions":{{"#ComputerSystem.Reset":{{"target":"{base}/Actions/ComputerSystem.Reset","##,
            r#""ResetType@Redfish.AllowableValues":{resets}}}}}}}"#,
        ),
        base = base,
        index = index,
        // An update's version comes from an image's file name: the one string escaped.
        bios_version = Value::String(s.bios_version.clone()),
        uuid = Uuid(index),
        model = if p.sockets == 1 {
            "Emulated 1U Server"
        } else {
            "Emulated 2U Server"
        },
        sku = index % 3,
        power = s.power.as_str(),
        target = s.boot_target,
        enabled = s.boot_enabled,
        mode = s.boot_mode,
        targets = BOOT_TARGETS_JSON,
        enableds = BOOT_ENABLED_JSON,
        modes = BOOT_MODES_JSON,
        sockets = p.sockets,
        cores = p.sockets as u32 * p.cpu.cores,
        threads = p.sockets as u32 * p.cpu.threads,
        cpu = p.cpu.model,
        memory_gib = memory_gib,
        resets = reset_types_json,
    );
    out.into_bytes()
}

const BOOT_TARGETS_JSON: &str = r#"["None","Pxe","Hdd","Cd","BiosSetup","UefiHttp"]"#;
const BOOT_ENABLED_JSON: &str = r#"["Disabled","Once","Continuous"]"#;
const BOOT_MODES_JSON: &str = r#"["UEFI","Legacy"]"#;

/// Formats as `/redfish/v1/Systems/sys-N` without an intermediate `String`.
pub struct SystemBase(pub usize);

impl std::fmt::Display for SystemBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "/redfish/v1/Systems/sys-{}", self.0)
    }
}

/// Formats as [`uuid`] does, without an intermediate `String`.
struct Uuid(usize);

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "8f0e5a3c-1d2b-4c6e-9f00-{:012x}",
            self.0 as u64 & 0xffff_ffff_ffff
        )
    }
}

pub fn processors(index: usize) -> Value {
    let base = format!("/redfish/v1/Systems/sys-{index}/Processors");
    collection(
        "#ProcessorCollection.ProcessorCollection",
        &base,
        "Processors Collection",
        (0..profile(index).sockets)
            .map(|n| format!("{base}/CPU{n}"))
            .collect(),
    )
}

pub fn processor(index: usize, n: usize) -> Option<Value> {
    let p = profile(index);
    (n < p.sockets).then(|| {
        json!({
            "@odata.type": "#Processor.v1_16_0.Processor",
            "@odata.id": format!("/redfish/v1/Systems/sys-{index}/Processors/CPU{n}"),
            "Id": format!("CPU{n}"),
            "Name": format!("Processor {n}"),
            "Socket": format!("CPU{n}"),
            "ProcessorType": "CPU",
            "ProcessorArchitecture": "x86",
            "InstructionSet": "x86-64",
            "Manufacturer": p.cpu.manufacturer,
            "Model": p.cpu.model,
            "MaxSpeedMHz": p.cpu.max_mhz,
            "TotalCores": p.cpu.cores,
            "TotalThreads": p.cpu.threads,
            "Status": { "State": "Enabled", "Health": "OK" },
        })
    })
}

pub fn memory(index: usize) -> Value {
    let base = format!("/redfish/v1/Systems/sys-{index}/Memory");
    collection(
        "#MemoryCollection.MemoryCollection",
        &base,
        "Memory Module Collection",
        (0..profile(index).dimms)
            .map(|n| format!("{base}/DIMM{n}"))
            .collect(),
    )
}

pub fn dimm(index: usize, n: usize) -> Option<Value> {
    let p = profile(index);
    (n < p.dimms).then(|| {
        json!({
            "@odata.type": "#Memory.v1_17_0.Memory",
            "@odata.id": format!("/redfish/v1/Systems/sys-{index}/Memory/DIMM{n}"),
            "Id": format!("DIMM{n}"),
            "Name": format!("DIMM {n}"),
            "MemoryType": "DRAM",
            "MemoryDeviceType": "DDR4",
            "CapacityMiB": p.dimm_mib,
            "OperatingSpeedMhz": 3200,
            "Manufacturer": "Samsung",
            "PartNumber": "M393A4K40DB3-CWE",
            "SerialNumber": format!("FMM{index:07}{n:02}"),
            "DeviceLocator": format!("DIMM_{n}"),
            "Status": { "State": "Enabled", "Health": "OK" },
        })
    })
}

pub fn ethernet_interfaces(index: usize) -> Value {
    let base = format!("/redfish/v1/Systems/sys-{index}/EthernetInterfaces");
    collection(
        "#EthernetInterfaceCollection.EthernetInterfaceCollection",
        &base,
        "Ethernet Interface Collection",
        (0..NICS).map(|n| format!("{base}/NIC{n}")).collect(),
    )
}

pub fn ethernet_interface(index: usize, n: usize) -> Option<Value> {
    let p = profile(index);
    // The second port is unplugged on every third system.
    let link = if n == 1 && index.is_multiple_of(3) {
        "LinkDown"
    } else {
        "LinkUp"
    };
    (n < NICS).then(|| {
        json!({
            "@odata.type": "#EthernetInterface.v1_9_0.EthernetInterface",
            "@odata.id": format!("/redfish/v1/Systems/sys-{index}/EthernetInterfaces/NIC{n}"),
            "Id": format!("NIC{n}"),
            "Name": format!("Ethernet Interface {n}"),
            "MACAddress": mac(index, n),
            "PermanentMACAddress": mac(index, n),
            "SpeedMbps": p.nic_mbps,
            "FullDuplex": true,
            "LinkStatus": link,
            "InterfaceEnabled": true,
            "Status": { "State": "Enabled", "Health": "OK" },
        })
    })
}

pub fn storage_collection(index: usize) -> Value {
    let base = format!("/redfish/v1/Systems/sys-{index}/Storage");
    collection(
        "#StorageCollection.StorageCollection",
        &base,
        "Storage Collection",
        vec![format!("{base}/1")],
    )
}

pub fn storage(index: usize) -> Value {
    let base = format!("/redfish/v1/Systems/sys-{index}/Storage/1");
    let drives: Vec<Value> = (0..profile(index).drives.len())
        .map(|d| odata(&format!("{base}/Drives/Disk{d}")))
        .collect();
    json!({
        "@odata.type": "#Storage.v1_13_0.Storage",
        "@odata.id": base,
        "Id": "1",
        "Name": "Storage Controller 1",
        "Drives@odata.count": drives.len(),
        "Drives": drives,
        "Volumes": odata(&format!("{base}/Volumes")),
        "Status": { "State": "Enabled", "Health": "OK" },
    })
}

pub fn drive(index: usize, d: usize) -> Option<Value> {
    let drive = profile(index).drives.get(d)?;
    Some(json!({
        "@odata.type": "#Drive.v1_15_0.Drive",
        "@odata.id": format!("/redfish/v1/Systems/sys-{index}/Storage/1/Drives/Disk{d}"),
        "Id": format!("Disk{d}"),
        "Name": format!("Disk {d}"),
        "CapacityBytes": drive.bytes,
        "MediaType": drive.media,
        "Protocol": drive.protocol,
        "Model": drive.model,
        "SerialNumber": format!("FMD{index:07}{d}"),
        "Status": { "State": "Enabled", "Health": "OK" },
    }))
}

pub fn manager(index: usize, s: &SystemState) -> Value {
    let base = format!("/redfish/v1/Managers/bmc-sys-{index}");
    json!({
        "@odata.type": "#Manager.v1_10_0.Manager",
        "@odata.id": base,
        "Id": format!("bmc-sys-{index}"),
        "Name": format!("BMC of sys-{index}"),
        "ManagerType": "BMC",
        "FirmwareVersion": s.bmc_version,
        "PowerState": "On",
        "Status": { "State": "Enabled", "Health": "OK" },
        "VirtualMedia": odata(&format!("{base}/VirtualMedia")),
        "Links": {
            "ManagerForServers": [odata(&format!("/redfish/v1/Systems/sys-{index}"))],
        },
    })
}

pub fn virtual_media_collection(index: usize) -> Value {
    let base = format!("/redfish/v1/Managers/bmc-sys-{index}/VirtualMedia");
    collection(
        "#VirtualMediaCollection.VirtualMediaCollection",
        &base,
        "Virtual Media Services",
        vec![format!("{base}/Cd")],
    )
}

pub fn virtual_cd(index: usize, s: &SystemState) -> Value {
    let base = format!("/redfish/v1/Managers/bmc-sys-{index}/VirtualMedia/Cd");
    let image_name = s
        .vm_image
        .as_deref()
        .map(|url| url.rsplit('/').next().unwrap_or(url).to_owned());
    json!({
        "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia",
        "@odata.id": base,
        "Id": "Cd",
        "Name": "Virtual CD",
        "MediaTypes": ["CD", "DVD"],
        "Image": s.vm_image,
        "ImageName": image_name,
        "Inserted": s.vm_inserted,
        "WriteProtected": s.vm_write_protected,
        "ConnectedVia": if s.vm_inserted { "URI" } else { "NotConnected" },
        "TransferProtocolType": if s.vm_inserted { Value::from("HTTP") } else { Value::Null },
        "Actions": {
            "#VirtualMedia.InsertMedia": {
                "target": format!("{base}/Actions/VirtualMedia.InsertMedia"),
            },
            "#VirtualMedia.EjectMedia": {
                "target": format!("{base}/Actions/VirtualMedia.EjectMedia"),
            },
        },
    })
}

pub fn session_service() -> Value {
    json!({
        "@odata.type": "#SessionService.v1_1_8.SessionService",
        "@odata.id": "/redfish/v1/SessionService",
        "Id": "SessionService",
        "Name": "Session Service",
        "ServiceEnabled": true,
        "SessionTimeout": 1800,
        "Sessions": odata("/redfish/v1/SessionService/Sessions"),
    })
}

pub fn sessions_collection(ids: &[u64]) -> Value {
    collection(
        "#SessionCollection.SessionCollection",
        "/redfish/v1/SessionService/Sessions",
        "Session Collection",
        ids.iter()
            .map(|id| format!("/redfish/v1/SessionService/Sessions/{id}"))
            .collect(),
    )
}

pub fn session(id: u64, username: &str) -> Value {
    json!({
        "@odata.type": "#Session.v1_3_0.Session",
        "@odata.id": format!("/redfish/v1/SessionService/Sessions/{id}"),
        "Id": id.to_string(),
        "Name": "User Session",
        "UserName": username,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{PowerState, SystemCell};

    #[test]
    fn fast_system_rendering_matches_the_value_tree() {
        let resets = ["On", "ForceOff", "Nmi"];
        let resets_json = serde_json::to_string(&resets).unwrap();
        assert_eq!(
            BOOT_TARGETS_JSON,
            serde_json::to_string(BOOT_TARGETS).unwrap()
        );
        assert_eq!(
            BOOT_ENABLED_JSON,
            serde_json::to_string(BOOT_ENABLED).unwrap()
        );
        assert_eq!(BOOT_MODES_JSON, serde_json::to_string(BOOT_MODES).unwrap());
        let now = std::time::Instant::now();
        for index in [0, 1, 2, 3, 4, 5, 12_345] {
            let cell = SystemCell::new(PowerState::Off);
            let mut s = cell.lock(now);
            for step in 0..2 {
                let fast: Value = serde_json::from_slice(&system_json(index, &s, &resets_json))
                    .expect("valid JSON");
                assert_eq!(fast, system(index, &s, &resets), "sys-{index} step {step}");
                s.boot_target = "Pxe";
                s.boot_enabled = "Once";
                s.reset("On", std::time::Duration::ZERO, now);
            }
        }
    }
}
