//! The ironic backend's IPMI driver against OpenIPMI's ipmi_sim: registration and power on/off
//! through a real Ironic, observed in the simulator's chassis files.

use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{AutomatedCleaningMode, Image, ImageFormat, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials, PowerState};
use ferrometal_provisioner::ironic::{IronicOptions, IronicProvisioner};
use ferrometal_provisioner::{Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner};
use ferrometal_test_support::done;
use ferrometal_test_support::ironic::Ironic;
use ferrometal_test_support::peers::IpmiSim;

/// A host behind ipmi_sim's BMC at `address`, inspection and cleaning off.
fn ipmi_host(key: &str, address: &str, mac: &str) -> HostInfo {
    HostInfo {
        key: key.into(),
        provisioner_id: String::new(),
        bmc: BmcAddress::parse(address).unwrap(),
        credentials: Credentials::new("admin", "password"),
        disable_certificate_verification: false,
        boot_mac_address: Some(mac.into()),
        boot_mode: None,
        inspection_mode: InspectionMode::Fast,
        root_device_hints: None,
        automated_cleaning_mode: AutomatedCleaningMode::Disabled,
        disable_power_off: false,
        preprovisioning_network_data: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmi_register_and_power_through_ironic() {
    let sim = IpmiSim::start();
    let ironic = Ironic::start();
    let mut o = IronicOptions::new(ironic.endpoint());
    o.poll_interval = Duration::from_millis(200);
    let p = IronicProvisioner::new(o);
    let h = ipmi_host("ns~ipmi", &sim.address(), "52:54:00:aa:bb:cc");

    let reg = done!("register", p.register(&h, false));
    assert_eq!(reg.power, PowerState::Off);
    let node = ironic.node("ns~ipmi").unwrap();
    assert_eq!(node["driver"], "ipmi");
    assert_eq!(node["provision_state"], "manageable");
    assert_eq!(node["driver_info"]["ipmi_password"], "******");
    // IPMI has no out-of-band inventory: the host goes on uninspected.
    assert_eq!(done!("inspect", p.inspect(&h, false)), None);

    done!("power on", p.power_on(&h));
    assert_eq!(sim.chassis("power"), "1");
    assert_eq!(p.power_state(&h).await.unwrap(), PowerState::On);
    done!("power off", p.power_off(&h, PowerOffMode::Hard));
    assert_eq!(sim.chassis("power"), "0");
    assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);

    done!("pxe once", p.operation(&h, Operation::PxeOnce));
    assert_eq!(sim.chassis("boot"), "pxe");

    // A live ISO needs virtual media, which IPMI lacks.
    let iso = Deployment {
        image: Some(Image {
            url: "http://127.0.0.1:9/live.iso".into(),
            checksum: None,
            checksum_type: None,
            format: Some(ImageFormat::LiveIso),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    };
    let err = p.provision(&h, &iso).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);

    done!("delete", p.delete(&h));
    assert!(ironic.node("ns~ipmi").is_none());
}

/// metal3's `libvirt://` (VirtualBMC) host: Ironic's ipmi driver at the address's
/// `privilegelevel`, which Ironic's ipmitool asks the BMC for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libvirt_addresses_register_as_ipmi_at_their_privilege_level() {
    let sim = IpmiSim::start();
    let ironic = Ironic::start();
    let mut o = IronicOptions::new(ironic.endpoint());
    o.poll_interval = Duration::from_millis(200);
    let p = IronicProvisioner::new(o);
    let port = sim.address().rsplit_once(':').unwrap().1.to_string();
    let h = ipmi_host(
        "ns~vbmc",
        &format!("libvirt://127.0.0.1:{port}/?privilegelevel=OPERATOR"),
        "52:54:00:aa:bb:cd",
    );
    done!("register", p.register(&h, false));
    let node = ironic.node("ns~vbmc").unwrap();
    assert_eq!(node["driver"], "ipmi");
    assert_eq!(node["driver_info"]["ipmi_priv_level"], "OPERATOR");
    done!("power on", p.power_on(&h));
    assert_eq!(sim.chassis("power"), "1");
    done!("delete", p.delete(&h));
}
