//! The redfish backend's handling of IPMI hosts, against OpenIPMI's ipmi_sim: power and boot
//! management work, image provisioning is refused with a clear error.

use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{AutomatedCleaningMode, Image, ImageFormat, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials, PowerState};
use ferrometal_provisioner::redfish::{RedfishOptions, RedfishProvisioner};
use ferrometal_provisioner::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, ProvisionerError, Step,
};
use ferrometal_test_support::peers::IpmiSim;

fn host(sim: &IpmiSim, password: &str) -> HostInfo {
    HostInfo {
        key: "ns~ipmi".into(),
        provisioner_id: String::new(),
        bmc: BmcAddress::parse(&sim.address()).unwrap(),
        credentials: Credentials::new("admin", password),
        disable_certificate_verification: false,
        boot_mac_address: None,
        boot_mode: None,
        inspection_mode: InspectionMode::Fast,
        root_device_hints: None,
        automated_cleaning_mode: AutomatedCleaningMode::Disabled,
        disable_power_off: false,
        preprovisioning_network_data: None,
    }
}

async fn until_done<F, Fut>(what: &str, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Step, ProvisionerError>>,
{
    for _ in 0..100 {
        match step().await {
            Ok(Step::Done(())) => return,
            Ok(Step::Waiting { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("{what}: {e} ({:?})", e.kind),
        }
    }
    panic!("{what}: never Done");
}

#[tokio::test]
async fn ipmi_hosts_get_power_and_boot_management_but_no_images() {
    let sim = IpmiSim::start();
    let p = RedfishProvisioner::new(RedfishOptions {
        poll_interval: Duration::from_millis(50),
        ..RedfishOptions::default()
    });
    let h = host(&sim, "password");

    let Step::Done(reg) = p.register(&h, false).await.unwrap() else {
        panic!("register is immediate")
    };
    assert_eq!(reg.provisioner_id, "ns~ipmi");
    assert_eq!(reg.power, PowerState::Off);
    let err = p.register(&host(&sim, "nope"), true).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Credentials, "{err}");

    // No out-of-band inventory over IPMI: the host goes on uninspected.
    assert_eq!(p.inspect(&h, false).await.unwrap(), Step::Done(None));

    until_done("power on", || p.power_on(&h)).await;
    assert_eq!(sim.chassis("power"), "1");
    until_done("power off", || p.power_off(&h, PowerOffMode::Hard)).await;
    assert_eq!(sim.chassis("power"), "0");
    assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);
    assert_eq!(
        p.operation(&h, Operation::PxeOnce).await.unwrap(),
        Step::Done(())
    );
    assert_eq!(sim.chassis("boot"), "pxe");
    assert_eq!(
        p.operation(&h, Operation::ForceOn).await.unwrap(),
        Step::Done(())
    );
    assert_eq!(sim.chassis("power"), "1");

    let deployment = Deployment {
        image: Some(Image {
            url: "http://127.0.0.1:1/live.iso".into(),
            checksum: None,
            checksum_type: None,
            format: Some(ImageFormat::LiveIso),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    };
    let err = p.provision(&h, &deployment).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(err.message.contains("IPMI"), "{err}");
    assert_eq!(sim.chassis("power"), "1", "nothing was touched");

    // Deprovisioning (after a failed provision) has no media to eject: it powers off.
    until_done("deprovision", || p.deprovision(&h)).await;
    assert_eq!(sim.chassis("power"), "0");
}
