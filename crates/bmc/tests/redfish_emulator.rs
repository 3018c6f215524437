//! The Redfish client against the project's fleet emulator: the Managers virtual-media layout,
//! Once boot overrides, sessions, request counting and every injected fault.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_bmc::{
    AuthMode, Bmc, BmcAddress, BmcError, BmcOptions, BootDevice, BootMode, BootOverride,
    Credentials, PowerAction, PowerState, RequestCounter, connect,
};
use ferrometal_emulator::{Emulator, EmulatorConfig, Fault};
use ferrometal_test_support::images::ImageServer;
use ferrometal_test_support::peers::eventually;

async fn emulator(config: EmulatorConfig) -> Emulator {
    Emulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn client(emu: &Emulator, index: usize, options: BmcOptions) -> Arc<dyn Bmc> {
    let address =
        BmcAddress::parse(&emu.system_url(index).replace("http://", "redfish+http://")).unwrap();
    connect(&address, Credentials::new("admin", "password"), options).unwrap()
}

#[tokio::test]
async fn every_power_action_lands_on_the_emulator() {
    let emu = emulator(EmulatorConfig {
        systems: 2,
        power_delay: Duration::from_millis(200),
        ..EmulatorConfig::default()
    })
    .await;
    let bmc = client(&emu, 1, BmcOptions::default());
    let power = || emu.state(1).power_state.as_str().to_string();
    for (action, expect) in [
        (PowerAction::On, "On"),
        (PowerAction::ForceOff, "Off"),
        (PowerAction::ForceOn, "On"),
        (PowerAction::GracefulShutdown, "Off"),
        (PowerAction::PowerCycle, "On"),
        (PowerAction::GracefulRestart, "On"),
        (PowerAction::ForceRestart, "On"),
    ] {
        bmc.power(action).await.unwrap();
        eventually(&format!("{action:?}"), || power() == expect).await;
        assert_eq!(bmc.power_state().await.unwrap().to_string(), expect);
    }
    let actions = emu.state(1).actions;
    for reset in [
        "ForceOff",
        "ForceOn",
        "GracefulShutdown",
        "PowerCycle",
        "GracefulRestart",
        "ForceRestart",
    ] {
        assert!(
            actions.iter().any(|a| a.contains(reset)),
            "{reset} missing from {actions:?}"
        );
    }
    // The other system was never touched.
    assert_eq!(emu.state(0).power_state.as_str(), "Off");
    assert!(emu.state(0).actions.is_empty());
}

#[tokio::test]
async fn power_cycle_falls_back_when_the_bmc_does_not_offer_it() {
    let emu = emulator(EmulatorConfig {
        systems: 1,
        omit_power_cycle: true,
        ..Default::default()
    })
    .await;
    let bmc = client(&emu, 0, BmcOptions::default());
    bmc.power(PowerAction::On).await.unwrap();
    bmc.power(PowerAction::PowerCycle).await.unwrap();
    let actions = emu.state(0).actions;
    assert!(
        actions.iter().any(|a| a.contains("ForceRestart")),
        "{actions:?}"
    );
    assert!(
        !actions.iter().any(|a| a.contains("PowerCycle")),
        "{actions:?}"
    );
}

#[tokio::test]
async fn boot_override_once_and_virtual_media_through_the_manager() {
    let emu = emulator(EmulatorConfig {
        systems: 1,
        ..Default::default()
    })
    .await;
    let bmc = client(&emu, 0, BmcOptions::default());
    bmc.set_boot(BootOverride {
        device: BootDevice::Cd,
        once: true,
        mode: Some(BootMode::Uefi),
    })
    .await
    .unwrap();
    let boot = emu.state(0).boot;
    assert_eq!(
        (
            boot.target.as_str(),
            boot.enabled.as_str(),
            boot.mode.as_str()
        ),
        ("Cd", "Once", "UEFI")
    );
    // A second PATCH works although the first changed the ETag (If-Match stays correct).
    bmc.set_boot(BootOverride {
        device: BootDevice::Pxe,
        once: false,
        mode: None,
    })
    .await
    .unwrap();
    assert_eq!(emu.state(0).boot.enabled, "Continuous");
    bmc.set_boot(BootOverride {
        device: BootDevice::Cd,
        once: true,
        mode: None,
    })
    .await
    .unwrap();

    // The BMC fetches what it is told to insert, as real ones do: an image nothing serves is
    // refused, and the slot stays empty.
    let images = ImageServer::start();
    for (url, status) in [
        (images.url("missing/live.iso"), 400),
        (images.url("private/live.iso"), 400),
        ("http://127.0.0.1:1/live.iso".to_string(), 500),
    ] {
        let err = bmc.insert_media(&url).await.unwrap_err();
        assert!(
            matches!(&err, BmcError::Http { status: s, message, .. }
                if *s == status && message.contains(&url)),
            "{url}: {err}"
        );
        assert!(!emu.state(0).virtual_media.inserted, "{url}");
    }
    let live = images.url("live.iso");
    bmc.insert_media(&live).await.unwrap();
    let media = emu.state(0).virtual_media;
    assert!(media.inserted);
    assert_eq!(media.image.as_deref(), Some(&*live));
    // Boot once from it: the override is consumed by the power-on.
    bmc.power(PowerAction::On).await.unwrap();
    eventually("power on", || emu.state(0).power_state.as_str() == "On").await;
    assert_eq!(emu.state(0).boot.enabled, "Disabled");
    assert_eq!(emu.state(0).last_boot_source.as_deref(), Some("Cd"));
    // A different image replaces the mounted one.
    let other = images.url("other.iso");
    bmc.insert_media(&other).await.unwrap();
    assert_eq!(emu.state(0).virtual_media.image.as_deref(), Some(&*other));
    // A URL that answered is not fetched again for every insert (a fleet shares one image).
    let fetched = images.requests();
    bmc.insert_media(&live).await.unwrap();
    assert_eq!(images.requests(), fetched);
    bmc.eject_media().await.unwrap();
    assert!(!emu.state(0).virtual_media.inserted);
    assert!(!bmc.media_status().await.unwrap().inserted);
}

#[tokio::test]
async fn power_and_boot_override_come_from_one_reading() {
    let emu = emulator(EmulatorConfig {
        systems: 1,
        ..Default::default()
    })
    .await;
    let bmc = client(&emu, 0, BmcOptions::default());
    let wanted = BootOverride {
        device: BootDevice::Cd,
        once: true,
        mode: Some(BootMode::Uefi),
    };
    bmc.set_boot(wanted).await.unwrap();
    let gets = || emu.counters().by_method.get;
    let before = gets();
    let (power, boot) = bmc.power_and_boot().await.unwrap();
    assert_eq!(gets(), before + 1, "one GET for both");
    assert_eq!(boot, Some(wanted));
    assert_eq!(power.to_string(), emu.state(0).power_state.as_str());
    // The same answers as the two reads apart.
    assert_eq!(power, bmc.power_state().await.unwrap());
    assert_eq!(boot, bmc.boot_override().await.unwrap());
    bmc.clear_boot().await.unwrap();
    assert_eq!(bmc.power_and_boot().await.unwrap().1, None);
}

#[tokio::test]
async fn inventory_is_complete_and_cheap() {
    let emu = emulator(EmulatorConfig {
        systems: 3,
        ..Default::default()
    })
    .await;
    let counter = Arc::new(RequestCounter::default());
    let bmc = client(
        &emu,
        2,
        BmcOptions {
            observer: Some(counter.clone()),
            ..Default::default()
        },
    );
    let inventory = bmc.inventory().await.unwrap();
    assert!(
        !inventory.cpus.is_empty() && inventory.cpus[0].cores > 0,
        "{inventory:?}"
    );
    assert!(inventory.total_memory_mib() > 0);
    assert!(!inventory.nics.is_empty() && inventory.nics[0].mac.len() == 17);
    assert!(!inventory.disks.is_empty() && inventory.disks[0].size_bytes > 0);
    assert!(inventory.warnings.is_empty(), "{:?}", inventory.warnings);
    assert!(inventory.identity.uuid.is_some());
    // What the client counted is what the BMC received.
    let seen = emu.counters().system(2).total();
    let root_gets = emu.counters().total
        - emu
            .counters()
            .systems
            .iter()
            .map(|s| s.total())
            .sum::<u64>();
    assert_eq!(counter.total(), seen + root_gets);
}

#[tokio::test]
async fn session_auth_is_reused_and_logged_out() {
    let emu = emulator(EmulatorConfig {
        systems: 1,
        ..Default::default()
    })
    .await;
    let bmc = client(
        &emu,
        0,
        BmcOptions {
            auth: AuthMode::Session,
            ..Default::default()
        },
    );
    bmc.power(PowerAction::On).await.unwrap();
    bmc.power_state().await.unwrap();
    bmc.identity().await.unwrap();
    assert_eq!(
        emu.counters().open_sessions,
        1,
        "one session reused for all calls"
    );
    bmc.logout().await.unwrap();
    assert_eq!(emu.counters().open_sessions, 0);
    // A later call logs in again.
    bmc.power_state().await.unwrap();
    assert_eq!(emu.counters().open_sessions, 1);
    bmc.logout().await.unwrap();
    assert_eq!(emu.counters().open_sessions, 0);
}

#[tokio::test]
async fn each_fault_maps_to_its_typed_error_and_clears() {
    let emu = emulator(EmulatorConfig {
        systems: 1,
        ..Default::default()
    })
    .await;
    let bmc = client(
        &emu,
        0,
        BmcOptions {
            timeout: Duration::from_millis(500),
            ..Default::default()
        },
    );
    bmc.power_state().await.unwrap();
    let cases: [(Fault, &str); 4] = [
        (Fault::Http500, "http_status"),
        (Fault::Hang, "timeout"),
        (Fault::Unauthorized, "unauthorized"),
        (Fault::ConnectionReset, "disconnected"),
    ];
    for (fault, category) in cases {
        emu.set_fault(0, Some(fault.clone()));
        let err = bmc.power_state().await.unwrap_err();
        assert_eq!(err.category(), category, "{fault:?}: {err}");
        if let BmcError::Http { status, .. } = &err {
            assert_eq!(*status, 500);
        }
        emu.set_fault(0, None);
        assert_eq!(
            bmc.power_state().await.unwrap(),
            PowerState::Off,
            "after clearing {fault:?}"
        );
    }
    // Latency below the timeout is only slow; above it, a timeout.
    emu.set_fault(0, Some(Fault::Latency(Duration::from_millis(50))));
    bmc.power_state().await.unwrap();
    emu.set_fault(0, Some(Fault::Latency(Duration::from_secs(2))));
    assert_eq!(bmc.power_state().await.unwrap_err().category(), "timeout");
    emu.set_fault(0, None);
    bmc.power_state().await.unwrap();

    // An unreachable BMC (nothing listens) is its own kind.
    let address = BmcAddress::parse("redfish+http://127.0.0.1:1/redfish/v1/Systems/x").unwrap();
    let gone = connect(
        &address,
        Credentials::new("admin", "password"),
        BmcOptions::default(),
    )
    .unwrap();
    assert_eq!(
        gone.power_state().await.unwrap_err().category(),
        "unreachable"
    );
}

/// Issue 28 (8): `redfish://` (HTTPS) against a BMC that speaks only HTTP says so and names the
/// fix, instead of rustls' "received corrupt message of type InvalidContentType".
#[tokio::test]
async fn https_to_a_plain_http_bmc_names_the_fix() {
    let emu = emulator(EmulatorConfig {
        systems: 1,
        ..Default::default()
    })
    .await;
    let address = BmcAddress::parse(&emu.system_url(0).replace("http://", "redfish://")).unwrap();
    for verify in [true, false] {
        let bmc = connect(
            &address,
            Credentials::new("admin", "password"),
            BmcOptions {
                disable_certificate_verification: !verify,
                ..Default::default()
            },
        )
        .unwrap();
        let err = bmc.power_state().await.unwrap_err();
        let text = err.to_string();
        assert_eq!(err.category(), "unreachable", "{text}");
        assert!(
            text.ends_with("the BMC answered plain HTTP to HTTPS; use redfish+http://"),
            "{text}"
        );
        assert!(!text.contains("InvalidContentType"), "{text}");
    }
}
