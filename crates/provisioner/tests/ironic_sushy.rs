//! The ironic backend against a real standalone Ironic (PyPI) driving sushy-tools with its
//! redfish driver. Outcomes are checked on sushy-tools and in Ironic, not only in the answers.

use std::time::Duration;

use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{AutomatedCleaningMode, Image, ImageFormat, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials, PowerState};
use ferrometal_provisioner::ironic::{IronicOptions, IronicProvisioner};
use ferrometal_provisioner::{
    ComponentUpdate, Deployment, ErrorKind, FirmwareChanges, HostInfo, Provisioner, Step,
};
use ferrometal_test_support::done;
use ferrometal_test_support::ironic::Ironic;
use ferrometal_test_support::peers::{FileServer, SUSHY_SYSTEM_0, Sushy};

const SYSTEM_1: &str = "00000000-0000-4000-8000-000000000001";

fn provisioner(ironic: &Ironic) -> IronicProvisioner {
    let mut o = IronicOptions::new(ironic.endpoint());
    o.poll_interval = Duration::from_millis(200);
    o.cache_ttl = Duration::from_millis(100);
    IronicProvisioner::new(o)
}

fn host(sushy: &Sushy, name: &str, uuid: &str, password: &str) -> HostInfo {
    let address = sushy
        .address(uuid)
        .replace("redfish+http", "redfish-virtualmedia+http");
    HostInfo {
        key: format!("ns~{name}"),
        provisioner_id: String::new(),
        bmc: BmcAddress::parse(&address).unwrap(),
        credentials: Credentials::new("admin", password),
        disable_certificate_verification: false,
        boot_mac_address: None,
        boot_mode: None,
        inspection_mode: InspectionMode::Disabled,
        root_device_hints: None,
        automated_cleaning_mode: AutomatedCleaningMode::Disabled,
        disable_power_off: false,
        preprovisioning_network_data: None,
    }
}

fn live_iso(url: &str) -> Deployment {
    Deployment {
        image: Some(Image {
            url: url.into(),
            checksum: None,
            checksum_type: None,
            format: Some(ImageFormat::LiveIso),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    }
}

fn count(lines: &[String], what: &str) -> usize {
    lines.iter().filter(|l| l.contains(what)).count()
}

async fn to_available(p: &IronicProvisioner, h: &HostInfo) {
    let reg = done!("register", p.register(h, false));
    assert!(!reg.provisioner_id.is_empty());
    assert_eq!(reg.power, PowerState::Off);
    assert_eq!(done!("inspect", p.inspect(h, false)), None);
    done!("prepare", p.prepare(h));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redfish_lifecycle_with_a_live_iso() {
    let sushy = Sushy::start(2, "admin:password");
    let files = FileServer::start();
    let ironic = Ironic::start();
    let p = provisioner(&ironic);
    assert!(p.is_ready().await);
    let h = host(&sushy, "node", SUSHY_SYSTEM_0, "password");

    to_available(&p, &h).await;
    assert_eq!(ironic.state("ns~node").as_deref(), Some("available"));
    assert!(p.has_capacity(0).await);

    // A firmware image for a host that is not provisioned: Ironic flashes in cleaning only
    // with its agent ramdisk, and none is configured here, so it is refused, naming the flags
    // that set one, and nothing is sent to Ironic or the BMC.
    let before = sushy.changes();
    let changes = FirmwareChanges {
        updates: vec![ComponentUpdate {
            component: "bios".into(),
            url: files.url("bios.bin"),
        }],
        ..FirmwareChanges::default()
    };
    let e = p.change_firmware(&h, &changes).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("--deploy-kernel-url"), "{e}");
    assert!(e.to_string().contains("bios"), "{e}");
    assert_eq!(ironic.state("ns~node").as_deref(), Some("available"));
    assert_eq!(sushy.changes(), before);

    let url = files.url("live.iso");
    done!("provision", p.provision(&h, &live_iso(&url)));
    assert_eq!(ironic.state("ns~node").as_deref(), Some("active"));
    let cd = sushy.virtual_cd(SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], url.as_str());
    assert_eq!(sushy.system(SUSHY_SYSTEM_0)["PowerState"], "On");
    assert_eq!(p.power_state(&h).await.unwrap(), PowerState::On);

    done!("deprovision", p.deprovision(&h));
    assert_eq!(ironic.state("ns~node").as_deref(), Some("available"));
    assert_eq!(sushy.virtual_cd(SUSHY_SYSTEM_0)["Inserted"], false);
    assert_eq!(sushy.system(SUSHY_SYSTEM_0)["PowerState"], "Off");

    done!("delete", p.delete(&h));
    assert!(ironic.node("ns~node").is_none());
    // Deleting what is gone is fine.
    done!("delete again", p.delete(&h));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_systems_fail_inspection_with_a_clear_error_and_bad_credentials_are_named() {
    let sushy = Sushy::start(2, "admin:password");
    let ironic = Ironic::start();
    let p = provisioner(&ironic);

    // Wrong password: verification fails as a credentials error, without the password in it.
    let wrong = host(&sushy, "creds", SYSTEM_1, "not-the-password");
    let err = loop {
        match p.register(&wrong, false).await {
            Err(e) => break e,
            Ok(Step::Waiting { .. }) => tokio::time::sleep(Duration::from_millis(200)).await,
            Ok(Step::Done(r)) => panic!("registered with a wrong password: {r:?}"),
        }
    };
    assert_eq!(err.kind, ErrorKind::Credentials, "{err}");
    assert!(!err.message.contains("not-the-password"), "{err}");
    // The Secret is fixed: driver_info is updated and registration goes through.
    let fixed = host(&sushy, "creds", SYSTEM_1, "password");
    done!("register with fixed credentials", p.register(&fixed, true));
    assert_eq!(ironic.state("ns~creds").as_deref(), Some("manageable"));

    let mut inspected = fixed.clone();
    inspected.inspection_mode = InspectionMode::Fast;
    // Under load Ironic may fail for another reason first (a slow answer); calling again
    // retries the inspection, as the controller does after its backoff.
    let mut errors = Vec::new();
    let err = loop {
        match p.inspect(&inspected, false).await {
            Err(e) if e.message.contains("Processors") => break e,
            Err(e) => {
                errors.push(e.message);
                assert!(
                    errors.len() < 5,
                    "inspection errors without the cause: {errors:#?}"
                );
            }
            Ok(Step::Waiting { .. }) => {}
            Ok(Step::Done(d)) => panic!("inspection of a system without processors: {d:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(err.message.starts_with("inspection failed"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_leaves_the_machine_alone_and_reattach_adopts_without_deploying() {
    let sushy = Sushy::start(1, "admin:password");
    let files = FileServer::start();
    let ironic = Ironic::start();
    let p = provisioner(&ironic);
    let h = host(&sushy, "node", SUSHY_SYSTEM_0, "password");
    to_available(&p, &h).await;
    let deployment = live_iso(&files.url("live.iso"));
    done!("provision", p.provision(&h, &deployment));
    let before = sushy.changes();
    assert_eq!(count(&before, "InsertMedia"), 1, "{before:#?}");

    done!("detach", p.detach(&h));
    assert!(ironic.node("ns~node").is_none());
    assert_eq!(sushy.changes(), before, "detach changed the machine");
    assert_eq!(sushy.system(SUSHY_SYSTEM_0)["PowerState"], "On");
    assert_eq!(sushy.virtual_cd(SUSHY_SYSTEM_0)["Inserted"], true);

    // Re-attach: registered again, then adopted as active.
    let reg = done!("register again", p.register(&h, false));
    assert_eq!(reg.power, PowerState::On);
    done!("adopt", p.adopt(&h, &deployment));
    let node = ironic.node("ns~node").unwrap();
    assert_eq!(node["provision_state"], "active");
    assert_eq!(
        node["instance_info"]["boot_iso"],
        files.url("live.iso").as_str()
    );
    assert_eq!(sushy.changes(), before, "adoption changed the machine");
    assert_eq!(sushy.system(SUSHY_SYSTEM_0)["PowerState"], "On");
    // Provisioning the same image again is already done: nothing is deployed.
    done!("provision after adoption", p.provision(&h, &deployment));
    assert_eq!(sushy.changes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_recovers_when_ironic_loses_its_database() {
    let sushy = Sushy::start(2, "admin:password");
    let files = FileServer::start();
    let ironic = Ironic::start();
    let p = provisioner(&ironic);
    let ready = host(&sushy, "ready", SYSTEM_1, "password");
    let deployed = host(&sushy, "deployed", SUSHY_SYSTEM_0, "password");
    to_available(&p, &ready).await;
    to_available(&p, &deployed).await;
    done!(
        "provision",
        p.provision(&deployed, &live_iso(&files.url("live.iso")))
    );
    let before = sushy.changes();

    ironic.restart_with_empty_database();
    assert!(ironic.node("ns~ready").is_none());
    assert!(p.is_ready().await);

    // Steady-state polling alone brings both back: the available host re-registered and made
    // available, the provisioned one adopted.
    let mut rounds = 0;
    loop {
        // A transient error here is retried by the next poll, as the controller would.
        let _ = p.power_state(&ready).await;
        let _ = p.power_state(&deployed).await;
        if ironic.state("ns~ready").as_deref() == Some("available")
            && ironic.state("ns~deployed").as_deref() == Some("active")
        {
            break;
        }
        rounds += 1;
        assert!(
            rounds < 600,
            "hosts never recovered: {:?} {:?}",
            ironic.state("ns~ready"),
            ironic.state("ns~deployed")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(p.power_state(&ready).await.unwrap(), PowerState::Off);
    assert_eq!(p.power_state(&deployed).await.unwrap(), PowerState::On);
    assert_eq!(
        count(&sushy.changes(), "InsertMedia"),
        count(&before, "InsertMedia"),
        "the provisioned host was deployed again"
    );
    assert_eq!(sushy.system(SUSHY_SYSTEM_0)["PowerState"], "On");
    assert_eq!(sushy.system(SYSTEM_1)["PowerState"], "Off");
}

/// Calls `call` until Ironic shows `want` for the node, failing on any of `failed` (with
/// Ironic's last_error) or on an error from the backend.
macro_rules! until_state {
    ($ironic:expr, $node:expr, $want:expr, $failed:expr, $call:expr) => {{
        let mut rounds = 0;
        loop {
            let state = $ironic.state($node).unwrap_or_default();
            if state == $want {
                break;
            }
            if $failed.contains(&state.as_str()) {
                let node = $ironic.node($node).unwrap_or_default();
                panic!("{} went to {state}: {}", $node, node["last_error"]);
            }
            if let Err(e) = $call.await {
                panic!("{}: {e}", $node);
            }
            rounds += 1;
            assert!(rounds < 900, "{} never reached {}: {state}", $node, $want);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }};
}

/// Cleaning and disk images run inside Ironic's agent ramdisk. Without one configured both are
/// refused up front, naming the flags (Ironic untouched, not a failure loop in Ironic); with
/// one, Ironic gets it in driver_info, and cleaning and a qcow2 deploy go as far as waiting
/// for the agent to call back, with instance_info as metal3 writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleaning_and_disk_images_reach_the_agent_ramdisk_when_it_is_configured() {
    let sushy = Sushy::start(2, "admin:password");
    let files = FileServer::start();
    std::fs::write(files.dir.path().join("ipa.kernel"), b"kernel").unwrap();
    std::fs::write(files.dir.path().join("ipa.initramfs"), b"initramfs").unwrap();
    std::fs::write(files.dir.path().join("os.qcow2"), b"QFI\xfb").unwrap();
    let ironic = Ironic::start();
    let network_boot = |name: &str, uuid: &str| {
        let mut h = host(&sushy, name, uuid, "password");
        h.bmc = BmcAddress::parse(&sushy.address(uuid)).unwrap();
        h
    };
    let qcow2 = Deployment {
        image: Some(Image {
            url: files.url("os.qcow2"),
            checksum: Some("a".repeat(64)),
            checksum_type: Some(ferrometal_api::ChecksumType::Sha256),
            format: Some(ImageFormat::Qcow2),
            oci_auth_secret_name: None,
        }),
        ..Deployment::default()
    };

    // No agent configured.
    let bare = provisioner(&ironic);
    let mut cleaned = network_boot("clean", SUSHY_SYSTEM_0);
    cleaned.automated_cleaning_mode = AutomatedCleaningMode::Metadata;
    done!("register", bare.register(&cleaned, false));
    let err = bare.prepare(&cleaned).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported, "{err}");
    for needed in [
        "--deploy-kernel-url",
        "--deploy-ramdisk-url",
        "DEPLOY_KERNEL_URL",
        "spec.automatedCleaningMode: disabled",
    ] {
        assert!(err.message.contains(needed), "{needed} not in: {err}");
    }
    assert_eq!(
        err.spec_fault, None,
        "cleaning is the installation's, not the spec's"
    );
    assert_eq!(ironic.state("ns~clean").as_deref(), Some("manageable"));

    let mut image = network_boot("image", SYSTEM_1);
    image.boot_mode = Some(ferrometal_api::BootMode::UefiSecureBoot);
    // Network boot needs the port Ironic creates from bootMACAddress.
    image.boot_mac_address = Some("52:54:00:12:34:56".into());
    to_available(&bare, &image).await;
    let err = bare.provision(&image, &qcow2).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported, "{err}");
    assert!(
        err.message
            .starts_with("writing a disk image runs Ironic's agent ramdisk"),
        "{err}"
    );
    assert!(err.message.contains("live-iso"), "{err}");
    assert_eq!(err.spec_fault, Some(SpecFault::ImageFormatNotSupported));
    assert_eq!(ironic.state("ns~image").as_deref(), Some("available"));

    // With the agent configured (as serve/controller do from the flags).
    let mut o = IronicOptions::new(ironic.endpoint());
    o.poll_interval = Duration::from_millis(200);
    o.cache_ttl = Duration::from_millis(100);
    o.deploy_kernel = Some(files.url("ipa.kernel"));
    o.deploy_ramdisk = Some(files.url("ipa.initramfs"));
    let p = IronicProvisioner::new(o);
    done!("register again", p.register(&cleaned, false));
    until_state!(
        ironic,
        "ns~clean",
        "clean wait",
        ["clean failed"],
        p.prepare(&cleaned)
    );
    let node = ironic.node("ns~clean").unwrap();
    assert_eq!(
        node["driver_info"]["deploy_kernel"],
        files.url("ipa.kernel")
    );
    assert_eq!(
        node["driver_info"]["deploy_ramdisk"],
        files.url("ipa.initramfs")
    );
    assert_eq!(node["automated_clean"], true);

    done!("register image host again", p.register(&image, false));
    until_state!(
        ironic,
        "ns~image",
        "wait call-back",
        ["deploy failed"],
        p.provision(&image, &qcow2)
    );
    let node = ironic.node("ns~image").unwrap();
    let info = &node["instance_info"];
    assert_eq!(info["image_source"], files.url("os.qcow2"));
    assert_eq!(info["image_os_hash_algo"], "sha256");
    assert_eq!(info["image_os_hash_value"], "a".repeat(64));
    assert_eq!(info["image_disk_format"], "qcow2");
    assert_eq!(info["capabilities"]["secure_boot"], "true");
    assert_eq!(info["capabilities"]["boot_mode"], "uefi");
    assert_eq!(node["deploy_interface"], "direct");
    assert_eq!(
        node["properties"]["capabilities"],
        "boot_mode:uefi,secure_boot:true"
    );
    // Ironic booted the host to run the agent: it is on and set to network boot.
    assert_eq!(sushy.system(SYSTEM_1)["PowerState"], "On");
}
