//! End to end with the ironic backend: the same controllers and the same scenario as the
//! redfish backend's sushy-tools lifecycle in e2e_peers.rs, but every BMC action goes through a
//! real standalone Ironic (PyPI) driving sushy-tools. Only the provisioner differs: the proof
//! that the backend can be swapped. The one spec difference: automated cleaning is disabled,
//! since Ironic cleans with its agent ramdisk, which this environment does not have.

mod stack;

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, OperationalStatus, ProvisioningState as S};
use ferrometal_provisioner::ironic::{IronicOptions, IronicProvisioner};
use ferrometal_test_support::ironic::Ironic;
use ferrometal_test_support::peers;
use kube::api::DeleteParams;
use serde_json::json;
use stack::{Milestone, Stack, operational};

/// The controllers with the ironic backend pointed at `ironic`.
async fn ironic_stack(ironic: &Ironic) -> Stack {
    let mut options = IronicOptions::new(ironic.endpoint());
    options.poll_interval = Duration::from_millis(200);
    options.cache_ttl = Duration::from_millis(200);
    Stack::start(Arc::new(IronicProvisioner::new(options))).await
}

fn state(h: &BareMetalHost) -> S {
    h.state()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle_on_sushy_tools_through_ironic() {
    let sushy = peers::Sushy::start(2, "admin:password");
    let files = peers::FileServer::start();
    let ironic = Ironic::start();
    let stack = ironic_stack(&ironic).await;
    // Ironic cleans disks with its agent ramdisk, which this environment does not have.
    stack::sushy_lifecycle(
        &stack,
        &sushy,
        &files,
        json!({"automatedCleaningMode": "disabled"}),
        |m| match m {
            Milestone::Available => {
                let node = ironic.node("default~node").expect("an Ironic node");
                assert_eq!(node["provision_state"], "available");
            }
            Milestone::Provisioned => {
                assert_eq!(ironic.state("default~node").as_deref(), Some("active"));
            }
            Milestone::Deleted => assert!(ironic.node("default~node").is_none()),
            Milestone::ClaimProvisioned => {
                assert_eq!(ironic.state("default~lent").as_deref(), Some("active"));
            }
            Milestone::ClaimReleased => {
                assert_eq!(ironic.state("default~lent").as_deref(), Some("available"));
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_hosts_leave_ironic_untouched_and_come_back_adopted() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    let ironic = Ironic::start();
    let stack = ironic_stack(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    let url = files.url("live.iso");
    stack
        .host(
            "node",
            &address,
            "bmc",
            json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled", "online": true,
                   "image": {"url": url, "format": "live-iso"}}),
        )
        .await;
    stack
        .wait("node", "provisioned", |h| state(h) == S::Provisioned)
        .await;
    let before = sushy.changes();

    stack.annotate("node", ann::DETACHED, Some("")).await;
    stack
        .wait("node", "detached", |h| {
            operational(h) == OperationalStatus::Detached
        })
        .await;
    assert!(ironic.node("default~node").is_none());
    assert_eq!(sushy.changes(), before, "detach changed the machine");
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");

    // Removing the annotation re-creates the node and adopts it: nothing is deployed again.
    stack.annotate("node", ann::DETACHED, None).await;
    stack
        .wait("node", "attached again", |h| {
            operational(h) == OperationalStatus::Ok
        })
        .await;
    let mut rounds = 0;
    while ironic.state("default~node").as_deref() != Some("active") {
        rounds += 1;
        assert!(
            rounds < 600,
            "node never adopted: {:?}",
            ironic.state("default~node")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let host = stack.hosts.get("node").await.unwrap();
    assert_eq!(state(&host), S::Provisioned);
    assert_eq!(sushy.changes(), before, "re-attach deployed again");

    // Deleting a detached host removes it without deprovisioning.
    stack.annotate("node", ann::DETACHED, Some("")).await;
    stack
        .wait("node", "detached again", |h| {
            operational(h) == OperationalStatus::Detached
        })
        .await;
    stack
        .hosts
        .delete("node", &DeleteParams::default())
        .await
        .unwrap();
    stack.wait_gone("node").await;
    assert!(ironic.node("default~node").is_none());
    assert_eq!(
        sushy.changes(),
        before,
        "deleting a detached host touched it"
    );
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_recover_when_ironic_loses_its_database() {
    let sushy = peers::Sushy::start(2, "admin:password");
    let files = peers::FileServer::start();
    let ironic = Ironic::start();
    let stack = ironic_stack(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = |uuid: &str| {
        sushy
            .address(uuid)
            .replace("redfish+http", "redfish-virtualmedia+http")
    };
    let url = files.url("live.iso");
    let plain = json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled"});
    stack
        .host(
            "ready",
            &address("00000000-0000-4000-8000-000000000001"),
            "bmc",
            plain.clone(),
        )
        .await;
    let mut deployed = plain;
    deployed["online"] = json!(true);
    deployed["image"] = json!({"url": url, "format": "live-iso"});
    stack
        .host("deployed", &address(peers::SUSHY_SYSTEM_0), "bmc", deployed)
        .await;
    stack
        .wait("ready", "available", |h| state(h) == S::Available)
        .await;
    stack
        .wait("deployed", "provisioned", |h| state(h) == S::Provisioned)
        .await;
    let before = sushy.changes();

    ironic.restart_with_empty_database();
    assert!(ironic.node("default~deployed").is_none());

    // The controllers' power polls find the nodes gone; the backend registers them again,
    // makes the available one available and adopts the provisioned one.
    let mut rounds = 0;
    while ironic.state("default~ready").as_deref() != Some("available")
        || ironic.state("default~deployed").as_deref() != Some("active")
    {
        rounds += 1;
        assert!(
            rounds < 900,
            "hosts never recovered: {:?} {:?}",
            ironic.state("default~ready"),
            ironic.state("default~deployed")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        state(&stack.hosts.get("deployed").await.unwrap()),
        S::Provisioned
    );
    assert_eq!(
        state(&stack.hosts.get("ready").await.unwrap()),
        S::Available
    );
    let after = sushy.changes();
    let inserts = |l: &[String]| l.iter().filter(|l| l.contains("InsertMedia")).count();
    assert_eq!(inserts(&after), inserts(&before), "deployed again");
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
}

/// A plain BareMetalHost (metal3's default cleaning) under an Ironic with no agent ramdisk
/// configured: instead of Ironic failing cleaning again and again, the host says at once what
/// to set, and Ironic's node is left manageable with no cleaning attempted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_needs_the_agent_ramdisk_says_which_flag_to_set() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let ironic = Ironic::start();
    let stack = ironic_stack(&ironic).await;
    stack.secret("bmc", "password").await;
    stack
        .host(
            "plain",
            &sushy.address(peers::SUSHY_SYSTEM_0),
            "bmc",
            json!({"inspectionMode": "disabled"}),
        )
        .await;
    let h = stack
        .wait("plain", "the Blocked condition", |h| {
            stack::blocked(h).is_some()
        })
        .await;
    let blocked = stack::blocked(&h).unwrap();
    let s = h.status.unwrap();
    assert_eq!(s.provisioning.state, S::Preparing);
    assert_eq!(s.operational_status, OperationalStatus::Error);
    assert_eq!(s.error_count, 1);

    for needed in ["--deploy-kernel-url", "automatedCleaningMode: disabled"] {
        assert!(blocked.message.contains(needed), "{}", blocked.message);
        assert!(s.error_message.contains(needed), "{}", s.error_message);
    }
    let node = ironic.node("default~plain").expect("an Ironic node");
    assert_eq!(node["provision_state"], "manageable");
    assert!(
        !ironic.log().contains("Missing are"),
        "Ironic was asked to clean without its ramdisk"
    );

    // The user picks the other way out: the host goes on to available.
    stack
        .patch(
            "plain",
            json!({"spec": {"automatedCleaningMode": "disabled"}}),
        )
        .await;
    let h = stack
        .wait("plain", "available", |h| h.state() == S::Available)
        .await;
    let s = h.status.unwrap();
    assert!(
        s.conditions
            .iter()
            .all(|c| c.type_ != "ferrometal.io/Blocked")
    );
    assert_eq!(s.error_type, None);
}

/// A BMCJob on a host of the ironic provisioner: power and boot-device tasks go through
/// Ironic's API (Ironic's node and the peer agree afterwards), the restore brings the host back
/// to `online: true`; a media task is refused with the reason, and the restore still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bmcjobs_go_through_ironic() {
    use ferrometal_api::job::{BMCJob, JobPhase, TaskState};
    let sushy = peers::Sushy::start(1, "admin:password");
    let ironic = Ironic::start();
    let stack = ironic_stack(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    stack
        .host(
            "node",
            &address,
            "bmc",
            json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled", "online": true}),
        )
        .await;
    stack
        .wait("node", "available and on", |h| {
            state(h) == S::Available && h.status.as_ref().unwrap().powered_on
        })
        .await;
    let ended = |j: &BMCJob| {
        j.status
            .as_ref()
            .is_some_and(|s| matches!(s.phase, JobPhase::Completed | JobPhase::Failed))
    };
    stack
        .job(
            "through-ironic",
            json!({"hostRef": {"name": "node"}, "tasks": [
                {"powerAction": "off"},
                {"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": true}},
                {"powerAction": "status"},
            ]}),
        )
        .await;
    let job = stack.wait_job("through-ironic", "finished", ended).await;
    let st = job.status.unwrap();
    assert_eq!(st.phase, JobPhase::Completed, "{st:#?}");
    assert_eq!(st.tasks[2].message, "power is Off");
    // Back on, as spec.online says, seen by Ironic and by the BMC.
    let node = ironic.node("default~node").unwrap();
    assert_eq!(node["power_state"], "power on");
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
    assert_eq!(
        sushy.system(peers::SUSHY_SYSTEM_0)["Boot"]["BootSourceOverrideTarget"],
        "Pxe"
    );

    stack
        .job(
            "media",
            json!({"hostRef": {"name": "node"}, "tasks": [
                {"virtualMediaAction": {"mediaURL": "http://images.example/x.iso", "kind": "CD"}},
            ]}),
        )
        .await;
    let job = stack.wait_job("media", "finished", ended).await;
    let st = job.status.unwrap();
    assert_eq!(st.phase, JobPhase::Failed);
    assert_eq!(st.tasks[0].state, TaskState::Failed);
    assert!(
        st.tasks[0]
            .message
            .contains("use the redfish provisioner for media tasks"),
        "{}",
        st.tasks[0].message
    );
    // The job fails at once (Rufio's semantics); its restore ends beside it.
    let restored = |j: &BMCJob| {
        j.status
            .as_ref()
            .and_then(|s| s.restore.as_ref())
            .is_some_and(|r| r.state != TaskState::Running)
    };
    let job = stack.wait_job("media", "restored", restored).await;
    assert_eq!(
        job.status.unwrap().restore.unwrap().state,
        TaskState::Succeeded
    );
}

/// metal3's DataImage through Ironic's virtual media API: attached while the host is off on its
/// next reboot (sushy-tools' CD holds Ironic's copy of the ISO, and Ironic reads it back), detached on the reboot
/// after the DataImage is deleted. A URL Ironic refuses is the DataImage's error, with Ironic's
/// reason, and the host is otherwise untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_images_go_through_ironics_virtual_media() {
    use ferrometal_api::media::DataImage;
    use ferrometal_test_support::poll;
    use kube::ResourceExt;
    use kube::api::{Api, PostParams};
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    std::fs::write(files.dir.path().join("config.iso"), b"config drive\n").unwrap();
    let ironic = Ironic::start();
    let stack = ironic_stack(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = sushy.address(peers::SUSHY_SYSTEM_0);
    stack
        .host(
            "node",
            &address,
            "bmc",
            json!({"externallyProvisioned": true, "online": true,
                   "automatedCleaningMode": "disabled", "inspectionMode": "disabled"}),
        )
        .await;
    stack
        .wait("node", "externally provisioned and on", |h| {
            state(h) == S::ExternallyProvisioned && h.status.as_ref().unwrap().powered_on
        })
        .await;
    let images: Api<DataImage> = Api::namespaced(stack.client.clone(), stack::NS);
    let image = |url: &str| -> DataImage {
        serde_json::from_value(json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "DataImage",
            "metadata": {"name": "node"}, "spec": {"url": url},
        }))
        .unwrap()
    };
    let wait_image = |what: &'static str, ok: fn(&DataImage, &str) -> bool, url: String| {
        let images = images.clone();
        async move { poll::object(&images, stack::PATIENCE, "node", what, |d| ok(d, &url)).await }
    };
    let cd = || sushy.virtual_cd(peers::SUSHY_SYSTEM_0);

    // Refused by Ironic at once: the reason is the DataImage's error; nothing inserted.
    images
        .create(
            &PostParams::default(),
            &image("ftp://images.example/config.iso"),
        )
        .await
        .unwrap();
    stack.annotate("node", ann::REBOOT, Some("")).await;
    let refused = wait_image(
        "Ironic's refusal recorded",
        |d, _| {
            d.status
                .as_ref()
                .and_then(|s| s.error.as_ref())
                .is_some_and(|e| e.message.contains("scheme"))
        },
        String::new(),
    )
    .await;
    assert!(refused.status.unwrap().attached_image.is_none());
    assert_eq!(cd()["Inserted"], false);
    stack
        .wait("node", "back on after the reboot", |h| {
            h.status.as_ref().unwrap().powered_on && h.annotations().get(ann::REBOOT).is_none()
        })
        .await;

    // A URL the BMC can fetch: attached on the next reboot.
    let iso = files.url("config.iso");
    images
        .patch(
            "node",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"url": iso}})),
        )
        .await
        .unwrap();
    assert_eq!(
        cd()["Inserted"],
        false,
        "nothing attached before the reboot"
    );
    stack.annotate("node", ann::REBOOT, Some("")).await;
    wait_image(
        "the attachment recorded",
        |d, url| {
            d.status
                .as_ref()
                .and_then(|s| s.attached_image.as_ref())
                .is_some_and(|a| a.url == url)
        },
        iso.clone(),
    )
    .await;
    // The BMC holds Ironic's copy of the ISO, published on Ironic's web server: the same bytes.
    let shown = cd();
    assert_eq!(shown["Inserted"], true, "{shown}");
    let copy = shown["Image"].as_str().unwrap_or_default().to_string();
    let node = ironic.node("default~node").unwrap();
    assert!(copy.contains(node["uuid"].as_str().unwrap()), "{shown}");
    let served = reqwest::get(&copy).await.unwrap().bytes().await.unwrap();
    assert_eq!(&served[..], b"config drive\n");
    let vmedia = ironic.get_at("1.93", "/v1/nodes/default~node/vmedia");
    assert!(vmedia_inserted(&vmedia), "Ironic reads it back: {vmedia}");
    stack.wait_event("node", "DataImageAttached").await;

    // Deleted: detached on the reboot after, then gone.
    images
        .delete("node", &DeleteParams::default())
        .await
        .unwrap();
    stack.annotate("node", ann::REBOOT, Some("")).await;
    poll::gone(&images, stack::PATIENCE, "node").await;
    assert_eq!(cd()["Inserted"], false);
    let host = stack
        .wait("node", "on again", |h| {
            h.status.as_ref().unwrap().powered_on
        })
        .await;
    assert_eq!(state(&host), S::ExternallyProvisioned);
    assert!(
        !vmedia_inserted(&ironic.get_at("1.93", "/v1/nodes/default~node/vmedia")),
        "Ironic reads the CD empty"
    );
}

fn vmedia_inserted(devices: &serde_json::Value) -> bool {
    devices
        .as_array()
        .into_iter()
        .flatten()
        .any(|d| d["inserted"] == true)
}
