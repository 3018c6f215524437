//! The provider against libvirt's own test driver (`test:///default`): libvirt's client library
//! loaded as in production, with its in-memory hypervisor, so every call crosses the real C API
//! without a daemon or a VM (the VM lab's hybrid-claim tests boot real ones). The test driver
//! refuses uploads, resizes and NVRAM removal, which exercises the error paths too.

use ferrometal_libvirt::{DomainSpec, Error, Hypervisor, Names, Power, names};

const URI: &str = "test:///default";
/// The one pool libvirt's test driver starts with.
const POOL: &str = "default-pool";

fn spec(n: &Names) -> DomainSpec {
    DomainSpec {
        name: n.domain.clone(),
        domain_type: "test".into(),
        cpus: 1,
        memory_mib: 64,
        uefi: false,
        pool: POOL.into(),
        disk_volume: n.disk.clone(),
        disk_format: "raw".into(),
        config_volume: Some(n.config.clone()),
        network: String::new(),
        console_log: "/nonexistent/console.log".into(),
        claim: "tenant/web".into(),
    }
}

#[test]
fn a_domain_is_defined_powered_and_removed() {
    let hv = Hypervisor::connect(URI).unwrap();
    let n = names("fm-test-", "power");
    assert_eq!(hv.power(&n.domain).unwrap(), None);
    assert!(hv.macs(&n.domain).unwrap().is_empty());
    assert!(!hv.anything_left(&n, POOL).unwrap());
    // Power requests for a domain that is not there change nothing and do not fail.
    hv.power_on(&n.domain).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), None);

    hv.define(&spec(&n)).unwrap();
    // Defined again (a step done twice): left as it is.
    hv.define(&spec(&n)).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), Some(Power::Off));
    assert!(hv.anything_left(&n, POOL).unwrap());
    let macs = hv.macs(&n.domain).unwrap();
    assert_eq!(macs.len(), 1, "{macs:?}");
    assert!(macs[0].starts_with("52:54:00:"), "{macs:?}");

    hv.power_on(&n.domain).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), Some(Power::On));
    hv.power_on(&n.domain).unwrap();
    hv.reset(&n.domain).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), Some(Power::On));
    hv.power_off(&n.domain).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), Some(Power::Off));
    hv.power_off(&n.domain).unwrap();
    // A reset of a domain that is off starts it, as a BMC's ForceRestart does.
    hv.reset(&n.domain).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), Some(Power::On));

    // Running, and the test driver refuses undefining with NVRAM: stopped, then undefined
    // plainly.
    hv.remove(&n, POOL).unwrap();
    assert_eq!(hv.power(&n.domain).unwrap(), None);
    assert!(!hv.anything_left(&n, POOL).unwrap());
    // Removing what is gone is done again without an error.
    hv.remove(&n, POOL).unwrap();
}

#[test]
fn a_volume_made_for_an_upload_the_host_refuses_is_reported_and_removed() {
    let hv = Hypervisor::connect(URI).unwrap();
    let n = names("fm-test-", "volume");
    let image = std::env::temp_dir().join(format!("fm-libvirt-test-{}", std::process::id()));
    std::fs::write(&image, b"not a disk").unwrap();
    let err = hv
        .upload_volume(POOL, &n.disk, "raw", &image, 1 << 20)
        .unwrap_err();
    std::fs::remove_file(&image).unwrap();
    match &err {
        Error::Call { what, message } => {
            assert_eq!(what, &format!("uploading to {}", n.disk));
            assert!(message.contains("not supported"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The volume was created before the upload was refused: it is what is left.
    assert!(hv.anything_left(&n, POOL).unwrap());
    hv.remove(&n, POOL).unwrap();
    assert!(!hv.anything_left(&n, POOL).unwrap());
}

#[test]
fn failures_name_what_was_asked_and_libvirts_reason() {
    match Hypervisor::connect("qemu+tcp://127.0.0.1:1/system") {
        Err(Error::Unreachable(why)) => assert!(!why.is_empty()),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("connected to a closed port"),
    }
    let hv = Hypervisor::connect(URI).unwrap();
    let n = names("fm-test-", "nopool");
    match hv.anything_left(&n, "no-such-pool") {
        Err(Error::Call { what, message }) => {
            assert_eq!(what, "looking up storage pool no-such-pool");
            assert!(message.contains("no-such-pool"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A name libvirt cannot be given is refused before it is called.
    match hv.power("fm-test-\0x") {
        Err(Error::Call { message, .. }) => assert!(message.contains("NUL"), "{message}"),
        other => panic!("{other:?}"),
    }
    // The definition libvirt refuses: its reason comes back with the domain's name.
    let bad = DomainSpec {
        domain_type: "no-such-hypervisor".into(),
        ..spec(&names("fm-test-", "bad"))
    };
    match hv.define(&bad) {
        Err(Error::Call { what, message }) => {
            assert_eq!(what, "defining domain fm-test-bad");
            assert!(!message.is_empty());
        }
        other => panic!("{other:?}"),
    }
}
