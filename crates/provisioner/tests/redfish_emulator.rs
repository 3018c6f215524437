//! The redfish backend against the project's fleet emulator: every step checked on the
//! emulator's own view of each system, and BMC requests counted by the emulator.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{AutomatedCleaningMode, Image, ImageFormat, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials, PowerState, RequestCounter};
use ferrometal_emulator::{Emulator, EmulatorConfig, Fault, PowerState as EmuPower};
use ferrometal_provisioner::redfish::{RedfishOptions, RedfishProvisioner};
use ferrometal_provisioner::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, Registration, Step,
};
use ferrometal_test_support::images::ImageServer;

/// Served for the whole test binary: the emulator fetches what it is told to insert.
static IMAGES: std::sync::LazyLock<ImageServer> = std::sync::LazyLock::new(ImageServer::start);
static ISO: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| IMAGES.url("images/live.iso"));

async fn emulator(systems: usize, initial_power: EmuPower, power_delay: Duration) -> Emulator {
    Emulator::start(
        EmulatorConfig {
            systems,
            initial_power,
            power_delay,
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn options() -> RedfishOptions {
    RedfishOptions {
        request_timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(20),
        step_interval: Duration::from_millis(1),
        ..RedfishOptions::default()
    }
}

fn host(emu: &Emulator, index: usize) -> HostInfo {
    HostInfo {
        key: format!("ns~host-{index}"),
        provisioner_id: String::new(),
        bmc: BmcAddress::parse(&emu.system_url(index).replace("http://", "redfish+http://"))
            .unwrap(),
        credentials: Credentials::new("admin", "password"),
        disable_certificate_verification: false,
        // The emulator's first NIC: 52:54:0N:HH:MM:LL with N the NIC and the rest the index.
        boot_mac_address: Some(format!("52:54:00:00:00:{index:02x}")),
        boot_mode: None,
        inspection_mode: InspectionMode::Fast,
        root_device_hints: None,
        automated_cleaning_mode: AutomatedCleaningMode::Disabled,
        disable_power_off: false,
        preprovisioning_network_data: None,
    }
}

static ISO_DEPLOYMENT: std::sync::LazyLock<Deployment> = std::sync::LazyLock::new(live_iso);

fn live_iso() -> Deployment {
    Deployment {
        image: Some(Image {
            url: ISO.clone(),
            checksum: None,
            checksum_type: None,
            format: Some(ImageFormat::LiveIso),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    }
}

/// Calls `step` until it is Done (bounded); returns how many calls it took.
async fn until_done<F, Fut>(what: &str, mut step: F) -> usize
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ferrometal_provisioner::Result<Step>>,
{
    for calls in 1..=500 {
        match step().await {
            Ok(Step::Done(())) => return calls,
            Ok(Step::Waiting { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => panic!("{what}: {e} ({:?})", e.kind),
        }
    }
    panic!("{what}: never Done");
}

fn actions(emu: &Emulator, index: usize) -> Vec<String> {
    emu.state(index).actions
}

#[tokio::test]
async fn register_proves_access_and_reads_the_uuid() {
    let emu = emulator(2, EmuPower::Off, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());
    let h = host(&emu, 1);
    let reg = p.register(&h, false).await.unwrap();
    assert_eq!(
        reg,
        Step::Done(Registration {
            provisioner_id: "8f0e5a3c-1d2b-4c6e-9f00-000000000001".into(),
            power: PowerState::Off,
        })
    );
    assert!(emu.counters().system(1).total() <= 2);

    // Known ID: one request only.
    emu.reset_counters();
    let mut known = h.clone();
    known.provisioner_id = "kept".into();
    let Step::Done(reg) = p.register(&known, false).await.unwrap() else {
        panic!("register is immediate")
    };
    assert_eq!(reg.provisioner_id, "kept");
    assert_eq!(emu.counters().total, 1);

    // Wrong password: Credentials, then the right one works again without a restart.
    let mut wrong = h.clone();
    wrong.credentials = Credentials::new("admin", "not-the-password");
    let err = p.register(&wrong, true).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Credentials, "{err}");
    assert!(!err.message.contains("not-the-password"), "{err}");
    assert!(p.register(&h, true).await.unwrap().is_done());

    // A BMC answering 500 is retried later; it recovers when the BMC does.
    emu.set_fault(1, Some(Fault::Http500));
    let err = p.register(&h, false).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::ServerError, "{err}");
    emu.set_fault(1, None);
    assert!(p.register(&h, false).await.unwrap().is_done());
}

#[tokio::test]
async fn inspection_fills_hardware_details_from_the_inventory() {
    let emu = emulator(3, EmuPower::Off, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());

    // sys-0: two Xeon Gold 6338 (32 cores, 64 threads), 8 x 32 GiB, 2 x 25G NICs, 2 NVMe.
    let Step::Done(Some(hw)) = p.inspect(&host(&emu, 0), false).await.unwrap() else {
        panic!("fast inspection is immediate")
    };
    let cpu = hw.cpu.as_ref().unwrap();
    assert_eq!(cpu.arch, "x86_64");
    assert_eq!(cpu.model, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz");
    assert_eq!(cpu.count, 128);
    assert_eq!(cpu.clock_megahertz, 3200.0);
    assert_eq!(hw.ram_mebibytes, 8 * 32768);
    assert_eq!(hw.nics.len(), 2);
    assert_eq!(hw.nics[0].mac, "52:54:00:00:00:00");
    assert!(hw.nics[0].pxe && !hw.nics[1].pxe);
    assert_eq!(hw.nics[0].speed_gbps, 25);
    assert_eq!(hw.storage.len(), 2);
    assert!(
        hw.storage
            .iter()
            .all(|s| s.type_ == Some(ferrometal_api::DiskType::Nvme))
    );
    assert_eq!(hw.storage[0].size_bytes, 960_197_124_096);
    assert_eq!(
        hw.storage[0].model.as_deref(),
        Some("SAMSUNG MZQL2960HCJR-00A07")
    );
    assert_eq!(hw.storage[0].serial_number.as_deref(), Some("FMD00000000"));
    let vendor = hw.system_vendor.as_ref().unwrap();
    assert_eq!(vendor.manufacturer.as_deref(), Some("Ferrometal"));
    assert_eq!(vendor.product_name.as_deref(), Some("Emulated 2U Server"));
    assert_eq!(vendor.serial_number.as_deref(), Some("FM00000000"));

    // sys-1: AMD, 10G NICs, one SATA SSD and two SAS disks.
    let Step::Done(Some(hw)) = p.inspect(&host(&emu, 1), false).await.unwrap() else {
        panic!("fast inspection is immediate")
    };
    assert_eq!(hw.nics[0].speed_gbps, 10);
    let kinds: Vec<_> = hw
        .storage
        .iter()
        .map(|s| (s.type_.unwrap(), s.rotational))
        .collect();
    assert_eq!(
        kinds,
        [
            (ferrometal_api::DiskType::Ssd, false),
            (ferrometal_api::DiskType::Hdd, true),
            (ferrometal_api::DiskType::Hdd, true)
        ]
    );

    // Disabled: nothing asked of the BMC.
    emu.reset_counters();
    let mut disabled = host(&emu, 2);
    disabled.inspection_mode = InspectionMode::Disabled;
    assert_eq!(p.inspect(&disabled, false).await.unwrap(), Step::Done(None));
    assert_eq!(emu.counters().total, 0);
}

#[tokio::test]
async fn register_and_inspect_cost_at_most_four_requests_per_host() {
    const HOSTS: usize = 20;
    let emu = emulator(HOSTS, EmuPower::Off, Duration::ZERO).await;
    let counter = Arc::new(RequestCounter::default());
    let p = RedfishProvisioner::new(RedfishOptions {
        observer: Some(counter.clone()),
        ..options()
    });
    for i in 0..HOSTS {
        let h = host(&emu, i);
        let Step::Done(reg) = p.register(&h, false).await.unwrap() else {
            panic!("register is immediate")
        };
        let mut h = h;
        h.provisioner_id = reg.provisioner_id;
        let Step::Done(Some(_)) = p.inspect(&h, false).await.unwrap() else {
            panic!("inspection is immediate")
        };
    }
    let counters = emu.counters();
    let per_host = counters.total as f64 / HOSTS as f64;
    println!(
        "register + inspect: {} requests for {HOSTS} hosts ({per_host} per host; {:?})",
        counters.total, counters.by_method
    );
    assert!(counters.total <= 4 * HOSTS as u64, "{counters:?}");
    for i in 0..HOSTS {
        // Per system: power, identity, the expanded system; the service root is not per system.
        assert!(counters.system(i).total() <= 3, "sys-{i}: {counters:?}");
    }
    // The observer saw exactly what the BMCs received.
    assert_eq!(counter.total(), counters.total);
    // A steady-state power poll is one request.
    emu.reset_counters();
    p.power_state(&host(&emu, 3)).await.unwrap();
    assert_eq!(emu.counters().total, 1);
}

#[tokio::test]
async fn provision_boots_the_live_iso_from_virtual_media() {
    let emu = emulator(2, EmuPower::Off, Duration::from_millis(50)).await;
    let p = RedfishProvisioner::new(options());

    // A host that is off: media, boot override, power on.
    let h = host(&emu, 0);
    until_done("provision sys-0", || p.provision(&h, &ISO_DEPLOYMENT)).await;
    let s = emu.state(0);
    assert!(s.virtual_media.inserted);
    assert_eq!(s.virtual_media.image.as_deref(), Some(&**ISO));
    assert_eq!(s.power_state, EmuPower::On);
    assert_eq!(s.last_boot_source.as_deref(), Some("Cd"));
    assert_eq!(s.boot.mode, "UEFI");
    assert_eq!(s.actions, ["InsertMedia", "PatchBoot", "Reset:On"]);
    // Calling again once Done changes nothing.
    assert_eq!(p.provision(&h, &live_iso()).await.unwrap(), Step::Done(()));
    assert_eq!(actions(&emu, 0).len(), 3);

    // A host that is on is switched off before the media goes in, then on again.
    let h1 = host(&emu, 1);
    until_done("power on sys-1", || p.power_on(&h1)).await;
    until_done("provision sys-1", || p.provision(&h1, &ISO_DEPLOYMENT)).await;
    let s = emu.state(1);
    assert_eq!(
        s.actions,
        [
            "Reset:On",
            "Reset:ForceOff",
            "InsertMedia",
            "PatchBoot",
            "Reset:On"
        ]
    );
    assert_eq!(s.power_state, EmuPower::On);
    assert_eq!(s.last_boot_source.as_deref(), Some("Cd"));

    // Deprovision: eject, power off.
    until_done("deprovision sys-0", || p.deprovision(&h)).await;
    let s = emu.state(0);
    assert!(!s.virtual_media.inserted);
    assert_eq!(s.power_state, EmuPower::Off);
    assert_eq!(
        s.actions[3..],
        ["EjectMedia".to_string(), "Reset:ForceOff".to_string()]
    );
    // Again: already ejected and off, nothing to do.
    assert_eq!(p.deprovision(&h).await.unwrap(), Step::Done(()));
    assert_eq!(actions(&emu, 0).len(), 5);
}

#[tokio::test]
async fn legacy_boot_mode_and_hosts_that_must_stay_on() {
    let emu = emulator(1, EmuPower::On, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());
    let mut h = host(&emu, 0);
    h.boot_mode = Some(ferrometal_api::BootMode::Legacy);
    h.disable_power_off = true;
    until_done("provision", || p.provision(&h, &ISO_DEPLOYMENT)).await;
    let s = emu.state(0);
    // Never switched off: the image is booted with a restart instead.
    assert_eq!(
        s.actions,
        ["InsertMedia", "PatchBoot", "Reset:ForceRestart"]
    );
    assert_eq!(s.boot.mode, "Legacy");
    assert_eq!(s.last_boot_source.as_deref(), Some("Cd"));
    until_done("deprovision", || p.deprovision(&h)).await;
    let s = emu.state(0);
    assert_eq!(s.power_state, EmuPower::On);
    assert!(!s.virtual_media.inserted);
    assert!(
        !s.actions.iter().any(|a| a.contains("Off")),
        "{:?}",
        s.actions
    );
}

#[tokio::test]
async fn a_new_process_continues_a_half_done_provision_without_repeating_actions() {
    let emu = emulator(3, EmuPower::Off, Duration::ZERO).await;

    // sys-0: the first process inserted the media and set the boot override, then died.
    let first = RedfishProvisioner::new(options());
    let h0 = host(&emu, 0);
    assert!(!first.provision(&h0, &live_iso()).await.unwrap().is_done());
    assert!(!first.provision(&h0, &live_iso()).await.unwrap().is_done());
    assert_eq!(actions(&emu, 0), ["InsertMedia", "PatchBoot"]);
    drop(first);
    let second = RedfishProvisioner::new(options());
    until_done("continue sys-0", || second.provision(&h0, &ISO_DEPLOYMENT)).await;
    let a = actions(&emu, 0);
    assert_eq!(a.iter().filter(|a| *a == "InsertMedia").count(), 1, "{a:?}");
    assert!(!a.iter().any(|a| a.contains("Off")), "{a:?}");
    assert_eq!(a.last().map(String::as_str), Some("Reset:On"));
    assert_eq!(emu.state(0).last_boot_source.as_deref(), Some("Cd"));

    // sys-1: on at first; the first process switched it off and inserted the media.
    let h1 = host(&emu, 1);
    let first = RedfishProvisioner::new(options());
    until_done("power on sys-1", || first.power_on(&h1)).await;
    for _ in 0..2 {
        assert!(!first.provision(&h1, &live_iso()).await.unwrap().is_done());
    }
    assert_eq!(
        actions(&emu, 1),
        ["Reset:On", "Reset:ForceOff", "InsertMedia"]
    );
    drop(first);
    let second = RedfishProvisioner::new(options());
    until_done("continue sys-1", || second.provision(&h1, &ISO_DEPLOYMENT)).await;
    assert_eq!(
        actions(&emu, 1),
        [
            "Reset:On",
            "Reset:ForceOff",
            "InsertMedia",
            "PatchBoot",
            "Reset:On"
        ]
    );

    // sys-2: fully provisioned by the first process; a restart finds it done.
    let h2 = host(&emu, 2);
    let first = RedfishProvisioner::new(options());
    until_done("provision sys-2", || first.provision(&h2, &ISO_DEPLOYMENT)).await;
    drop(first);
    let before = actions(&emu, 2);
    let second = RedfishProvisioner::new(options());
    assert_eq!(
        second.provision(&h2, &live_iso()).await.unwrap(),
        Step::Done(())
    );
    assert_eq!(actions(&emu, 2), before);
}

#[tokio::test]
async fn power_on_and_off_soft_and_hard_issue_once_and_wait() {
    let emu = emulator(1, EmuPower::Off, Duration::from_millis(300)).await;
    let p = RedfishProvisioner::new(options());
    let h = host(&emu, 0);

    let calls = until_done("power on", || p.power_on(&h)).await;
    assert!(calls > 1, "the delayed power change was waited for");
    // Issued once however many checks it took.
    assert_eq!(actions(&emu, 0), ["Reset:On"]);
    assert_eq!(p.power_on(&h).await.unwrap(), Step::Done(()));

    until_done("soft off", || p.power_off(&h, PowerOffMode::Soft)).await;
    assert_eq!(actions(&emu, 0), ["Reset:On", "Reset:GracefulShutdown"]);
    until_done("on", || p.power_on(&h)).await;
    until_done("hard off", || p.power_off(&h, PowerOffMode::Hard)).await;
    assert_eq!(
        actions(&emu, 0)[2..],
        ["Reset:On".to_string(), "Reset:ForceOff".to_string()]
    );
    assert_eq!(emu.state(0).power_state, EmuPower::Off);
    assert_eq!(
        p.power_state(&h).await.unwrap(),
        PowerState::Off,
        "one request, the BMC's view"
    );
}

#[tokio::test]
async fn soft_power_off_falls_back_to_hard_after_the_grace_period() {
    // A shutdown that takes longer than the grace period.
    let emu = emulator(2, EmuPower::On, Duration::from_millis(500)).await;
    let p = RedfishProvisioner::new(RedfishOptions {
        soft_power_off_grace: Duration::from_millis(100),
        ..options()
    });
    let h = host(&emu, 0);
    until_done("soft off", || p.power_off(&h, PowerOffMode::Soft)).await;
    assert_eq!(
        actions(&emu, 0),
        ["Reset:GracefulShutdown", "Reset:ForceOff"]
    );
    assert_eq!(emu.state(0).power_state, EmuPower::Off);
    // A hard request while a soft one is pending does not wait for the grace period.
    let patient = RedfishProvisioner::new(RedfishOptions {
        soft_power_off_grace: Duration::from_secs(3600),
        ..options()
    });
    let h1 = host(&emu, 1);
    assert!(
        !patient
            .power_off(&h1, PowerOffMode::Soft)
            .await
            .unwrap()
            .is_done()
    );
    assert!(
        !patient
            .power_off(&h1, PowerOffMode::Soft)
            .await
            .unwrap()
            .is_done()
    );
    until_done("hard off", || patient.power_off(&h1, PowerOffMode::Hard)).await;
    assert_eq!(
        actions(&emu, 1),
        ["Reset:GracefulShutdown", "Reset:ForceOff"]
    );
}

#[tokio::test]
async fn operations_map_to_one_bmc_action_each() {
    let emu = emulator(1, EmuPower::On, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());
    let h = host(&emu, 0);
    for (op, recorded) in [
        (Operation::PowerCycle, "Reset:PowerCycle"),
        (Operation::GracefulRestart, "Reset:GracefulRestart"),
        (Operation::ForceRestart, "Reset:ForceRestart"),
        (Operation::ForceOff, "Reset:ForceOff"),
        (Operation::ForceOn, "Reset:ForceOn"),
        (Operation::GracefulShutdown, "Reset:GracefulShutdown"),
        (Operation::PxeOnce, "PatchBoot"),
    ] {
        assert_eq!(p.operation(&h, op).await.unwrap(), Step::Done(()), "{op:?}");
        assert_eq!(
            actions(&emu, 0).last().map(String::as_str),
            Some(recorded),
            "{op:?}"
        );
    }
    assert_eq!(actions(&emu, 0).len(), 7);
    let boot = emu.state(0).boot;
    assert_eq!(
        (boot.target.as_str(), boot.enabled.as_str()),
        ("Pxe", "Once")
    );
}

#[tokio::test]
async fn adopt_detach_and_delete_leave_the_machine_alone() {
    let emu = emulator(1, EmuPower::On, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());
    let h = host(&emu, 0);
    assert_eq!(p.adopt(&h, &live_iso()).await.unwrap(), Step::Done(()));
    assert_eq!(emu.counters().total, 1);
    assert_eq!(p.cached_hosts(), 1);
    assert_eq!(p.detach(&h).await.unwrap(), Step::Done(()));
    assert_eq!(p.delete(&h).await.unwrap(), Step::Done(()));
    assert_eq!(p.cached_hosts(), 0);
    assert_eq!(emu.counters().total, 1);
    assert!(actions(&emu, 0).is_empty());
    assert_eq!(emu.state(0).power_state, EmuPower::On);
}

#[tokio::test]
async fn images_the_backend_cannot_boot_are_refused_before_any_request() {
    let emu = emulator(1, EmuPower::Off, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());
    let mut qcow = live_iso();
    qcow.image.as_mut().unwrap().format = Some(ImageFormat::Qcow2);
    let err = p.provision(&host(&emu, 0), &qcow).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert_eq!(
        err.message,
        "image format qcow2 needs the deploy agent (serve --agent-ramdisk) or the ironic provisioner; without them the redfish provisioner boots live-iso images only"
    );

    let mut ipmi = host(&emu, 0);
    ipmi.bmc = BmcAddress::parse("ipmi://127.0.0.1:9").unwrap();
    let err = p.provision(&ipmi, &live_iso()).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(err.message.contains("IPMI"), "{err}");
    assert_eq!(emu.counters().total, 0);
}

/// The emulator fetches what it inserts, as BMCs do: an image nothing serves fails the provision
/// step as a failed attempt (counted towards the retry limit), with the BMC's words and the URL,
/// and nothing stays mounted. Served again, the same host provisions.
#[tokio::test]
async fn an_image_nothing_serves_fails_the_attempt() {
    let emu = emulator(1, EmuPower::Off, Duration::ZERO).await;
    let p = RedfishProvisioner::new(options());
    let h = host(&emu, 0);
    for url in [
        IMAGES.url("missing/live.iso"),
        "http://127.0.0.1:1/live.iso".to_string(),
    ] {
        let mut deployment = live_iso();
        deployment.image.as_mut().unwrap().url = url.clone();
        let err = loop {
            match p.provision(&h, &deployment).await {
                Ok(Step::Waiting { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
                Ok(Step::Done(())) => panic!("{url}: provisioned"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind, ErrorKind::Failed, "{url}: {err}");
        assert!(
            err.message.contains(&url) && err.message.contains("Failed fetching image"),
            "{err}"
        );
        assert!(!emu.state(0).virtual_media.inserted);
    }
    until_done("provision a served image", || {
        p.provision(&h, &ISO_DEPLOYMENT)
    })
    .await;
    assert_eq!(emu.state(0).virtual_media.image.as_deref(), Some(&**ISO));
}

#[tokio::test]
async fn bmc_faults_are_typed_errors_and_clear_by_themselves() {
    let emu = emulator(1, EmuPower::Off, Duration::ZERO).await;
    let p = RedfishProvisioner::new(RedfishOptions {
        request_timeout: Duration::from_millis(300),
        ..options()
    });
    let h = host(&emu, 0);
    assert!(p.register(&h, false).await.unwrap().is_done());
    for (fault, kind) in [
        (Fault::Http500, ErrorKind::ServerError),
        (Fault::Hang, ErrorKind::Unreachable),
        (Fault::ConnectionReset, ErrorKind::Unreachable),
        (Fault::Unauthorized, ErrorKind::Credentials),
    ] {
        emu.set_fault(0, Some(fault.clone()));
        let err = p.power_on(&h).await.unwrap_err();
        assert_eq!(err.kind, kind, "{fault:?}: {err}");
        assert!(err.message.contains(&emu.addr().to_string()), "{err}");
        emu.set_fault(0, None);
        // Nothing was issued while the BMC misbehaved.
        assert!(actions(&emu, 0).is_empty(), "{fault:?}");
        assert_eq!(p.power_state(&h).await.unwrap(), PowerState::Off);
    }
    until_done("power on after the faults", || p.power_on(&h)).await;
    assert_eq!(actions(&emu, 0), ["Reset:On"]);
}
