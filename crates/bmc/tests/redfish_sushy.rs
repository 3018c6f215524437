//! The Redfish client against sushy-tools, checked on the peer's own view of the system.

use ferrometal_bmc::{
    AuthMode, BmcAddress, BmcError, BmcOptions, BootDevice, BootMode, BootOverride, Credentials,
    PowerAction, PowerState, connect,
};
use ferrometal_test_support::peers::{FileServer, SUSHY_SYSTEM_0, Sushy, eventually};
use ferrometal_test_support::serve::free_port;

fn client(
    sushy: &Sushy,
    password: &str,
    auth: AuthMode,
) -> std::sync::Arc<dyn ferrometal_bmc::Bmc> {
    let address = BmcAddress::parse(&sushy.address(SUSHY_SYSTEM_0)).unwrap();
    let options = BmcOptions {
        auth,
        ..BmcOptions::default()
    };
    connect(&address, Credentials::new("admin", password), options).unwrap()
}

#[tokio::test]
async fn power_boot_media_and_auth_against_sushy_tools() {
    let sushy = Sushy::start(2, "admin:password");
    let bmc = client(&sushy, "password", AuthMode::Basic);

    // Basic auth works and the peer starts Off.
    assert_eq!(bmc.power_state().await.unwrap(), PowerState::Off);
    let identity = bmc.identity().await.unwrap();
    assert_eq!(identity.uuid.as_deref(), Some(SUSHY_SYSTEM_0));

    // Every power action, each observed on the peer.
    let peer_power = || {
        sushy.system(SUSHY_SYSTEM_0)["PowerState"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (action, expect) in [
        (PowerAction::On, "On"),
        (PowerAction::ForceOff, "Off"),
        (PowerAction::ForceOn, "On"),
        (PowerAction::GracefulShutdown, "Off"),
        (PowerAction::On, "On"),
        (PowerAction::GracefulRestart, "On"),
        (PowerAction::ForceRestart, "On"),
        // sushy-tools does not offer PowerCycle: the client falls back to ForceRestart.
        (PowerAction::PowerCycle, "On"),
        (PowerAction::ForceOff, "Off"),
    ] {
        bmc.power(action)
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        eventually(&format!("{action:?} lands as {expect}"), || {
            peer_power() == expect
        })
        .await;
        assert_eq!(bmc.power_state().await.unwrap().to_string(), expect);
    }

    // Boot override, persistent and once (sushy-tools reports Once as Continuous).
    bmc.set_boot(BootOverride {
        device: BootDevice::Pxe,
        once: false,
        mode: Some(BootMode::Uefi),
    })
    .await
    .unwrap();
    let boot = &sushy.system(SUSHY_SYSTEM_0)["Boot"];
    assert_eq!(boot["BootSourceOverrideTarget"], "Pxe");
    assert_eq!(boot["BootSourceOverrideMode"], "UEFI");
    bmc.set_boot(BootOverride {
        device: BootDevice::Cd,
        once: true,
        mode: None,
    })
    .await
    .unwrap();
    assert_eq!(
        sushy.system(SUSHY_SYSTEM_0)["Boot"]["BootSourceOverrideTarget"],
        "Cd"
    );
    // sushy-tools does not offer BiosSetup: a clear "unsupported", nothing sent.
    let err = bmc
        .set_boot(BootOverride {
            device: BootDevice::BiosSetup,
            once: true,
            mode: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, BmcError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("BiosSetup"), "{err}");

    // Virtual media: found under the system (sushy-tools' layout); the peer downloads it.
    let files = FileServer::start();
    let image = files.url("live.iso");
    bmc.insert_media(&image).await.unwrap();
    let cd = sushy.virtual_cd(SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], image.as_str());
    let status = bmc.media_status().await.unwrap();
    assert!(status.inserted);
    assert_eq!(status.image.as_deref(), Some(image.as_str()));
    // Inserting the same image again is a no-op, not an error.
    bmc.insert_media(&image).await.unwrap();
    bmc.eject_media().await.unwrap();
    assert_eq!(sushy.virtual_cd(SUSHY_SYSTEM_0)["Inserted"], false);
    assert!(!bmc.media_status().await.unwrap().inserted);
    // Ejecting empty media is a no-op.
    bmc.eject_media().await.unwrap();

    // Inventory: sushy's fake systems have NICs but no processors; the gap is reported, not fatal.
    let inventory = bmc.inventory().await.unwrap();
    assert_eq!(inventory.nics.len(), 1);
    assert_eq!(inventory.nics[0].mac, "52:54:00:00:00:00");
    assert!(inventory.cpus.is_empty());
    assert!(
        inventory.warnings.iter().any(|w| w.contains("processors")),
        "{:?}",
        inventory.warnings
    );

    // Wrong password: a typed 401 and no change on the peer.
    let bad = client(&sushy, "wrong-password", AuthMode::Basic);
    let err = bad.power(PowerAction::On).await.unwrap_err();
    assert!(matches!(err, BmcError::Unauthorized { .. }), "{err}");
    assert_eq!(peer_power(), "Off");
}

#[tokio::test]
async fn address_without_system_uses_the_only_one_or_says_which() {
    let sushy = Sushy::start(1, "admin:password");
    let address = BmcAddress::parse(&format!("redfish+http://127.0.0.1:{}", sushy.port)).unwrap();
    let bmc = connect(
        &address,
        Credentials::new("admin", "password"),
        BmcOptions::default(),
    )
    .unwrap();
    assert_eq!(
        bmc.identity().await.unwrap().uuid.as_deref(),
        Some(SUSHY_SYSTEM_0)
    );

    let two = Sushy::start(2, "admin:password");
    let address = BmcAddress::parse(&format!("redfish+http://127.0.0.1:{}", two.port)).unwrap();
    let bmc = connect(
        &address,
        Credentials::new("admin", "password"),
        BmcOptions::default(),
    )
    .unwrap();
    let err = bmc.power_state().await.unwrap_err().to_string();
    assert!(err.contains("has 2"), "{err}");
}

/// sushy-tools downloads the image during InsertMedia; when that fails it answers 400 or 500 yet keeps
/// `Inserted: true` with the image. A retry must insert again, not see the leftover and report
/// success, from the same client (the controller) and from a new one (the CLI).
#[tokio::test]
async fn a_failed_insert_is_retried_not_taken_for_done() {
    let sushy = Sushy::start(1, "admin:password");
    let files = FileServer::start();
    let missing = files.url("nothing-here.iso");
    let bmc = client(&sushy, "password", AuthMode::Basic);

    // Nothing listens there at all.
    let refused = format!("http://127.0.0.1:{}/live.iso", free_port());
    let err = bmc.insert_media(&refused).await.unwrap_err();
    assert!(
        matches!(
            err,
            BmcError::Http {
                status: 400 | 500,
                ..
            }
        ),
        "{err}"
    );
    let cd = sushy.virtual_cd(SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], false, "{cd}");
    let err = bmc.insert_media(&missing).await.unwrap_err();
    assert!(
        matches!(
            err,
            BmcError::Http {
                status: 400 | 500,
                ..
            }
        ),
        "{err}"
    );
    // The half-inserted image is ejected again: nothing claims to be mounted.
    let cd = sushy.virtual_cd(SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], false, "{cd}");
    let err = bmc.insert_media(&missing).await.unwrap_err();
    assert!(
        matches!(
            err,
            BmcError::Http {
                status: 400 | 500,
                ..
            }
        ),
        "{err}"
    );
    let fresh = client(&sushy, "password", AuthMode::Basic);
    fresh.insert_media(&missing).await.unwrap_err();
    assert!(!fresh.media_status().await.unwrap().inserted);

    // Once the image is there, the same URL inserts.
    std::fs::write(files.dir.path().join("nothing-here.iso"), b"now it exists").unwrap();
    bmc.insert_media(&missing).await.unwrap();
    let cd = sushy.virtual_cd(SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true, "{cd}");
    assert_eq!(cd["Image"], missing.as_str());
}
