//! Table-driven tests of the job step: one row per rule (the restore's in restore.rs).

mod restore;

use std::time::Duration;

use ferrometal_api::job::{
    BMCJobSpec, BMCJobStatus, BootDevice, HostRef, JobPhase, JobTask, OneTimeBootDeviceAction,
    PowerAction, RestoreStatus, SavedBoot, TaskState, TaskStatus, VirtualMediaAction,
};
use ferrometal_bmc::PowerState;
use k8s_openapi::jiff::Timestamp;

use super::step::*;

const T0: &str = "2026-01-01T00:00:00Z";

fn power(p: PowerAction) -> JobTask {
    JobTask {
        power_action: Some(p),
        ..JobTask::default()
    }
}

fn boot(d: BootDevice) -> JobTask {
    JobTask {
        one_time_boot_device_action: Some(OneTimeBootDeviceAction {
            device: vec![d],
            efi_boot: true,
        }),
        ..JobTask::default()
    }
}

fn media(url: &str) -> JobTask {
    JobTask {
        virtual_media_action: Some(VirtualMediaAction {
            media_url: url.into(),
            kind: "CD".into(),
        }),
        ..JobTask::default()
    }
}

fn spec(tasks: Vec<JobTask>) -> BMCJobSpec {
    BMCJobSpec {
        host_ref: HostRef { name: "h0".into() },
        tasks,
        restore_desired_state: true,
        ttl_seconds_after_finished: None,
    }
}

/// The reimage sequence: power off, PXE once, insert media, power on.
fn reimage() -> BMCJobSpec {
    spec(vec![
        power(PowerAction::Off),
        boot(BootDevice::Pxe),
        media("http://images/tools.iso"),
        power(PowerAction::On),
    ])
}

/// A running job whose first `done` tasks succeeded; task `done` is as given.
fn running(done: usize, current: TaskStatus, total: usize) -> BMCJobStatus {
    let mut tasks = vec![
        TaskStatus {
            state: TaskState::Succeeded,
            issued: true,
            start_time: Some(T0.into()),
            completion_time: Some(T0.into()),
            ..TaskStatus::default()
        };
        done
    ];
    tasks.push(current);
    tasks.resize_with(total, TaskStatus::default);
    BMCJobStatus {
        phase: JobPhase::Running,
        tasks,
        start_time: Some(T0.into()),
        restore: Some(RestoreStatus::default()),
        ..BMCJobStatus::default()
    }
}

fn issued() -> TaskStatus {
    TaskStatus {
        state: TaskState::Running,
        issued: true,
        start_time: Some(T0.into()),
        ..TaskStatus::default()
    }
}

fn restoring(r: RestoreStatus, total: usize) -> BMCJobStatus {
    let mut st = running(total, TaskStatus::default(), total);
    st.tasks.truncate(total);
    st.phase = JobPhase::Restoring;
    st.restore = Some(r);
    st
}

const ISO: &str = "http://images/live.iso";

/// A job whose task 2 failed (Failed at once, at T0) and whose restore runs.
fn failed(r: RestoreStatus) -> BMCJobStatus {
    let mut st = restoring(
        RestoreStatus {
            state: TaskState::Running,
            ..r
        },
        4,
    );
    st.phase = JobPhase::Failed;
    st.completion_time = Some(T0.into());
    st.tasks[1].state = TaskState::Failed;
    st.tasks[1].message = "boom".into();
    for t in &mut st.tasks[2..] {
        t.state = TaskState::Skipped;
        t.completion_time = None;
    }
    st
}

struct Row {
    name: &'static str,
    spec: BMCJobSpec,
    status: BMCJobStatus,
    host: HostView,
    behind: Option<&'static str>,
    deleting: bool,
    /// Seconds after T0.
    at: i64,
    seen: Option<Seen>,
    act_failed: Option<&'static str>,
    check: fn(&Step),
}

fn row(name: &'static str, spec: BMCJobSpec, status: BMCJobStatus, check: fn(&Step)) -> Row {
    Row {
        name,
        spec,
        status,
        host: HostView::Ready {
            online: true,
            media: None,
        },
        behind: None,
        deleting: false,
        at: 1,
        seen: None,
        act_failed: None,
        check,
    }
}

fn run(r: &Row) -> Step {
    let now: Timestamp = T0.parse().unwrap();
    let input = StepInput {
        spec: &r.spec,
        status: &r.status,
        host: &r.host,
        behind: r.behind,
        deleting: r.deleting,
        now: Timestamp::from_second(now.as_second() + r.at).unwrap(),
        seen: r.seen.clone(),
        act_failed: r.act_failed.map(String::from),
        timeout: Duration::from_secs(120),
    };
    let out = step(&input);
    assert_eq!(out, step(&input), "{}: deterministic", r.name);
    out
}

fn cond<'s>(s: &'s Step, type_: &str) -> (&'s str, &'s str) {
    let c = s
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .unwrap_or_else(|| panic!("no True {type_}: {:?}", s.status.conditions));
    (c.reason.as_str(), c.message.as_str())
}

fn states(s: &Step) -> Vec<TaskState> {
    s.status.tasks.iter().map(|t| t.state).collect()
}

#[test]
fn job_steps() {
    use TaskState::*;
    let rows = vec![
        Row {
            host: HostView::Busy("provisioning".into()),
            ..row(
                "a busy host: waits, nothing sent",
                reimage(),
                BMCJobStatus::default(),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Waiting);
                    assert_eq!(cond(s, "Waiting"), ("HostBusy", "host h0 is provisioning"));
                    assert_eq!((s.act.clone(), s.look), (None, None));
                    assert_eq!(s.status.progress, "0/4");
                },
            )
        },
        Row {
            behind: Some("older"),
            ..row(
                "an older job on the host: waits for it",
                reimage(),
                BMCJobStatus::default(),
                |s| {
                    assert_eq!(cond(s, "Waiting").0, "HostHasJob");
                    assert!(s.act.is_none());
                },
            )
        },
        Row {
            host: HostView::Missing,
            ..row(
                "no such host: failed, tasks skipped",
                reimage(),
                BMCJobStatus::default(),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    assert_eq!(cond(s, "Failed").1, "BareMetalHost h0 does not exist");
                    assert_eq!(states(s), [Skipped; 4]);
                    assert!(s.status.completion_time.is_some());
                },
            )
        },
        row(
            "a ready host: running, restore planned",
            reimage(),
            BMCJobStatus::default(),
            |s| {
                assert_eq!(s.status.phase, JobPhase::Running);
                assert_eq!(cond(s, "Running").0, "Started");
                assert!(s.status.start_time.is_some() && s.status.restore.is_some());
                assert!(s.act.is_none());
                assert_eq!(s.requeue, Some(Duration::ZERO));
            },
        ),
        row(
            "first task: power off marked issued and sent",
            reimage(),
            running(0, TaskStatus::default(), 4),
            |s| {
                assert_eq!(s.act, Some(Act::Power(PowerAction::Off)));
                assert!(s.status.tasks[0].issued);
                assert_eq!(s.status.tasks[0].state, Running);
                assert!(s.events.iter().any(|e| e.reason == "TaskStarted"));
            },
        ),
        row(
            "issued power off, after a restart: observed, never sent again",
            reimage(),
            running(0, issued(), 4),
            |s| {
                assert_eq!(s.act, None);
                assert_eq!(s.look, Some(Look::Power));
            },
        ),
        Row {
            seen: Some(Seen::Power(PowerState::On)),
            ..row(
                "still on within the timeout: look again later",
                reimage(),
                running(0, issued(), 4),
                |s| {
                    assert_eq!((s.act.clone(), s.status.tasks[0].state), (None, Running));
                    assert_eq!(s.requeue, Some(POLL));
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::Off)),
            ..row(
                "off observed: task succeeded",
                reimage(),
                running(0, issued(), 4),
                |s| {
                    assert_eq!(states(s), [Succeeded, Pending, Pending, Pending]);
                    assert_eq!(s.status.progress, "1/4");
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::On)),
            at: 121,
            ..row(
                "not off after the timeout: failed, the rest skipped, restore next",
                reimage(),
                running(0, issued(), 4),
                |s| {
                    assert_eq!(states(s), [Failed, Skipped, Skipped, Skipped]);
                    assert_eq!(
                        s.status.tasks[0].message,
                        "power=off not observed within 120s: the BMC reports power On"
                    );
                    // Failed at once; the restore goes on beside it, bounded.
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    assert!(s.status.completion_time.is_some());
                    assert!(
                        cond(s, "Failed")
                            .1
                            .ends_with("; restoring the desired state")
                    );
                    let r = s.status.restore.as_ref().unwrap();
                    assert_eq!(r.state, Running);
                    assert_eq!(
                        r.message,
                        "restoring the desired state (gives up at 2026-01-01T00:06:01Z)"
                    );
                    assert!(restore_pending(&s.status));
                    assert!(s.events.iter().any(|e| e.reason == "JobFailed"));
                    assert!(s.act.is_none());
                },
            )
        },
        Row {
            act_failed: Some("BMC 10.0.0.1:443: HTTP 500"),
            ..row(
                "the action could not be sent: task failed",
                reimage(),
                running(0, issued(), 4),
                |s| {
                    assert_eq!(s.status.tasks[0].state, Failed);
                    assert!(s.status.tasks[0].message.contains("HTTP 500"));
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    assert_eq!(cond(s, "Failed").0, "Failed");
                },
            )
        },
        row(
            "before a boot override: the current one is read first",
            reimage(),
            running(1, TaskStatus::default(), 4),
            |s| {
                assert_eq!((s.act.clone(), s.look), (None, Some(Look::Boot)));
                assert_eq!(s.status.tasks[1].state, Pending);
            },
        ),
        Row {
            seen: Some(Seen::Boot(Some(SavedBoot {
                device: "Hdd".into(),
                once: false,
                mode: Some("UEFI".into()),
            }))),
            ..row(
                "boot override: what it was kept, then sent, and the restore will put it back",
                reimage(),
                running(1, TaskStatus::default(), 4),
                |s| {
                    let r = s.status.restore.as_ref().unwrap();
                    assert!(r.boot_saved && r.clear_boot);
                    assert_eq!(r.boot_before.as_ref().unwrap().device, "Hdd");
                    assert_eq!(
                        s.act,
                        Some(Act::Boot {
                            device: BootDevice::Pxe,
                            efi: true
                        })
                    );
                },
            )
        },
        row(
            "boot override with the old one already saved: sent at once",
            reimage(),
            {
                let mut st = running(1, TaskStatus::default(), 4);
                st.restore.as_mut().unwrap().boot_saved = true;
                st
            },
            |s| {
                assert_eq!(
                    s.act,
                    Some(Act::Boot {
                        device: BootDevice::Pxe,
                        efi: true
                    })
                );
                assert!(s.status.restore.as_ref().unwrap().clear_boot);
            },
        ),
        row(
            "boot override sent: done without a reading",
            reimage(),
            running(1, issued(), 4),
            |s| {
                assert_eq!(s.status.tasks[1].state, Succeeded);
                assert_eq!(s.look, None);
            },
        ),
        row(
            "media insert: sent once, the restore will eject it",
            reimage(),
            running(2, TaskStatus::default(), 4),
            |s| {
                assert_eq!(
                    s.act,
                    Some(Act::InsertMedia("http://images/tools.iso".into()))
                );
                assert!(s.status.restore.as_ref().unwrap().media_changed);
            },
        ),
        row(
            "media issued: read the slot",
            reimage(),
            running(2, issued(), 4),
            |s| {
                assert_eq!((s.act.clone(), s.look), (None, Some(Look::Media)));
            },
        ),
        Row {
            seen: Some(Seen::Media {
                inserted: true,
                image: Some("http://images/tools.iso".into()),
            }),
            ..row(
                "our image in the slot: task succeeded",
                reimage(),
                running(2, issued(), 4),
                |s| {
                    assert_eq!(s.status.tasks[2].state, Succeeded);
                },
            )
        },
        Row {
            seen: Some(Seen::Power(PowerState::On)),
            ..row(
                "last task done: restore next",
                reimage(),
                running(3, issued(), 4),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Restoring);
                    assert_eq!(s.status.progress, "4/4");
                },
            )
        },
        row(
            "cycle and reset show no lasting state: done once sent",
            spec(vec![power(PowerAction::Cycle)]),
            running(0, issued(), 1),
            |s| assert_eq!(s.status.tasks[0].state, Succeeded),
        ),
        row(
            "status reads power, sends nothing",
            spec(vec![power(PowerAction::Status)]),
            running(0, TaskStatus::default(), 1),
            |s| assert_eq!((s.act.clone(), s.look), (None, Some(Look::Power))),
        ),
        Row {
            seen: Some(Seen::Power(PowerState::Off)),
            ..row(
                "status with a reading: succeeded, the state in the message",
                spec(vec![power(PowerAction::Status)]),
                running(
                    0,
                    TaskStatus {
                        state: Running,
                        start_time: Some(T0.into()),
                        ..TaskStatus::default()
                    },
                    1,
                ),
                |s| assert_eq!(s.status.tasks[0].message, "power is Off"),
            )
        },
        Row {
            deleting: true,
            ..row(
                "deleted mid-job: the next task does not start, restore runs",
                reimage(),
                running(1, TaskStatus::default(), 4),
                |s| {
                    assert_eq!(states(s), [Succeeded, Failed, Skipped, Skipped]);
                    assert_eq!(s.status.tasks[1].message, "the job was deleted");
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    assert!(restore_pending(&s.status));
                    assert!(s.act.is_none());
                },
            )
        },
        Row {
            host: HostView::Missing,
            ..row(
                "host deleted mid-job: failed, nothing to restore",
                reimage(),
                running(1, TaskStatus::default(), 4),
                |s| {
                    assert_eq!(s.status.phase, JobPhase::Failed);
                    assert!(s.status.restore.is_none());
                    assert!(
                        cond(s, "Failed")
                            .1
                            .contains("the BareMetalHost was deleted")
                    );
                },
            )
        },
        row(
            "no restore asked (Rufio semantics): completed after the tasks",
            BMCJobSpec {
                restore_desired_state: false,
                ..spec(vec![power(PowerAction::Cycle)])
            },
            {
                let mut st = running(0, issued(), 1);
                st.restore = None;
                st
            },
            |s| {
                assert_eq!(s.status.phase, JobPhase::Completed);
                assert_eq!(cond(s, "Completed").1, "all tasks succeeded");
            },
        ),
    ];
    check_rows(&rows);
}

fn check_rows(rows: &[Row]) {
    for r in rows {
        let out = run(r);
        (r.check)(&out);
        // Exactly one of the four conditions is True once any is set.
        let trues = out
            .status
            .conditions
            .iter()
            .filter(|c| c.status == "True")
            .count();
        assert!(trues <= 1, "{}: {:?}", r.name, out.status.conditions);
    }
}
