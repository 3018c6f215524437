//! End to end with real BMC peers: the controllers and the redfish provisioner against the
//! project's emulator and against sushy-tools, through the embedded API server. Every outcome is
//! checked on the BMC peer itself, not only in the host's status.

mod stack;

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, ErrorType, OperationalStatus, ProvisioningState as S};
use ferrometal_bmc::RequestCounter;
use ferrometal_emulator::{Emulator, EmulatorConfig, Fault};
use ferrometal_provisioner::redfish::{RedfishOptions, RedfishProvisioner};
use ferrometal_test_support::images::ImageServer;
use ferrometal_test_support::peers;
use kube::api::DeleteParams;
use serde_json::json;
use stack::{Milestone, Stack, operational};

/// The controllers with the redfish backend; the counter sees every BMC request it sends.
async fn redfish_stack() -> (Stack, Arc<RequestCounter>) {
    let requests = Arc::new(RequestCounter::default());
    let provisioner = Arc::new(RedfishProvisioner::new(RedfishOptions {
        request_timeout: Duration::from_millis(1500),
        observer: Some(requests.clone()),
        poll_interval: Duration::from_millis(200),
        step_interval: Duration::from_millis(50),
        ..RedfishOptions::default()
    }));
    (Stack::start(provisioner).await, requests)
}

/// Hung BMCs hold no reconcile worker: with two workers and six BMCs that never answer (each
/// call waits out a 30 s timeout), a healthy host's operation reaches its BMC while every one of
/// those calls is still hanging: before any of the hung hosts has even recorded an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_bmcs_do_not_hold_up_healthy_hosts() {
    const HUNG: usize = 6;
    let emu = emulator(HUNG + 1, 50).await;
    let provisioner = Arc::new(RedfishProvisioner::new(RedfishOptions {
        request_timeout: Duration::from_secs(30),
        poll_interval: Duration::from_millis(200),
        step_interval: Duration::from_millis(50),
        ..RedfishOptions::default()
    }));
    let stack = Stack::start_with(
        provisioner,
        ferrometal_controller::ControllerConfig {
            concurrency: 2,
            ..stack::fast_config()
        },
    )
    .await;
    stack.secret("bmc", "password").await;
    online_hosts(&stack, &emu, HUNG + 1).await;
    // The rack goes silent: every request to hosts 1..=6 now hangs.
    let before: Vec<u64> = (1..=HUNG).map(|i| emu.counters().system(i).get).collect();
    for i in 1..=HUNG {
        emu.set_fault(i, Some(Fault::Hang));
    }
    // Each hung host's next power poll has reached its BMC and hangs there.
    let reached = || (1..=HUNG).all(|i| emu.counters().system(i).get > before[i - 1]);
    for _ in 0..600 {
        if reached() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reached(), "a power poll hangs on every silent BMC");
    power_cycle(&stack, &emu, 0).await;
    for i in 1..=HUNG {
        let h = stack.hosts.get(&format!("n{i}")).await.unwrap();
        let status = h.status.unwrap();
        assert_eq!(
            (status.error_message.as_str(), status.operational_status),
            ("", OperationalStatus::Ok),
            "n{i}'s call is still hanging: nothing recorded yet"
        );
    }
}

/// Hosts `n0..n{count}` on the emulator's first systems, `online: true`: available and on.
async fn online_hosts(stack: &Stack, emu: &Emulator, count: usize) {
    for i in 0..count {
        stack
            .host(
                &format!("n{i}"),
                &redfish(emu, i),
                "bmc",
                json!({"online": true}),
            )
            .await;
    }
    for i in 0..count {
        stack
            .wait(&format!("n{i}"), "available and on", |h| {
                state(h) == S::Available && h.status.as_ref().unwrap().powered_on
            })
            .await;
    }
}

/// A PowerCycle operation on host `n{i}`: consumed, and exactly one reset on its BMC.
async fn power_cycle(stack: &Stack, emu: &Emulator, i: usize) {
    let name = format!("n{i}");
    let before = count(&emu.state(i).actions, "PowerCycle");
    stack
        .annotate(&name, ann::OPERATION, Some("PowerCycle"))
        .await;
    stack
        .wait(&name, "operation consumed", |h| {
            annotation(h, ann::OPERATION).is_none()
        })
        .await;
    assert_eq!(count(&emu.state(i).actions, "PowerCycle"), before + 1);
}

fn state(h: &BareMetalHost) -> S {
    h.state()
}

fn annotation(h: &BareMetalHost, key: &str) -> Option<String> {
    h.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key).cloned())
}

async fn emulator(systems: usize, delay_ms: u64) -> Emulator {
    Emulator::start(
        EmulatorConfig {
            systems,
            power_delay: Duration::from_millis(delay_ms),
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn redfish(emu: &Emulator, i: usize) -> String {
    emu.system_url(i)
        .replace("http://", "redfish-virtualmedia+http://")
}

fn count(actions: &[String], needle: &str) -> usize {
    actions.iter().filter(|a| a.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle_on_the_emulator() {
    let emu = emulator(2, 100).await;
    let (stack, _requests) = redfish_stack().await;
    stack.secret("bmc", "password").await;
    stack
        .host(
            "node",
            &redfish(&emu, 0),
            "bmc",
            json!({"bootMACAddress": "52:54:00:00:00:01"}),
        )
        .await;

    let host = stack
        .wait("node", "available", |h| state(h) == S::Available)
        .await;
    let status = host.status.unwrap();
    let hw = status.hardware.expect("inspected");
    assert!(
        hw.cpu.unwrap().count > 0
            && hw.ram_mebibytes > 0
            && !hw.nics.is_empty()
            && !hw.storage.is_empty()
    );
    assert_eq!(
        status
            .good_credentials
            .unwrap()
            .credentials
            .unwrap()
            .name
            .as_deref(),
        Some("bmc")
    );
    assert_eq!(
        emu.state(0).power_state.as_str(),
        "Off",
        "online: false keeps it off"
    );
    assert!(
        host.metadata
            .finalizers
            .unwrap()
            .contains(&ann::FINALIZER.to_string())
    );

    // Provision a live ISO: media, one-time Cd boot and power on, all seen on the BMC.
    let images = ImageServer::start();
    let url = &*images.url("live.iso");
    stack
        .patch(
            "node",
            json!({"spec": {"online": true, "image": {"url": url, "format": "live-iso"}}}),
        )
        .await;
    stack
        .wait("node", "provisioned and on", |h| {
            state(h) == S::Provisioned && h.status.as_ref().is_some_and(|s| s.powered_on)
        })
        .await;
    let bmc = emu.state(0);
    assert!(bmc.virtual_media.inserted);
    assert_eq!(bmc.virtual_media.image.as_deref(), Some(url));
    assert_eq!(bmc.last_boot_source.as_deref(), Some("Cd"));
    assert_eq!(bmc.power_state.as_str(), "On");

    // Deprovision by removing the image: media ejected, powered off, available again.
    stack
        .patch("node", json!({"spec": {"image": null, "online": false}}))
        .await;
    stack
        .wait("node", "available again", |h| state(h) == S::Available)
        .await;
    let bmc = emu.state(0);
    assert!(!bmc.virtual_media.inserted);
    assert_eq!(bmc.power_state.as_str(), "Off");

    // Delete: the finalizer goes and so does the host; the other system was never touched.
    stack
        .hosts
        .delete("node", &DeleteParams::default())
        .await
        .unwrap();
    stack.wait_gone("node").await;
    assert!(emu.state(1).actions.is_empty());
    for reason in [
        "Registered",
        "InspectionComplete",
        "ProvisioningComplete",
        "DeprovisioningComplete",
    ] {
        assert!(
            stack
                .event_reasons("node")
                .await
                .iter()
                .any(|r| r == reason),
            "no {reason} Event: {:?}",
            stack.event_reasons("node").await
        );
    }
}

/// The BMC fetches the image it is told to insert, as real BMCs do: an image URL nothing serves
/// is refused there, and the host says so (error, Warning Event) instead of "provisioned".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_nothing_serves_is_refused_and_reported() {
    let emu = emulator(1, 0).await;
    let images = ImageServer::start();
    let (stack, _requests) = redfish_stack().await;
    stack.secret("bmc", "password").await;
    stack
        .host("node", &redfish(&emu, 0), "bmc", json!({}))
        .await;
    stack
        .wait("node", "available", |h| state(h) == S::Available)
        .await;

    let missing = images.url("missing/live.iso");
    stack
        .patch(
            "node",
            json!({"spec": {"online": true, "image": {"url": missing, "format": "live-iso"}}}),
        )
        .await;
    let host = stack
        .wait("node", "a provisioning error", |h| {
            h.status
                .as_ref()
                .is_some_and(|s| s.error_type == Some(ErrorType::Provisioning))
        })
        .await;
    assert_ne!(state(&host), S::Provisioned);
    let status = host.status.unwrap();
    assert!(
        status.error_message.contains(&missing) && status.error_message.contains("404"),
        "{}",
        status.error_message
    );
    stack.wait_event("node", "ProvisioningError").await;
    // On the BMC: the insert was refused and nothing is mounted.
    let bmc = emu.state(0);
    assert!(!bmc.virtual_media.inserted, "{:?}", bmc.virtual_media);
    assert!(
        count(&bmc.actions, "InsertMediaFailed") >= 1,
        "{:?}",
        bmc.actions
    );

    // Served now (the URL fixed): provisioned, and the image is what the BMC has mounted.
    let served = images.url("live.iso");
    stack
        .patch("node", json!({"spec": {"image": {"url": served}}}))
        .await;
    stack
        .wait("node", "provisioned", |h| state(h) == S::Provisioned)
        .await;
    let bmc = emu.state(0);
    assert!(bmc.virtual_media.inserted);
    assert_eq!(bmc.virtual_media.image.as_deref(), Some(&*served));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle_on_sushy_tools() {
    let sushy = peers::Sushy::start(2, "admin:password");
    let files = peers::FileServer::start();
    let (stack, requests) = redfish_stack().await;
    stack::sushy_lifecycle(&stack, &sushy, &files, json!({}), |m| {
        // The redfish backend talks to the BMC itself, from the first milestone on.
        if m == Milestone::Available {
            assert!(requests.total() > 0);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_backs_off_and_recovers_when_the_secret_is_fixed() {
    let emu = emulator(1, 0).await;
    let (stack, _requests) = redfish_stack().await;
    stack.secret("bmc", "not-the-password").await;
    stack
        .host("node", &redfish(&emu, 0), "bmc", json!({}))
        .await;
    let host = stack
        .wait("node", "a registration error counted twice", |h| {
            h.status.as_ref().is_some_and(|s| {
                s.error_type == Some(ErrorType::Registration) && s.error_count >= 2
            })
        })
        .await;
    let status = host.status.unwrap();
    assert_eq!(status.operational_status, OperationalStatus::Error);
    assert!(
        status.error_message.contains("credentials"),
        "{}",
        status.error_message
    );
    assert!(!status.error_message.contains("not-the-password"));
    assert!(status.good_credentials.is_none());

    stack.secret("bmc", "password").await;
    let host = stack
        .wait("node", "available", |h| state(h) == S::Available)
        .await;
    let status = host.status.unwrap();
    assert_eq!(status.error_count, 0);
    assert!(status.error_type.is_none());
    assert!(status.good_credentials.is_some());
}

/// Issue 28 (8): `redfish://` (HTTPS) to a BMC that answers only plain HTTP: the host's error
/// names the cause and the fix, not rustls' "corrupt message of type InvalidContentType".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_a_plain_http_bmc_names_the_fix_in_the_host_status() {
    let emu = emulator(1, 0).await;
    let (stack, _requests) = redfish_stack().await;
    stack.secret("bmc", "password").await;
    let address = emu.system_url(0).replace("http://", "redfish://");
    stack
        .host(
            "node",
            &address,
            "bmc",
            json!({"bmc": {"address": address, "credentialsName": "bmc",
                           "disableCertificateVerification": true}}),
        )
        .await;
    let host = stack
        .wait("node", "a registration error", |h| {
            h.status
                .as_ref()
                .is_some_and(|s| s.error_type == Some(ErrorType::Registration))
        })
        .await;
    let message = host.status.unwrap().error_message;
    assert!(
        message.contains("the BMC answered plain HTTP to HTTPS; use redfish+http://"),
        "{message}"
    );
    assert!(!message.contains("InvalidContentType"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bmc_faults_are_power_management_errors_that_heal() {
    let emu = emulator(1, 0).await;
    let (stack, _requests) = redfish_stack().await;
    stack.secret("bmc", "password").await;
    stack
        .host("node", &redfish(&emu, 0), "bmc", json!({"online": true}))
        .await;
    stack
        .wait("node", "available and on", |h| {
            state(h) == S::Available && h.status.as_ref().unwrap().powered_on
        })
        .await;
    for fault in [Fault::Http500, Fault::Hang, Fault::ConnectionReset] {
        emu.set_fault(0, Some(fault.clone()));
        let host = stack
            .wait(
                "node",
                &format!("a power management error under {fault:?}"),
                |h| {
                    h.status
                        .as_ref()
                        .is_some_and(|s| s.error_type == Some(ErrorType::PowerManagement))
                },
            )
            .await;
        assert!(!host.status.unwrap().error_message.is_empty());
        emu.set_fault(0, None);
        stack
            .wait("node", "healed", |h| {
                h.status
                    .as_ref()
                    .is_some_and(|s| s.error_type.is_none() && s.error_count == 0)
            })
            .await;
    }
    assert_eq!(stack.hosts.get("node").await.unwrap().state(), S::Available);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_act_on_the_bmc() {
    let emu = emulator(3, 50).await;
    let (stack, requests) = redfish_stack().await;
    stack.secret("bmc", "password").await;
    online_hosts(&stack, &emu, 3).await;

    // ferrometal.io/operation: one PowerCycle on the BMC, annotation removed, Event recorded.
    power_cycle(&stack, &emu, 0).await;
    stack.wait_event("n0", "OperationSucceeded").await;

    // Unknown operation: warned about and removed, nothing sent.
    let actions = emu.state(0).actions.len();
    stack
        .annotate("n0", ann::OPERATION, Some("SelfDestruct"))
        .await;
    stack
        .wait("n0", "unknown operation removed", |h| {
            annotation(h, ann::OPERATION).is_none()
        })
        .await;
    assert_eq!(emu.state(0).actions.len(), actions);

    // Bare reboot annotation (forced: the host is only available): off, then on again once the
    // controller removed it.
    stack
        .annotate("n1", ann::REBOOT, Some(r#"{"mode":"hard","force":true}"#))
        .await;
    stack
        .wait("n1", "reboot consumed", |h| {
            annotation(h, ann::REBOOT).is_none()
        })
        .await;
    stack
        .wait("n1", "back on", |h| h.status.as_ref().unwrap().powered_on)
        .await;
    let actions = emu.state(1).actions;
    let off = actions
        .iter()
        .position(|a| a.contains("ForceOff") || a.contains("GracefulShutdown"));
    let on = actions
        .iter()
        .rposition(|a| a.ends_with(":On") || a.contains("ForceOn"));
    assert!(off.is_some() && on > off, "off then on: {actions:?}");
    assert_eq!(emu.state(1).power_state.as_str(), "On");

    // Detached: no BMC request at all while detached; power untouched.
    stack.annotate("n2", ann::DETACHED, Some("")).await;
    stack
        .wait("n2", "detached", |h| {
            operational(h) == OperationalStatus::Detached
        })
        .await;
    emu.reset_counters();
    stack.patch("n2", json!({"spec": {"online": false}})).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        emu.counters().system(2).total(),
        0,
        "a detached host's BMC is left alone"
    );
    assert_eq!(emu.state(2).power_state.as_str(), "On");
    // Re-attached: management resumes and online: false is enforced.
    stack.annotate("n2", ann::DETACHED, None).await;
    stack
        .wait("n2", "managed and off", |h| {
            operational(h) == OperationalStatus::Ok && !h.status.as_ref().unwrap().powered_on
        })
        .await;
    assert_eq!(emu.state(2).power_state.as_str(), "Off");
    assert!(requests.total() > 0);
}

/// A disk image on the redfish provisioner without the deploy agent (which then boots live ISOs
/// only): the host says what is needed in its Blocked condition, and no media is inserted or
/// power switched for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_image_on_the_redfish_provisioner_without_the_agent_names_what_it_needs() {
    let emu = emulator(1, 50).await;
    let (stack, _requests) = redfish_stack().await;
    stack.secret("bmc", "password").await;
    stack
        .host("disk", &redfish(&emu, 0), "bmc", json!({}))
        .await;
    stack
        .wait("disk", "available", |h| state(h) == S::Available)
        .await;
    let before = emu.state(0).actions.len();
    stack
        .patch(
            "disk",
            json!({"spec": {"image": {"url": "http://images.example/os.qcow2",
                    "checksum": "http://images.example/os.qcow2.sha256sum", "format": "qcow2"}}}),
        )
        .await;
    let h = stack
        .wait("disk", "the Blocked condition", |h| {
            stack::blocked(h).is_some()
        })
        .await;
    let blocked = stack::blocked(&h).unwrap();
    let s = h.status.unwrap();
    assert!(
        blocked
            .message
            .contains("image format qcow2 needs the deploy agent (serve --agent-ramdisk) or the ironic provisioner"),
        "{}",
        blocked.message
    );
    assert_eq!(s.error_type, Some(ferrometal_api::ErrorType::Provisioning));
    let actions = &emu.state(0).actions[before..];
    assert!(
        !actions.iter().any(|a| a.contains("InsertMedia")),
        "{actions:?}"
    );
}
