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
use ferrometal_test_support::{peers, poll};
use kube::api::{Api, PostParams};
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

/// Finished, and its restore (if any) too: the host is handed back.
fn settled(j: &BMCJob) -> bool {
    finished(j)
        && j.status
            .as_ref()
            .unwrap()
            .restore
            .as_ref()
            .is_none_or(|r| matches!(r.state, TaskState::Succeeded | TaskState::Failed))
}

fn condition_true(j: &BMCJob, type_: &str) -> Option<String> {
    j.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.message.clone())
}

async fn emulator() -> Emulator {
    Emulator::start(
        EmulatorConfig {
            systems: 1,
            power_delay: Duration::from_millis(50),
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
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
    // Failed at once (Rufio's semantics), the restore reported beside it.
    let st = job.status.as_ref().unwrap();
    assert_eq!(st.phase, JobPhase::Failed);
    assert!(condition_true(&job, "Failed").is_some(), "{st:#?}");
    assert_eq!(st.restore.as_ref().unwrap().state, TaskState::Running);
    // The BMC answers again: the restore finishes; the job stays Failed, restored.
    emu.set_fault(0, None);
    let job = stack.wait_job("broken", "restored", settled).await;
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

/// Issue 32: a task failing on a BMC that stays broken (HTTP 500 to everything) makes the job
/// Failed at once, as Rufio does, instead of `Restoring` with `Failed=False` for minutes; the
/// restore goes on beside it, saying what it retries and until when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_failing_on_a_broken_bmc_fails_the_job_at_once() {
    let emu = emulator().await;
    let stack = redfish_stack().await;
    stack.secret("bmc", "password").await;
    let address = emu
        .system_url(0)
        .replace("http://", "redfish-virtualmedia+http://");
    stack
        .host("h3", &address, "bmc", json!({"online": true}))
        .await;
    stack
        .wait("h3", "available and on", |h| {
            h.state() == S::Available && h.status.as_ref().unwrap().powered_on
        })
        .await;
    emu.set_fault(0, Some(Fault::Http500));
    stack
        .job(
            "cycle",
            json!({"hostRef": {"name": "h3"}, "tasks": [
                {"powerAction": "cycle"},
                {"powerAction": "on"},
            ]}),
        )
        .await;
    let job = stack
        .wait_job("cycle", "Failed=True", |j| {
            condition_true(j, "Failed").is_some()
        })
        .await;
    let st = job.status.clone().unwrap();
    assert_eq!(st.phase, JobPhase::Failed);
    assert_eq!(task_states(&job), [TaskState::Failed, TaskState::Skipped]);
    assert!(st.completion_time.is_some());
    assert!(
        condition_true(&job, "Running").is_none(),
        "{:#?}",
        st.conditions
    );
    // The restore's own progress, bounded in time.
    let job = stack
        .wait_job("cycle", "the restore says what it retries", |j| {
            j.status
                .as_ref()
                .and_then(|s| s.restore.as_ref())
                .is_some_and(|r| r.message.starts_with("retrying until "))
        })
        .await;
    let r = job.status.unwrap().restore.unwrap();
    assert_eq!(r.state, TaskState::Running, "{r:?}");
    assert!(r.message.contains("500"), "{}", r.message);
    // The host stays held while the restore runs, and is handed back once it ends.
    assert!(held(&stack.wait("h3", "held", held).await));
    emu.set_fault(0, None);
    let job = stack.wait_job("cycle", "restored", settled).await;
    assert_eq!(
        job.status.unwrap().restore.unwrap().state,
        TaskState::Succeeded
    );
    stack.wait("h3", "released", |h| !held(h)).await;
}

/// Issue 28 (3): the example reimage job on a host provisioned with a live ISO puts the ISO
/// back afterwards and boots it again (it used to eject it: the host said provisioned while
/// its BMC had nothing to boot); each task has its own Event, not one series that hid
/// tasks 2-4 behind "task 1".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_reimage_job_gives_a_live_iso_host_its_image_back() {
    let emu = emulator().await;
    let files = peers::FileServer::start();
    std::fs::copy(
        files.dir.path().join("live.iso"),
        files.dir.path().join("tools.iso"),
    )
    .unwrap();
    let stack = redfish_stack().await;
    stack.secret("bmc", "password").await;
    let address = emu
        .system_url(0)
        .replace("http://", "redfish-virtualmedia+http://");
    let iso = files.url("live.iso");
    stack
        .host(
            "node-0",
            &address,
            "bmc",
            json!({"online": true, "image": {"url": iso, "format": "live-iso"}}),
        )
        .await;
    stack
        .wait("node-0", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    assert_eq!(emu.state(0).virtual_media.image.as_deref(), Some(&*iso));

    // The example as shipped, with a tools ISO that something serves.
    let example = std::fs::read_to_string(peers::repo_root().join("examples/bmcjob-reimage.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080/live.iso", &files.url("tools.iso"));
    assert!(example.contains(&files.url("tools.iso")), "{example}");
    let job: BMCJob = serde_yaml::from_str(&example).unwrap();
    let name = job.metadata.name.clone().unwrap();
    let jobs: Api<BMCJob> = Api::namespaced(stack.client.clone(), "default");
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let job = stack.wait_job(&name, "restored", settled).await;
    let st = job.status.unwrap();
    assert_eq!(st.phase, JobPhase::Completed, "{st:#?}");
    assert_eq!(st.restore.unwrap().state, TaskState::Succeeded);

    // On the BMC: the tools ISO was mounted and booted, then the live ISO is back and booted.
    let actions = emu.state(0).actions;
    assert!(
        !actions.iter().any(|a| a == "InsertMediaFailed"),
        "{actions:?}"
    );
    assert!(
        actions.iter().filter(|a| *a == "InsertMedia").count() >= 3,
        "{actions:?}"
    );
    peers::eventually("the live ISO booted again", || {
        let s = emu.state(0);
        s.virtual_media.inserted
            && s.virtual_media.image.as_deref() == Some(&*iso)
            && s.last_boot_source.as_deref() == Some("Cd")
            && s.pending_power_state.is_none()
            && s.power_state.as_str() == "On"
    })
    .await;
    let h = stack.wait("node-0", "released", |h| !held(h)).await;
    assert_eq!(h.state(), S::Provisioned);

    // One TaskStarted Event per task, each naming its task.
    let mut notes: Vec<String> = Vec::new();
    for _ in 0..200 {
        notes = poll::host_events(&stack.events, &name)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("TaskStarted"))
            .map(|e| e.note.unwrap_or_default())
            .collect();
        if notes.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    notes.sort();
    assert_eq!(notes.len(), 4, "{notes:?}");
    for (i, n) in notes.iter().enumerate() {
        assert!(n.starts_with(&format!("task {}: ", i + 1)), "{notes:?}");
    }

    // The host has the job's start and end (written before the host was released); the tasks'
    // steps stay on the job.
    let mut on_host: Vec<String> = poll::host_events(&stack.events, "node-0")
        .await
        .into_iter()
        .filter(|e| {
            e.note
                .as_deref()
                .unwrap_or_default()
                .starts_with(&format!("job {name}: "))
        })
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    on_host.sort();
    assert_eq!(
        on_host,
        ["BMCJobJobCompleted", "BMCJobJobStarted"],
        "{on_host:?}"
    );
}
