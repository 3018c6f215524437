//! Each annotation's observable behaviour: status, Events and the provisioner call log.

mod common;

use common::*;
use ferrometal_api::annotations as ann;
use ferrometal_api::{
    BareMetalHostStatus, HardwareData, InspectionMode, OperationalStatus, ProvisioningState as S,
};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::ErrorKind;
use ferrometal_provisioner::fixture::{FixtureProvisioner, Method};
use kube::api::Api;
use serde_json::json;

fn annotation(h: &ferrometal_api::BareMetalHost, key: &str) -> Option<String> {
    h.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_host_is_not_touched() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    h.create("paused", h.spec("bmc"), &[(ann::PAUSED, "")])
        .await;
    // A second host going all the way to available proves the controller ran meanwhile.
    h.available_host("witness").await;
    let paused = h.get("paused").await;
    assert!(paused.status.is_none(), "no status write");
    assert!(paused.metadata.finalizers.is_none(), "no finalizer");
    assert!(
        h.fixture.calls().iter().all(|(k, _)| k != &key("paused")),
        "no BMC call"
    );
    // Unpausing lets it go.
    h.annotate("paused", ann::PAUSED, None).await;
    h.wait("paused", "available", |h| h.state() == S::Available)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_changed_while_paused_acts_at_unpause_not_at_the_next_poll() {
    // A poll interval no test waits out: power must follow `online` because of the unpause.
    let config = ferrometal_controller::ControllerConfig {
        power_poll_interval: std::time::Duration::from_secs(3600),
        ..fast_config()
    };
    let h = Harness::start_with(FixtureProvisioner::new(), config).await;
    h.available_host("p").await;
    h.annotate("p", ann::PAUSED, Some("metal3.io/capm3")).await;
    h.patch_spec("p", json!({"online": false})).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        h.fixture.power(&key("p")),
        Some(PowerState::On),
        "paused: untouched"
    );
    h.annotate("p", ann::PAUSED, None).await;
    h.wait("p", "off after the unpause", |x| {
        x.status.as_ref().is_some_and(|s| !s.powered_on)
    })
    .await;
    assert_eq!(h.fixture.power(&key("p")), Some(PowerState::Off));

    // The same for a provisioned host, paused and unpaused in one write with the change (as
    // a pivot's target sees it).
    h.patch_spec(
        "p",
        json!({"online": true, "image": {"url": "http://x/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("p", "provisioned and on", |x| {
        x.state() == S::Provisioned && x.status.as_ref().is_some_and(|s| s.powered_on)
    })
    .await;
    h.annotate("p", ann::PAUSED, Some("")).await;
    h.patch_spec("p", json!({"online": false})).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        h.fixture.power(&key("p")),
        Some(PowerState::On),
        "paused: untouched"
    );
    h.annotate("p", ann::PAUSED, None).await;
    h.wait("p", "provisioned host off after the unpause", |x| {
        x.status.as_ref().is_some_and(|s| !s.powered_on)
    })
    .await;
    assert_eq!(h.fixture.power(&key("p")), Some(PowerState::Off));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_annotation_restores_a_moved_host() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    let mut moved = BareMetalHostStatus::default();
    moved.provisioning.state = S::Available;
    moved.provisioning.id = "moved-id".into();
    moved.powered_on = true;
    let text = serde_json::to_string(&moved).unwrap();
    h.create("moved", h.spec("bmc"), &[(ann::STATUS, &text)])
        .await;
    let host = h
        .wait("moved", "restored and annotation gone", |h| {
            annotation(h, ann::STATUS).is_none()
                && h.state() == S::Available
                && h.metadata.finalizers.is_some()
        })
        .await;
    assert_eq!(host.status.unwrap().provisioning.id, "moved-id");
    h.wait_event("moved", "StatusRestored").await;
    // Registered again (the provisioner is new to it) but never re-inspected.
    h.until("registered", || h.fixture.is_registered(&key("moved")))
        .await;
    assert_eq!(h.fixture.count(&key("moved"), Method::Inspect), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardwaredetails_fills_hardware_when_inspection_is_disabled() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    let mut spec = h.spec("bmc");
    spec.inspection_mode = Some(InspectionMode::Disabled);
    h.create(
        "hw",
        spec,
        &[(ann::HARDWARE_DETAILS, r#"{"ramMebibytes": 4096, "cpu": {"arch": "aarch64", "model": "x", "clockMegahertz": 2000, "count": 8}}"#)],
    )
    .await;
    let host = h
        .wait("hw", "available", |h| h.state() == S::Available)
        .await;
    assert!(annotation(&host, ann::HARDWARE_DETAILS).is_none());
    assert_eq!(host.status.unwrap().hardware.unwrap().ram_mebibytes, 4096);
    let hd: Api<HardwareData> = Api::namespaced(h.client.clone(), NS);
    assert_eq!(
        hd.get("hw")
            .await
            .unwrap()
            .spec
            .hardware
            .unwrap()
            .cpu
            .unwrap()
            .arch,
        "aarch64"
    );
    assert_eq!(h.fixture.count(&key("hw"), Method::Inspect), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_annotation_reinspects_an_available_host() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("ri").await;
    let before = h.fixture.count(&key("ri"), Method::Inspect);
    h.annotate("ri", ann::INSPECT, Some("")).await;
    h.wait("ri", "annotation consumed", |h| {
        annotation(h, ann::INSPECT).is_none()
    })
    .await;
    h.wait("ri", "available again", |h| {
        h.state() == S::Available
            && h.status
                .as_ref()
                .unwrap()
                .operation_history
                .inspect
                .end
                .is_some()
    })
    .await;
    assert!(h.fixture.count(&key("ri"), Method::Inspect) > before);
    // The recorder folds a repeated Event into a series.
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.client.clone(), NS);
    let mut seen = 0;
    for _ in 0..500 {
        seen = api
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("ri"))
            .filter(|e| e.reason.as_deref() == Some("InspectionComplete"))
            .map(|e| e.series.as_ref().map_or(1, |s| s.count))
            .sum::<i32>();
        if seen >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(seen >= 2, "inspection completed twice: {seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_and_reattach() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("d").await;
    let k = key("d");
    h.annotate("d", ann::DETACHED, Some("")).await;
    h.wait("d", "detached", |h| {
        h.status.as_ref().unwrap().operational_status == OperationalStatus::Detached
    })
    .await;
    assert!(!h.fixture.is_registered(&k));
    assert_eq!(h.fixture.power(&k), Some(PowerState::On), "power untouched");
    assert_eq!(h.fixture.count(&k, Method::Deprovision), 0);
    h.wait_event("d", "Detached").await;
    // While detached nothing reaches the BMC.
    h.fixture.clear_calls();
    h.annotate("d", "example.com/poke", Some("1")).await;
    h.wait("d", "seen", |h| annotation(h, "example.com/poke").is_some())
        .await;
    // Re-attach: registered again, management resumes.
    h.annotate("d", ann::DETACHED, None).await;
    h.wait("d", "attached", |h| {
        h.status.as_ref().unwrap().operational_status == OperationalStatus::Ok
    })
    .await;
    h.until("registered again", || h.fixture.is_registered(&k))
        .await;
    h.wait_event("d", "Attached").await;
    assert_eq!(h.get("d").await.state(), S::Available);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_detached_host_skips_deprovision_and_power_off() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("dd").await;
    h.patch_spec(
        "dd",
        json!({"image": {"url": "http://i/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("dd", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    h.annotate("dd", ann::DETACHED, Some(r#"{"deleteAction":"delete"}"#))
        .await;
    h.wait("dd", "detached", |h| {
        h.status.as_ref().unwrap().operational_status == OperationalStatus::Detached
    })
    .await;
    h.fixture.clear_calls();
    h.delete("dd").await;
    h.wait_gone("dd").await;
    let k = key("dd");
    assert!(
        h.fixture.calls().iter().all(|(kk, _)| kk != &k),
        "{:?}",
        h.fixture.calls()
    );
    assert_eq!(h.fixture.power(&k), Some(PowerState::On));
    assert!(h.fixture.provisioned_image(&k).is_some(), "disks untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_delete_delay_waits_for_the_annotation() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("dl").await;
    h.annotate("dl", ann::DETACHED, Some(r#"{"deleteAction":"delay"}"#))
        .await;
    h.wait("dl", "detached", |h| {
        h.status.as_ref().unwrap().operational_status == OperationalStatus::Detached
    })
    .await;
    h.delete("dl").await;
    // Other hosts keep moving while this one waits.
    h.available_host("other").await;
    assert!(h.hosts.get("dl").await.is_ok(), "delete delayed");
    h.annotate("dl", ann::DETACHED, None).await;
    h.wait_gone("dl").await;
    // Re-attached for the delete: powered off before it went.
    assert_eq!(h.fixture.power(&key("dl")), Some(PowerState::Off));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_reboot_powers_off_then_on_and_is_removed() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("rb").await;
    h.patch_spec(
        "rb",
        json!({"image": {"url": "http://i/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("rb", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    let k = key("rb");
    let offs = h.fixture.count(&k, Method::PowerOff);
    let ons = h.fixture.count(&k, Method::PowerOn);
    h.annotate("rb", ann::REBOOT, Some("")).await;
    h.wait("rb", "reboot done", |h| {
        annotation(h, ann::REBOOT).is_none() && h.status.as_ref().unwrap().powered_on
    })
    .await;
    h.until("powered on again", || {
        h.fixture.count(&k, Method::PowerOn) > ons
    })
    .await;
    assert!(h.fixture.count(&k, Method::PowerOff) > offs);
    assert_eq!(h.fixture.power(&k), Some(PowerState::On));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_reboot_holds_the_host_off_until_removed() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("kr").await;
    h.patch_spec(
        "kr",
        json!({"image": {"url": "http://i/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("kr", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    let k = key("kr");
    h.annotate("kr", "reboot.metal3.io/capm3", Some(r#"{"mode":"hard"}"#))
        .await;
    h.wait("kr", "off", |h| !h.status.as_ref().unwrap().powered_on)
        .await;
    assert_eq!(h.fixture.power(&k), Some(PowerState::Off));
    // A poll later it is still off, annotation still there.
    let polls = h.fixture.count(&k, Method::PowerState);
    h.until("a poll", || h.fixture.count(&k, Method::PowerState) > polls)
        .await;
    let host = h.get("kr").await;
    assert!(annotation(&host, "reboot.metal3.io/capm3").is_some());
    assert_eq!(h.fixture.power(&k), Some(PowerState::Off));
    h.annotate("kr", "reboot.metal3.io/capm3", None).await;
    h.wait("kr", "on", |h| h.status.as_ref().unwrap().powered_on)
        .await;
    assert_eq!(h.fixture.power(&k), Some(PowerState::On));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_runs_once_and_is_removed() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("op").await;
    let k = key("op");
    h.annotate("op", ann::OPERATION, Some("PxeOnce")).await;
    h.wait("op", "operation consumed", |h| {
        annotation(h, ann::OPERATION).is_none()
    })
    .await;
    assert_eq!(h.fixture.count(&k, Method::Operation), 1);
    assert_eq!(h.fixture.boot_once(&k), Some("Pxe"));
    let (kind, _, note) = h.wait_event("op", "OperationSucceeded").await;
    assert_eq!(kind, "Normal");
    assert!(note.contains("PxeOnce"));
    // Later reconciles do not run it again.
    let polls = h.fixture.count(&k, Method::PowerState);
    h.until("a poll", || h.fixture.count(&k, Method::PowerState) > polls)
        .await;
    assert_eq!(h.fixture.count(&k, Method::Operation), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_failure_keeps_it_and_retries() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("opf").await;
    let k = key("opf");
    h.fixture
        .fail_times(&k, Method::Operation, ErrorKind::Unreachable, 2);
    h.annotate("opf", ann::OPERATION, Some("PowerCycle")).await;
    h.wait("opf", "operation consumed", |h| {
        annotation(h, ann::OPERATION).is_none()
    })
    .await;
    assert_eq!(h.fixture.count(&k, Method::Operation), 3);
    let (kind, _, _) = h.wait_event("opf", "OperationFailed").await;
    assert_eq!(kind, "Warning");
    h.wait_event("opf", "OperationSucceeded").await;
    let host = h
        .wait("opf", "error cleared", |h| {
            h.status.as_ref().unwrap().error_count == 0
        })
        .await;
    assert_eq!(
        host.status.unwrap().operational_status,
        OperationalStatus::Ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_of_an_off_host_is_a_recorded_no_op() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("off").await;
    h.patch_spec("off", json!({"online": false})).await;
    h.wait("off", "off", |h| !h.status.as_ref().unwrap().powered_on)
        .await;
    h.annotate("off", ann::OPERATION, Some("GracefulRestart"))
        .await;
    h.wait("off", "operation consumed", |h| {
        annotation(h, ann::OPERATION).is_none()
    })
    .await;
    assert_eq!(h.fixture.count(&key("off"), Method::Operation), 0);
    let (_, _, note) = h.wait_event("off", "OperationSkipped").await;
    assert!(note.contains("powered off"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_operation_warns_and_is_removed() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("bad").await;
    h.annotate("bad", ann::OPERATION, Some("Explode")).await;
    h.wait("bad", "operation removed", |h| {
        annotation(h, ann::OPERATION).is_none()
    })
    .await;
    let (kind, _, note) = h.wait_event("bad", "UnknownOperation").await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("Explode"));
    assert_eq!(h.fixture.count(&key("bad"), Method::Operation), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn externally_provisioned_both_ways() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    let mut spec = h.spec("bmc");
    spec.externally_provisioned = true;
    h.create("ext", spec, &[]).await;
    h.wait("ext", "externally provisioned", |h| {
        h.state() == S::ExternallyProvisioned
    })
    .await;
    let k = key("ext");
    assert_eq!(h.fixture.count(&k, Method::Inspect), 0);
    assert_eq!(h.fixture.count(&k, Method::Provision), 0);
    // Clearing the flag with an image: provisioned without writing the disks.
    h.patch_spec(
        "ext",
        json!({"externallyProvisioned": false, "image": {"url": "http://i/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("ext", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    assert_eq!(h.fixture.count(&k, Method::Provision), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_data_from_another_namespace_is_a_provisioning_error() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("ud").await;
    h.patch_spec(
        "ud",
        json!({
            "image": {"url": "http://i/live.iso", "format": "live-iso"},
            "userData": {"name": "cloud-init", "namespace": "elsewhere"}
        }),
    )
    .await;
    let host = h
        .wait("ud", "provisioning error", |h| {
            h.status.as_ref().unwrap().error_type.is_some()
        })
        .await;
    let status = host.status.unwrap();
    assert_eq!(status.provisioning.state, S::Provisioning);
    assert!(
        status.error_message.contains("spec.userData"),
        "{}",
        status.error_message
    );
    assert_eq!(h.fixture.count(&key("ud"), Method::Provision), 0);
}
