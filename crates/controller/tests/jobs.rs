//! BMCJobs end to end with the redfish backend: every task observed on the peer (sushy-tools,
//! or the emulator where a fault is injected), and the host back in its desired state after.

mod stack;

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::job::{BMCJob, JobPhase, TaskState};
use ferrometal_api::{BareMetalHost, ProvisioningState as S};
use ferrometal_emulator::{Emulator, EmulatorConfig, Fault};
use ferrometal_provisioner::redfish::{RedfishOptions, RedfishProvisioner};
use ferrometal_test_support::peers;
use serde_json::json;
use stack::Stack;

async fn redfish_stack() -> Stack {
    Stack::start(Arc::new(RedfishProvisioner::new(RedfishOptions {
        request_timeout: Duration::from_millis(1500),
        poll_interval: Duration::from_millis(200),
        step_interval: Duration::from_millis(50),
        ..RedfishOptions::default()
    })))
    .await
}

/// A host on sushy-tools' first system (virtual media, no inspection) with `extra` in its spec.
async fn sushy_host(stack: &Stack, sushy: &peers::Sushy, name: &str, mut extra: serde_json::Value) {
    stack.secret("bmc", "password").await;
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    extra["inspectionMode"] = json!("disabled");
    stack.host(name, &address, "bmc", extra).await;
}

fn phase(j: &BMCJob) -> JobPhase {
    j.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

fn finished(j: &BMCJob) -> bool {
    matches!(phase(j), JobPhase::Completed | JobPhase::Failed)
}

fn task_states(j: &BMCJob) -> Vec<TaskState> {
    j.status
        .as_ref()
        .map(|s| s.tasks.iter().map(|t| t.state).collect())
        .unwrap_or_default()
}

fn held(h: &BareMetalHost) -> bool {
    h.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ann::JOB))
}

/// The reimage sequence on sushy-tools: power off, PXE once, media in, power on; each step
/// seen by the peer in that order, and afterwards the host on (online: true), its media
/// ejected and its boot settings as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reimage_sequence_on_sushy_tools_then_back_to_the_desired_state() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    let stack = redfish_stack().await;
    sushy_host(&stack, &sushy, "h0", json!({"online": true})).await;
    stack
        .wait("h0", "available and on", |h| {
            h.state() == S::Available && h.status.as_ref().unwrap().powered_on
        })
        .await;
    let before = sushy.changes().len();
    let boot_before = sushy.system(peers::SUSHY_SYSTEM_0)["Boot"].clone();
    assert_ne!(boot_before["BootSourceOverrideTarget"], "Pxe");
    let iso = files.url("live.iso");
    stack
        .job(
            "reimage",
            json!({"hostRef": {"name": "h0"}, "tasks": [
                {"powerAction": "off"},
                {"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": true}},
                {"virtualMediaAction": {"mediaURL": iso, "kind": "CD"}},
                {"powerAction": "status"},
                {"powerAction": "on"},
            ]}),
        )
        .await;
    let job = stack.wait_job("reimage", "finished", finished).await;
    let st = job.status.clone().unwrap();
    assert_eq!(st.phase, JobPhase::Completed, "{st:#?}");
    assert_eq!(task_states(&job), [TaskState::Succeeded; 5]);
    assert_eq!(st.progress, "5/5");
    // The host controller did not undo the power off mid-job: the status task saw it off.
    assert_eq!(st.tasks[3].message, "power is Off");
    assert_eq!(st.restore.as_ref().unwrap().state, TaskState::Succeeded);

    // On the peer, in order.
    let seen = &sushy.changes()[before..];
    let at = |what: &str| {
        seen.iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what} not sent: {seen:#?}"))
    };
    let off = at("Actions/ComputerSystem.Reset");
    let boot = at(&format!(
        "PATCH /redfish/v1/Systems/{}",
        peers::SUSHY_SYSTEM_0
    ));
    let insert = at("InsertMedia");
    assert!(off < boot && boot < insert, "{seen:#?}");
    let system = sushy.system(peers::SUSHY_SYSTEM_0);
    assert_eq!(system["PowerState"], "On");
    // The boot settings are as before the job: the restore put the override back.
    assert_eq!(
        system["Boot"]["BootSourceOverrideTarget"],
        boot_before["BootSourceOverrideTarget"]
    );
    assert_eq!(
        system["Boot"]["BootSourceOverrideMode"],
        boot_before["BootSourceOverrideMode"]
    );
    // That was a second PATCH of the system, after the tasks.
    let patches: Vec<usize> = seen
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.contains(&format!(
                "PATCH /redfish/v1/Systems/{} ",
                peers::SUSHY_SYSTEM_0
            ))
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(patches.len(), 2, "{seen:#?}");
    assert!(patches[1] > insert, "{seen:#?}");
    assert_eq!(sushy.virtual_cd(peers::SUSHY_SYSTEM_0)["Inserted"], false);
    // Each destructive action once: one insert; one off; on for the task (the restore found
    // the host on already).
    assert_eq!(seen.iter().filter(|l| l.contains("InsertMedia")).count(), 1);

    // The host is handed back.
    let h = stack.wait("h0", "released", |h| !held(h)).await;
    assert!(h.status.unwrap().powered_on);
}

/// A task that fails on the BMC (an injected fault) fails the job; later tasks are not sent;
/// the restore still runs once the BMC answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_skips_the_rest_and_the_restore_still_runs() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
            power_delay: Duration::from_millis(50),
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let stack = redfish_stack().await;
    stack.secret("bmc", "password").await;
    let address = emu
        .system_url(0)
        .replace("http://", "redfish-virtualmedia+http://");
    stack
        .host("h1", &address, "bmc", json!({"online": true}))
        .await;
    stack
        .wait("h1", "available and on", |h| {
            h.state() == S::Available && h.status.as_ref().unwrap().powered_on
        })
        .await;
    let actions_before = emu.state(0).actions.len();
    emu.set_fault(0, Some(Fault::Http500));
    stack
        .job(
            "broken",
            json!({"hostRef": {"name": "h1"}, "tasks": [
                {"powerAction": "off"},
                {"virtualMediaAction": {"mediaURL": "http://images.example/x.iso", "kind": "CD"}},
                {"powerAction": "on"},
            ]}),
        )
        .await;
    let job = stack
        .wait_job("broken", "its first task failed", |j| {
            task_states(j).first() == Some(&TaskState::Failed)
        })
        .await;
    assert_eq!(
        task_states(&job),
        [TaskState::Failed, TaskState::Skipped, TaskState::Skipped]
    );
    let message = &job.status.as_ref().unwrap().tasks[0].message;
    assert!(message.starts_with("power=off: "), "{message}");
    // The BMC answers again: the restore finishes and the job ends Failed, restored.
    emu.set_fault(0, None);
    let job = stack.wait_job("broken", "finished", finished).await;
    let st = job.status.unwrap();
    assert_eq!(st.phase, JobPhase::Failed);
    assert_eq!(st.restore.unwrap().state, TaskState::Succeeded);
    let failed = st
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed" && c.status == "True")
        .unwrap();
    assert!(
        failed.message.starts_with("task 1 failed"),
        "{}",
        failed.message
    );
    let actions = emu.state(0).actions[actions_before..].to_vec();
    assert!(
        !actions.iter().any(|a| a.contains("InsertMedia")),
        "a skipped task was sent: {actions:?}"
    );
    assert_eq!(
        emu.state(0).power_state.as_str(),
        "On",
        "restored to online: true"
    );
}

/// A job created while its host provisions waits, and starts once the host is provisioned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waits_for_its_host_to_finish_provisioning() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    let stack = redfish_stack().await;
    sushy_host(&stack, &sushy, "h2", json!({})).await;
    stack
        .wait("h2", "available", |h| h.state() == S::Available)
        .await;
    stack
        .patch(
            "h2",
            json!({"spec": {"online": true, "image": {"url": files.url("live.iso"), "format": "live-iso"}}}),
        )
        .await;
    stack
        .wait("h2", "provisioning", |h| h.state() != S::Available)
        .await;
    stack
        .job(
            "after",
            json!({"hostRef": {"name": "h2"}, "tasks": [{"powerAction": "cycle"}]}),
        )
        .await;
    let job = stack.wait_job("after", "finished", finished).await;
    assert_eq!(phase(&job), JobPhase::Completed);
    let h = stack
        .wait("h2", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    let provisioned = h
        .status
        .unwrap()
        .operation_history
        .provision
        .end
        .expect("a provisioning end time");
    let started = job.status.unwrap().start_time.unwrap();
    assert!(
        started >= provisioned,
        "the job started at {started}, before provisioning ended at {provisioned}"
    );
}
