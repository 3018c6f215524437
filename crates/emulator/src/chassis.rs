//! Each system's chassis and the network adapter in it, as Redfish models a NIC's hardware:
//! `/redfish/v1/Chassis/chassis-sys-N/NetworkAdapters/NIC.Slot.1`, one adapter whose
//! controller reports its `FirmwarePackageVersion` (the version Ironic's redfish firmware
//! interface reads as component `nic:NIC.Slot.1`) and whose ports are the system's NICs.
//! The adapter is also a `SimpleUpdate` target.

use serde_json::{Value, json};

use crate::inventory::{NICS, odata};
use crate::state::SystemState;

/// The one network adapter every emulated system has.
pub const ADAPTER: &str = "NIC.Slot.1";

pub fn chassis_path(index: usize) -> String {
    format!("/redfish/v1/Chassis/chassis-sys-{index}")
}

pub fn adapter_path(index: usize) -> String {
    format!("{}/NetworkAdapters/{ADAPTER}", chassis_path(index))
}

pub fn collection(count: usize) -> Value {
    let members: Vec<Value> = (0..count).map(|i| odata(&chassis_path(i))).collect();
    json!({
        "@odata.type": "#ChassisCollection.ChassisCollection",
        "@odata.id": "/redfish/v1/Chassis",
        "Name": "Chassis Collection",
        "Members@odata.count": members.len(),
        "Members": members,
    })
}

pub fn chassis(index: usize) -> Value {
    let base = chassis_path(index);
    json!({
        "@odata.type": "#Chassis.v1_14_0.Chassis",
        "@odata.id": base,
        "Id": format!("chassis-sys-{index}"),
        "Name": format!("Chassis of sys-{index}"),
        "ChassisType": "RackMount",
        "Status": { "State": "Enabled", "Health": "OK" },
        "NetworkAdapters": odata(&format!("{base}/NetworkAdapters")),
        "Links": {
            "ComputerSystems": [odata(&format!("/redfish/v1/Systems/sys-{index}"))],
            "ManagedBy": [odata(&format!("/redfish/v1/Managers/bmc-sys-{index}"))],
        },
    })
}

pub fn adapters(index: usize) -> Value {
    json!({
        "@odata.type": "#NetworkAdapterCollection.NetworkAdapterCollection",
        "@odata.id": format!("{}/NetworkAdapters", chassis_path(index)),
        "Name": "Network Adapter Collection",
        "Members@odata.count": 1,
        "Members": [odata(&adapter_path(index))],
    })
}

pub fn adapter(index: usize, s: &SystemState) -> Value {
    let ports: Vec<Value> = (0..NICS)
        .map(|n| {
            odata(&format!(
                "/redfish/v1/Systems/sys-{index}/EthernetInterfaces/NIC{n}"
            ))
        })
        .collect();
    json!({
        "@odata.type": "#NetworkAdapter.v1_9_0.NetworkAdapter",
        "@odata.id": adapter_path(index),
        "Id": ADAPTER,
        "Name": "Emulated 2-port Ethernet adapter",
        "Manufacturer": "Ferrometal",
        "Model": "FM-2P-25G",
        "Status": { "State": "Enabled", "Health": "OK" },
        "Controllers": [{
            "FirmwarePackageVersion": s.nic_version,
            "ControllerCapabilities": { "NetworkPortCount": NICS },
            "Links": { "EthernetInterfaces": ports },
        }],
    })
}

/// What a path under `/redfish/v1/Chassis/chassis-sys-N` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChassisRoute {
    Chassis,
    Adapters,
    Adapter,
}

pub fn route(tail: &[&str]) -> Option<ChassisRoute> {
    Some(match tail {
        [] => ChassisRoute::Chassis,
        ["NetworkAdapters"] => ChassisRoute::Adapters,
        ["NetworkAdapters", a] if *a == ADAPTER => ChassisRoute::Adapter,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{PowerState, SystemCell};

    #[test]
    fn the_adapter_reports_the_systems_nic_firmware_and_its_ports() {
        let cell = SystemCell::new(PowerState::Off);
        let mut s = cell.lock(std::time::Instant::now());
        s.nic_version = "nic-22.5".into();
        let doc = adapter(3, &s);
        assert_eq!(doc["Id"], ADAPTER);
        assert_eq!(doc["Controllers"][0]["FirmwarePackageVersion"], "nic-22.5");
        assert_eq!(
            doc["Controllers"][0]["Links"]["EthernetInterfaces"][1]["@odata.id"],
            "/redfish/v1/Systems/sys-3/EthernetInterfaces/NIC1"
        );
        assert_eq!(adapters(3)["Members"][0]["@odata.id"], adapter_path(3));
        assert_eq!(
            route(&["NetworkAdapters", ADAPTER]),
            Some(ChassisRoute::Adapter)
        );
        assert_eq!(route(&["NetworkAdapters", "NIC.Slot.2"]), None);
    }
}
