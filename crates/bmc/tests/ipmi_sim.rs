//! The IPMI client against OpenIPMI's ipmi_sim, checked through the simulated chassis state.

use ferrometal_bmc::{
    BmcAddress, BmcError, BmcOptions, BootDevice, BootMode, BootOverride, Credentials, PowerAction,
    PowerState, connect,
};
use ferrometal_test_support::peers::IpmiSim;

#[tokio::test]
async fn power_and_boot_device_against_ipmi_sim() {
    let sim = IpmiSim::start();
    let address = BmcAddress::parse(&sim.address()).unwrap();
    let bmc = connect(
        &address,
        Credentials::new("admin", "password"),
        BmcOptions::default(),
    )
    .unwrap();

    assert_eq!(bmc.power_state().await.unwrap(), PowerState::Off);
    bmc.power(PowerAction::On).await.unwrap();
    assert_eq!(sim.chassis("power"), "1");
    assert_eq!(bmc.power_state().await.unwrap(), PowerState::On);
    bmc.power(PowerAction::GracefulShutdown).await.unwrap();
    assert_eq!(sim.chassis("power"), "0");
    bmc.power(PowerAction::ForceOn).await.unwrap();
    bmc.power(PowerAction::ForceOff).await.unwrap();
    assert_eq!(sim.chassis("power"), "0");
    assert_eq!(bmc.power_state().await.unwrap(), PowerState::Off);
    bmc.power(PowerAction::On).await.unwrap();
    bmc.power(PowerAction::ForceRestart).await.unwrap();
    let calls = std::fs::read_to_string(sim.dir.path().join("chassis/calls.log")).unwrap();
    assert!(calls.contains("set reset 1"), "{calls}");

    // IPMI has no graceful restart: refused clearly, nothing sent.
    let err = bmc.power(PowerAction::GracefulRestart).await.unwrap_err();
    assert!(matches!(err, BmcError::Unsupported { .. }), "{err}");

    for (device, expect) in [
        (BootDevice::Pxe, "pxe"),
        (BootDevice::Hdd, "default"),
        (BootDevice::Cd, "cdrom"),
    ] {
        bmc.set_boot(BootOverride {
            device,
            once: true,
            mode: Some(BootMode::Uefi),
        })
        .await
        .unwrap();
        assert_eq!(sim.chassis("boot"), expect, "{device:?}");
    }
    bmc.set_boot(BootOverride {
        device: BootDevice::Pxe,
        once: false,
        mode: Some(BootMode::Legacy),
    })
    .await
    .unwrap();
    assert_eq!(sim.chassis("boot"), "pxe");

    assert!(matches!(
        bmc.insert_media("http://x/y.iso").await,
        Err(BmcError::Unsupported { .. })
    ));
    let identity = bmc.identity().await.unwrap();
    assert!(identity.uuid.is_some(), "{identity:?}");

    // Wrong password: typed unauthorized, chassis untouched.
    let before = sim.chassis("power");
    let bad = connect(
        &address,
        Credentials::new("admin", "nope"),
        BmcOptions::default(),
    )
    .unwrap();
    let err = bad.power(PowerAction::ForceOff).await.unwrap_err();
    assert!(matches!(err, BmcError::Unauthorized { .. }), "{err}");
    assert_eq!(sim.chassis("power"), before);
}

/// metal3's `libvirt://` (a VirtualBMC's IPMI) and its `?privilegelevel=`: the session asks
/// for that level, so a USER session reads the power but may not change it, and an OPERATOR
/// session may.
#[tokio::test]
async fn libvirt_addresses_speak_ipmi_at_the_privilege_level_they_name() {
    let sim = IpmiSim::start();
    let port = sim.address().rsplit_once(':').unwrap().1.to_string();
    let at = |level: &str| {
        let address = BmcAddress::parse(&format!(
            "libvirt://127.0.0.1:{port}/?privilegelevel={level}"
        ))
        .unwrap();
        connect(
            &address,
            Credentials::new("admin", "password"),
            BmcOptions::default(),
        )
        .unwrap()
    };
    let user = at("user");
    assert_eq!(user.power_state().await.unwrap(), PowerState::Off);
    let err = user.power(PowerAction::On).await.unwrap_err();
    assert!(matches!(err, BmcError::Unauthorized { .. }), "{err}");
    assert_eq!(sim.chassis("power"), "0");
    at("OPERATOR").power(PowerAction::On).await.unwrap();
    assert_eq!(sim.chassis("power"), "1");
}
