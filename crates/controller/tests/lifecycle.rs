//! A host's whole life against the embedded API server and the fixture provisioner.

mod common;

use common::*;
use ferrometal_api::annotations as ann;
use ferrometal_api::{HardwareData, OperationalStatus, ProvisioningState as S};
use ferrometal_provisioner::fixture::{FixtureProvisioner, Method};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_inspect_provision_deprovision_delete() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    let host = h.available_host("node-0").await;
    let status = host.status.as_ref().unwrap();
    assert_eq!(host.finalizers(), [ann::FINALIZER]);
    assert_eq!(status.operational_status, OperationalStatus::Ok);
    assert_eq!(status.provisioning.id, "fixture-default~node-0");
    assert!(status.powered_on, "online: true is enforced");
    assert_eq!(
        status
            .good_credentials
            .as_ref()
            .unwrap()
            .credentials
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("node-0-bmc")
    );
    assert!(status.operation_history.register.end.is_some());
    assert!(status.operation_history.inspect.end.is_some());
    let available = status
        .conditions
        .iter()
        .find(|c| c.type_ == "AvailableForProvisioning")
        .unwrap();
    assert_eq!(available.status, "True");

    // Inspection produced HardwareData owned by the host, and status.hardware.
    let hd: Api<HardwareData> = Api::namespaced(h.client.clone(), NS);
    let data = hd.get("node-0").await.unwrap();
    let owner = &data.owner_references()[0];
    assert_eq!(owner.kind, "BareMetalHost");
    assert_eq!(Some(owner.uid.clone()), host.meta().uid);
    assert_eq!(
        data.spec.hardware.as_ref().unwrap().ram_mebibytes,
        status.hardware.as_ref().unwrap().ram_mebibytes
    );

    // Provision a live ISO.
    h.patch_spec(
        "node-0",
        json!({"image": {"url": "http://images/live.iso", "format": "live-iso"}}),
    )
    .await;
    let host = h
        .wait("node-0", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    let status = host.status.unwrap();
    assert_eq!(
        status.provisioning.image.as_ref().unwrap().url,
        "http://images/live.iso"
    );
    assert_eq!(
        h.fixture.provisioned_image(&key("node-0")).as_deref(),
        Some("http://images/live.iso")
    );
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Provisioned" && c.status == "True")
    );
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == "Provisioned"),
        "Ready once provisioned, as metal3"
    );

    // Remove the image: deprovisioned back to available (and powered on again: online).
    h.patch_spec("node-0", json!({"image": null})).await;
    h.wait("node-0", "available after deprovisioning", |h| {
        h.state() == S::Available && h.status.as_ref().unwrap().provisioning.image.is_none()
    })
    .await;
    assert_eq!(h.fixture.provisioned_image(&key("node-0")), None);
    assert!(h.fixture.count(&key("node-0"), Method::Deprovision) >= 1);

    // Delete: powered off, removed from the provisioner, finalizer gone.
    h.delete("node-0").await;
    h.wait_gone("node-0").await;
    assert!(!h.fixture.is_registered(&key("node-0")));
    assert!(h.fixture.count(&key("node-0"), Method::Delete) >= 1);

    // Every transition left an Event, in order.
    let reasons: Vec<String> = h.events("node-0").await.into_iter().map(|e| e.1).collect();
    let expected = [
        "Registering",
        "Registered",
        "Inspecting",
        "InspectionComplete",
        "Preparing",
        "Available",
        "Provisioning",
        "ProvisioningComplete",
        "Provisioned",
        "Deprovisioning",
        "DeprovisioningComplete",
        "PoweringOffBeforeDelete",
        "Deleting",
        "Deleted",
    ];
    let mut at = 0;
    for want in expected {
        match reasons[at..].iter().position(|r| r == want) {
            Some(i) => at += i + 1,
            None => panic!("no {want} Event after position {at}: {reasons:?}"),
        }
    }

    let metrics = ferrometal_controller::metrics_text();
    assert!(
        metrics.contains("ferrometal_host_reconciles_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ferrometal_hosts{state=\"available\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("node-0"), "no host names in metrics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_without_bmc_is_unmanaged_and_deletes_cleanly() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    let mut spec = h.spec("none");
    spec.bmc = None;
    h.create("bare", spec, &[]).await;
    h.wait("bare", "unmanaged", |h| h.state() == S::Unmanaged)
        .await;
    h.delete("bare").await;
    h.wait_gone("bare").await;
    assert!(h.fixture.calls().iter().all(|(k, _)| k != &key("bare")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_back_off_then_recover_when_the_secret_is_fixed() {
    // A long backoff: recovery must come from the Secret watch, not from a retry timer.
    let mut config = fast_config();
    config.backoff_base = std::time::Duration::from_millis(300);
    config.backoff_cap = std::time::Duration::from_secs(3600);
    let h = Harness::start_with(FixtureProvisioner::new(), config).await;
    h.secret("creds", "wrong").await;
    h.create("node-1", h.spec("creds"), &[]).await;
    let host = h
        .wait("node-1", "in registration error, retried", |h| {
            h.status
                .as_ref()
                .is_some_and(|s| s.error_type.is_some() && s.error_count >= 3)
        })
        .await;
    let status = host.status.unwrap();
    assert_eq!(status.provisioning.state, S::Registering);
    assert_eq!(status.operational_status, OperationalStatus::Error);
    assert_eq!(
        status.error_type.map(|t| t.as_str()),
        Some("registration error")
    );
    assert!(
        status.error_message.contains("401"),
        "{}",
        status.error_message
    );
    assert!(
        !status.error_message.contains("wrong"),
        "no secrets in status"
    );
    assert!(status.good_credentials.is_none());
    assert!(status.tried_credentials.is_some());
    let (kind, _, note) = h.wait_event("node-1", "RegistrationError").await;
    assert_eq!(kind, "Warning");
    assert!(!note.contains("wrong"));
    // Issue 28 (10): the hosts gauge counts it as in error, not as registering.
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = ferrometal_controller::metrics_text();
        if metrics.contains("ferrometal_hosts{state=\"registration error\"} 1") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(
        metrics.contains("ferrometal_hosts{state=\"registration error\"} 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("ferrometal_hosts{state=\"registering\"} 1"),
        "{metrics}"
    );

    let fixed = h.secret("creds", GOOD_PASSWORD).await;
    let host = h
        .wait("node-1", "available after the fix", |h| {
            h.state() == S::Available
        })
        .await;
    let status = host.status.unwrap();
    assert_eq!(status.error_count, 0);
    assert_eq!(status.error_type, None);
    // The gauge follows the status write: polled, not raced.
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = ferrometal_controller::metrics_text();
        if metrics.contains("ferrometal_hosts{state=\"registration error\"} 0") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(
        metrics.contains("ferrometal_hosts{state=\"registration error\"} 0"),
        "{metrics}"
    );
    assert_eq!(
        status.good_credentials.unwrap().credentials_version,
        fixed.metadata.resource_version
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_secret_is_a_registration_error_naming_it() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.create("node-2", h.spec("nowhere"), &[]).await;
    let host = h
        .wait("node-2", "in registration error", |h| {
            h.status.as_ref().is_some_and(|s| s.error_type.is_some())
        })
        .await;
    let msg = host.status.unwrap().error_message;
    assert!(
        msg.contains("default/nowhere") && msg.contains("not found"),
        "{msg}"
    );
    // Creating it lets the host proceed without help.
    h.secret("nowhere", GOOD_PASSWORD).await;
    h.wait("node-2", "available", |h| h.state() == S::Available)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_capacity_delays_then_proceeds() {
    // One slot; inspection takes a while, so the second host has to wait for it.
    let fixture = FixtureProvisioner::new()
        .with_capacity(1)
        .with_waits(Method::Inspect, 40)
        .with_requeue(std::time::Duration::from_millis(20));
    let h = Harness::start(fixture).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    h.create("a", h.spec("bmc"), &[]).await;
    h.create("b", h.spec("bmc"), &[]).await;
    let mut delayed = None;
    for _ in 0..1500 {
        for name in ["a", "b"] {
            let host = h.get(name).await;
            if host
                .status
                .as_ref()
                .is_some_and(|s| s.operational_status == OperationalStatus::Delayed)
            {
                delayed = Some(host);
            }
        }
        if delayed.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let delayed = delayed.expect("one host delayed");
    assert_eq!(delayed.state(), S::Inspecting);
    let name = delayed.name_any();
    h.wait_event(&name, "Delayed").await;
    for name in ["a", "b"] {
        available_and_ok(&h, name).await;
    }
}

/// Waits for host `name` to be available, its operational status back to OK (no longer
/// delayed).
async fn available_and_ok(h: &Harness, name: &str) {
    let host = h
        .wait(name, "available", |h| h.state() == S::Available)
        .await;
    assert_eq!(
        host.status.unwrap().operational_status,
        OperationalStatus::Ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_given_back_goes_to_the_delayed_host_at_once() {
    // One slot and three hosts; the delayed ones would retry only after an hour. Each
    // inspection that ends hands its slot to the next host waiting, so all three get through.
    let fixture = FixtureProvisioner::new()
        .with_capacity(1)
        .with_waits(Method::Inspect, 20)
        .with_requeue(std::time::Duration::from_millis(20));
    let mut config = fast_config();
    config.delayed_retry = std::time::Duration::from_secs(3600);
    let h = Harness::start_with(fixture, config).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    for name in ["a", "b", "c"] {
        h.create(name, h.spec("bmc"), &[]).await;
    }
    let mut delayed = Vec::new();
    for name in ["a", "b", "c"] {
        available_and_ok(&h, name).await;
        if h.has_event(name, "Delayed").await {
            delayed.push(name);
        }
    }
    // At least one waited for the slot (typically two): what let it through within the hour
    // was a wake-up when the slot came free.
    assert!(!delayed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bmc_failures_set_power_management_error_and_recover() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("node-3").await;
    let k = key("node-3");
    h.fixture.fail(
        &k,
        Method::PowerState,
        ferrometal_provisioner::ErrorKind::Unreachable,
    );
    let host = h
        .wait("node-3", "in power management error", |h| {
            h.status.as_ref().is_some_and(|s| s.error_count >= 2)
        })
        .await;
    let status = host.status.unwrap();
    assert_eq!(
        status.error_type.map(|t| t.as_str()),
        Some("power management error")
    );
    assert_eq!(status.operational_status, OperationalStatus::Error);
    h.fixture.heal(&k, Method::PowerState);
    let host = h
        .wait("node-3", "recovered", |h| {
            h.status.as_ref().is_some_and(|s| s.error_count == 0)
        })
        .await;
    assert_eq!(
        host.status.unwrap().operational_status,
        OperationalStatus::Ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_is_enforced_with_one_poll_per_interval() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("node-4").await;
    let k = key("node-4");
    // Someone pressed the power button: the next poll notices and powers it back on.
    h.fixture.set_power(&k, ferrometal_bmc::PowerState::Off);
    let before = h.fixture.count(&k, Method::PowerOn);
    h.until("powered back on", || {
        h.fixture.count(&k, Method::PowerOn) > before
    })
    .await;
    h.wait("node-4", "on", |h| h.status.as_ref().unwrap().powered_on)
        .await;
    // online: false powers it off.
    h.patch_spec("node-4", json!({"online": false})).await;
    h.wait("node-4", "off", |h| !h.status.as_ref().unwrap().powered_on)
        .await;
    assert_eq!(h.fixture.power(&k), Some(ferrometal_bmc::PowerState::Off));
    // Steady state: power polls only, no status writes for them, and one reconcile per poll
    // (a poll that finds the power as recorded is settled where it ran). Each test runs in a
    // process of its own, so the counter is this host's.
    let rv = h.get("node-4").await.metadata.resource_version;
    let reconciles = ferrometal_controller::metrics().reconciles.get();
    h.fixture.clear_calls();
    h.until("three polls", || {
        h.fixture.count(&k, Method::PowerState) >= 3
    })
    .await;
    let polls = h.fixture.count(&k, Method::PowerState) as u64;
    let spent = ferrometal_controller::metrics().reconciles.get() - reconciles;
    // One more reconcile than polls at most: the next poll's, whose call was not made yet.
    assert!(spent <= polls + 1, "{spent} reconciles for {polls} polls");
    let calls = h.fixture.calls();
    assert!(
        calls
            .iter()
            .filter(|(kk, _)| kk == &k)
            .all(|(_, m)| *m == "power_state"),
        "{calls:?}"
    );
    assert_eq!(h.get("node-4").await.metadata.resource_version, rv);
}

/// From creation to available a host is reconciled once per BMC call (register, inspect,
/// prepare, each as often as the BMC asks to be asked again, and power polls): adding its
/// finalizer, writing its HardwareData and making its firmware objects wake it for nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_host_is_reconciled_once_per_call_to_available() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    let k = key("node-7");
    // Each test runs in a process of its own, so the counter is this host's.
    let before = ferrometal_controller::metrics().reconciles.get();
    h.available_host("node-7").await;
    let spent = ferrometal_controller::metrics().reconciles.get() - before;
    let calls: Vec<_> = h
        .fixture
        .calls()
        .into_iter()
        .filter(|(kk, _)| kk == &k)
        .collect();
    for step in [Method::Register, Method::Inspect, Method::Prepare] {
        assert!(h.fixture.count(&k, step) >= 1, "{calls:?}");
    }
    // One more at most: a step's own write may wake the host while the task that made the
    // call is still finishing, which costs a reconcile that only notes it came.
    assert!(
        spent <= calls.len() as u64 + 1,
        "{spent} reconciles for {} calls to available: {calls:?}",
        calls.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_adopts_provisioned_hosts_without_reprovisioning() {
    let mut h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("keep").await;
    h.patch_spec(
        "keep",
        json!({"image": {"url": "http://images/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("keep", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    let k = key("keep");
    let provisions = h.fixture.count(&k, Method::Provision);
    h.restart(fast_config()).await;
    h.until("adopted by the new controller", || {
        h.fixture.count(&k, Method::Adopt) >= 1
    })
    .await;
    let polls = h.fixture.count(&k, Method::PowerState);
    h.until("steady again", || {
        h.fixture.count(&k, Method::PowerState) > polls
    })
    .await;
    assert_eq!(
        h.fixture.count(&k, Method::Provision),
        provisions,
        "not provisioned again"
    );
    assert_eq!(h.fixture.count(&k, Method::Deprovision), 0);
    assert_eq!(h.fixture.count(&k, Method::PowerOff), 0);
    assert_eq!(h.get("keep").await.state(), S::Provisioned);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selector_shards_hosts() {
    let mut config = fast_config();
    config.label_selector = Some("ferrometal.io/shard=a".into());
    let h = Harness::start_with(FixtureProvisioner::new(), config).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    let mut mine = ferrometal_api::BareMetalHost::new("mine", h.spec("bmc"));
    mine.metadata.labels = Some([("ferrometal.io/shard".to_string(), "a".to_string())].into());
    h.hosts.create(&Default::default(), &mine).await.unwrap();
    h.create("theirs", h.spec("bmc"), &[]).await;
    h.wait("mine", "available", |h| h.state() == S::Available)
        .await;
    assert!(h.get("theirs").await.status.is_none());
    assert!(h.fixture.calls().iter().all(|(k, _)| k != &key("theirs")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioner_not_ready_waits_then_proceeds() {
    let fixture = FixtureProvisioner::new();
    fixture.set_ready(false);
    let h = Harness::start(fixture).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    h.create("early", h.spec("bmc"), &[]).await;
    // Retried while not ready (every 100 ms here), without touching the BMC.
    h.until("retries while not ready", || {
        h.checked
            .readiness_checks
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 3
    })
    .await;
    assert!(h.fixture.calls().is_empty());
    assert!(h.get("early").await.status.is_none());
    h.fixture.set_ready(true);
    h.wait("early", "available", |h| h.state() == S::Available)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_provisioned_host_deprovisions_and_powers_off_first() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("gone").await;
    h.patch_spec(
        "gone",
        json!({"image": {"url": "http://images/live.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("gone", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    h.delete("gone").await;
    h.wait_gone("gone").await;
    let k = key("gone");
    let calls: Vec<_> = h
        .fixture
        .calls()
        .into_iter()
        .filter(|(kk, _)| kk == &k)
        .map(|(_, m)| m)
        .collect();
    let last = |m: &str| calls.iter().rposition(|c| *c == m);
    assert!(last("deprovision") < last("delete"), "{calls:?}");
    assert_eq!(h.fixture.provisioned_image(&k), None);
    assert_eq!(h.fixture.power(&k), Some(ferrometal_bmc::PowerState::Off));
    assert!(!h.fixture.is_registered(&k));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_change_deprovisions_then_provisions_the_new_image() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("swap").await;
    h.patch_spec(
        "swap",
        json!({"image": {"url": "http://images/a.iso", "format": "live-iso"}}),
    )
    .await;
    h.wait("swap", "provisioned with a", |h| {
        h.state() == S::Provisioned
    })
    .await;
    h.patch_spec(
        "swap",
        json!({"image": {"url": "http://images/b.iso", "format": "live-iso"}}),
    )
    .await;
    let host = h
        .wait("swap", "provisioned with b", |h| {
            h.state() == S::Provisioned
                && h.status
                    .as_ref()
                    .unwrap()
                    .provisioning
                    .image
                    .as_ref()
                    .unwrap()
                    .url
                    == "http://images/b.iso"
        })
        .await;
    assert!(
        host.status
            .unwrap()
            .operation_history
            .deprovision
            .end
            .is_some()
    );
    assert_eq!(
        h.fixture.provisioned_image(&key("swap")).as_deref(),
        Some("http://images/b.iso")
    );
    assert!(h.has_event("swap", "DeprovisioningComplete").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_user_data_secret_is_a_provisioning_error_until_created() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.available_host("ud").await;
    h.patch_spec(
        "ud",
        json!({
            "image": {"url": "http://images/a.iso", "format": "live-iso"},
            "userData": {"name": "ud-cloud-init"}
        }),
    )
    .await;
    let host = h
        .wait("ud", "provisioning error", |h| {
            h.status.as_ref().unwrap().error_type.is_some()
        })
        .await;
    let msg = host.status.unwrap().error_message;
    assert!(
        msg.contains("spec.userData") && msg.contains("default/ud-cloud-init"),
        "{msg}"
    );
    let mut s = k8s_openapi::api::core::v1::Secret::default();
    s.metadata.name = Some("ud-cloud-init".into());
    s.string_data = Some([("userData".to_string(), "#cloud-config\n".to_string())].into());
    h.secrets.create(&Default::default(), &s).await.unwrap();
    h.wait("ud", "provisioned", |h| h.state() == S::Provisioned)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_bmc_scheme_is_a_registration_error_naming_the_field() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    let mut spec = h.spec("bmc");
    spec.bmc.as_mut().unwrap().address = "telnet://10.0.0.9".into();
    h.create("odd", spec, &[]).await;
    let host = h
        .wait("odd", "registration error", |h| {
            h.status.as_ref().is_some_and(|s| s.error_type.is_some())
        })
        .await;
    let status = host.status.unwrap();
    assert_eq!(status.provisioning.state, S::Registering);
    assert!(
        status.error_message.contains("spec.bmc.address"),
        "{}",
        status.error_message
    );
    assert!(h.fixture.calls().is_empty(), "nothing sent to a backend");
}
