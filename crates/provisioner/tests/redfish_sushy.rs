//! The redfish backend against sushy-tools (fake driver), checked on the peer's own view.

use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{AutomatedCleaningMode, Image, ImageFormat, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials, PowerState};
use ferrometal_provisioner::redfish::{RedfishOptions, RedfishProvisioner};
use ferrometal_provisioner::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, ProvisionerError, Step,
};
use ferrometal_test_support::peers::{self, FileServer, SUSHY_SYSTEM_0, Sushy};

fn options() -> RedfishOptions {
    RedfishOptions {
        request_timeout: Duration::from_secs(10),
        poll_interval: Duration::from_millis(50),
        step_interval: Duration::from_millis(1),
        ..RedfishOptions::default()
    }
}

fn host(sushy: &Sushy, uuid: &str, password: &str) -> HostInfo {
    HostInfo {
        key: format!("ns~{uuid}"),
        provisioner_id: String::new(),
        bmc: BmcAddress::parse(&sushy.address(uuid)).unwrap(),
        credentials: Credentials::new("admin", password),
        disable_certificate_verification: false,
        boot_mac_address: Some("52:54:00:00:00:00".into()),
        boot_mode: None,
        inspection_mode: InspectionMode::Fast,
        root_device_hints: None,
        automated_cleaning_mode: AutomatedCleaningMode::Disabled,
        disable_power_off: false,
        preprovisioning_network_data: None,
    }
}

/// Calls `step` until Done (bounded: sushy-tools' power changes land within a few polls here).
async fn until_done<F, Fut>(what: &str, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Step, ProvisionerError>>,
{
    for _ in 0..600 {
        match step().await {
            Ok(Step::Done(())) => return,
            Ok(Step::Waiting { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("{what}: {e} ({:?})", e.kind),
        }
    }
    panic!("{what}: never Done");
}

fn peer_power(sushy: &Sushy) -> String {
    sushy.system(SUSHY_SYSTEM_0)["PowerState"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn register_and_inspect_against_sushy_tools() {
    let sushy = Sushy::start(1, "admin:password");
    let p = RedfishProvisioner::new(options());
    let h = host(&sushy, SUSHY_SYSTEM_0, "password");

    let Step::Done(reg) = p.register(&h, false).await.unwrap() else {
        panic!("register is immediate")
    };
    assert_eq!(reg.provisioner_id, SUSHY_SYSTEM_0);
    assert_eq!(reg.power, PowerState::Off);

    let wrong = host(&sushy, SUSHY_SYSTEM_0, "wrong-password");
    let err = p.register(&wrong, true).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Credentials, "{err}");
    assert!(!err.message.contains("wrong-password"), "{err}");

    // sushy-tools' fake systems report no processors: what they do report is recorded
    // (the controller names the gaps in a condition) and inspection does not fail.
    let Step::Done(Some(hw)) = p.inspect(&h, false).await.unwrap() else {
        panic!("inspection is immediate and returns details")
    };
    assert_eq!(hw.cpu.as_ref().map(|c| c.count), Some(0));
    assert!(!hw.nics.is_empty(), "the NICs it reports are kept");

    let mut disabled = h.clone();
    disabled.inspection_mode = InspectionMode::Disabled;
    assert_eq!(p.inspect(&disabled, false).await.unwrap(), Step::Done(None));
}

#[tokio::test]
async fn provision_power_and_operations_against_sushy_tools() {
    let sushy = Sushy::start(1, "admin:password");
    let files = FileServer::start();
    let url = files.url("live.iso");
    let p = RedfishProvisioner::new(options());
    let h = host(&sushy, SUSHY_SYSTEM_0, "password");
    let deployment = Deployment {
        image: Some(Image {
            url: url.clone(),
            checksum: None,
            checksum_type: None,
            format: Some(ImageFormat::LiveIso),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    };

    until_done("provision", || p.provision(&h, &deployment)).await;
    let cd = sushy.virtual_cd(SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], url.as_str());
    let system = sushy.system(SUSHY_SYSTEM_0);
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Cd");
    assert_eq!(system["Boot"]["BootSourceOverrideMode"], "UEFI");
    assert_eq!(system["PowerState"], "On");

    until_done("deprovision", || p.deprovision(&h)).await;
    assert_eq!(sushy.virtual_cd(SUSHY_SYSTEM_0)["Inserted"], false);
    assert_eq!(peer_power(&sushy), "Off");

    until_done("power on", || p.power_on(&h)).await;
    assert_eq!(peer_power(&sushy), "On");
    until_done("soft power off", || p.power_off(&h, PowerOffMode::Soft)).await;
    assert_eq!(peer_power(&sushy), "Off");
    until_done("power on", || p.power_on(&h)).await;
    until_done("hard power off", || p.power_off(&h, PowerOffMode::Hard)).await;
    assert_eq!(peer_power(&sushy), "Off");
    assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);

    // Each operation is one action; the end state is checked on the peer.
    for (op, expect) in [
        (Operation::ForceOn, "On"),
        (Operation::GracefulRestart, "On"),
        (Operation::ForceRestart, "On"),
        // sushy-tools offers no PowerCycle: the client falls back to ForceRestart.
        (Operation::PowerCycle, "On"),
        (Operation::GracefulShutdown, "Off"),
        (Operation::ForceOff, "Off"),
    ] {
        assert_eq!(p.operation(&h, op).await.unwrap(), Step::Done(()), "{op:?}");
        peers::eventually(&format!("{op:?} lands as {expect}"), || {
            peer_power(&sushy) == expect
        })
        .await;
    }
    assert_eq!(
        p.operation(&h, Operation::PxeOnce).await.unwrap(),
        Step::Done(())
    );
    assert_eq!(
        sushy.system(SUSHY_SYSTEM_0)["Boot"]["BootSourceOverrideTarget"],
        "Pxe"
    );
}

fn peer_secure_boot(sushy: &Sushy) -> bool {
    let url = format!("{}/SecureBoot", sushy.system_url(SUSHY_SYSTEM_0));
    let out = std::process::Command::new("curl")
        .args(["-sf", "-u", "admin:password", &url])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["SecureBootEnable"].as_bool().unwrap()
}

/// `UEFISecureBoot` reaches the BMC: Secure Boot is turned on before the image boots and off
/// again when it is removed (as Ironic does); over IPMI it is refused, never downgraded.
#[tokio::test]
async fn secure_boot_is_enabled_for_the_image_and_disabled_after() {
    let sushy = Sushy::start(1, "admin:password");
    let files = FileServer::start();
    let p = RedfishProvisioner::new(options());
    let mut h = host(&sushy, SUSHY_SYSTEM_0, "password");
    h.boot_mode = Some(ferrometal_api::BootMode::UefiSecureBoot);
    let deployment = Deployment {
        image: Some(Image {
            url: files.url("live.iso"),
            checksum: None,
            checksum_type: None,
            format: Some(ImageFormat::LiveIso),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    };
    assert!(!peer_secure_boot(&sushy));
    until_done("provision", || p.provision(&h, &deployment)).await;
    assert!(peer_secure_boot(&sushy), "secure boot on for the image");
    assert_eq!(
        sushy.system(SUSHY_SYSTEM_0)["Boot"]["BootSourceOverrideMode"],
        "UEFI"
    );
    assert_eq!(peer_power(&sushy), "On");
    until_done("deprovision", || p.deprovision(&h)).await;
    assert!(!peer_secure_boot(&sushy), "secure boot off again");

    let mut ipmi = h.clone();
    ipmi.bmc = BmcAddress::parse("ipmi://127.0.0.1:9").unwrap();
    let err = p.provision(&ipmi, &deployment).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported, "{err}");
}
