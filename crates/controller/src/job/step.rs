//! One step of a BMCJob, as a pure function of the job, its host and the last observation:
//! which BMC action to send or what to look at next, and the new status. Table-tested in
//! step_tests.rs, like the host's `decide`.
//!
//! Destructive actions run at most once: a step that sends one returns a status with the task
//! marked `issued`, which the reconciler writes *before* sending; after a restart the task is
//! observed, never sent again. Power tasks complete when the BMC shows the target state
//! (failing after `timeout`), media tasks when the slot shows the image (or none).

use std::time::Duration;

use ferrometal_api::job::conditions::{COMPLETED, FAILED, RUNNING, WAITING};
use ferrometal_api::job::{
    BMCJobSpec, BMCJobStatus, BootDevice, JobPhase, JobTask, PowerAction, RestoreStatus, SavedBoot,
    TaskState, TaskStatus,
};
use ferrometal_bmc::PowerState;
use k8s_openapi::jiff::Timestamp;

use crate::conditions::set_condition;

/// What the job controller knows of the job's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostView {
    /// No such BareMetalHost (or it is being deleted).
    Missing,
    /// Registering, inspecting, provisioning, deprovisioning or paused: jobs wait.
    Busy(String),
    /// Jobs may run; `online` is the desired power the restore returns to, `media` the live
    /// ISO the host's provisioning put in its virtual media slot (the restore puts it back).
    Ready { online: bool, media: Option<String> },
}

/// A BMC action, sent by the reconciler after it wrote the status returned with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    Power(PowerAction),
    Boot {
        device: BootDevice,
        efi: bool,
    },
    /// Put back the boot override the host had before a task changed it (`None`: clear).
    RestoreBoot(Option<SavedBoot>),
    InsertMedia(String),
    EjectMedia,
}

/// What to read from the BMC before the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    Power,
    Media,
    /// The boot override, before a task changes it.
    Boot,
}

/// What the reconciler read (or why it could not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Power(PowerState),
    Media {
        inserted: bool,
        image: Option<String>,
    },
    Boot(Option<SavedBoot>),
    Error(String),
}

#[derive(Debug, Clone)]
pub struct StepInput<'a> {
    pub spec: &'a BMCJobSpec,
    pub status: &'a BMCJobStatus,
    pub host: &'a HostView,
    /// An older unfinished job on the same host: this one waits for it.
    pub behind: Option<&'a str>,
    pub deleting: bool,
    pub now: Timestamp,
    /// The answer to the previous step's `look`.
    pub seen: Option<Seen>,
    /// The previous step's `act` could not be sent: why.
    pub act_failed: Option<String>,
    /// How long a task or the restore may wait for the BMC to show its effect.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    pub status: BMCJobStatus,
    pub act: Option<Act>,
    pub look: Option<Look>,
    pub requeue: Option<Duration>,
    pub events: Vec<JobEvent>,
}

/// Requeue while waiting for a host or a BMC to show an effect.
pub const POLL: Duration = Duration::from_secs(2);
const HOST_WAIT: Duration = Duration::from_secs(10);

pub fn step(input: &StepInput) -> Step {
    let mut s = Stepper {
        input,
        out: Step {
            status: input.status.clone(),
            ..Step::default()
        },
        now: rfc3339(input.now),
    };
    let tasks = input.spec.tasks.len();
    s.out.status.tasks.resize_with(tasks, TaskStatus::default);
    match s.out.status.phase {
        JobPhase::Waiting => s.waiting(),
        JobPhase::Running => s.running(),
        JobPhase::Restoring => s.restoring(),
        // A failed job is Failed at once (Rufio's semantics); its restore goes on beside it.
        JobPhase::Failed if restore_pending(&s.out.status) => s.restoring(),
        JobPhase::Completed | JobPhase::Failed => {}
    }
    let done = s
        .out
        .status
        .tasks
        .iter()
        .filter(|t| matches!(t.state, TaskState::Succeeded | TaskState::Failed))
        .count();
    s.out.status.progress = format!("{done}/{tasks}");
    s.out
}

/// A restore still to finish: the job holds its host until it has.
pub fn restore_pending(status: &BMCJobStatus) -> bool {
    status
        .restore
        .as_ref()
        .is_some_and(|r| matches!(r.state, TaskState::Pending | TaskState::Running))
}

fn rfc3339(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

fn elapsed(since: Option<&str>, now: Timestamp) -> Duration {
    since
        .and_then(|s| s.parse::<Timestamp>().ok())
        .map(|t| Duration::from_secs(now.as_second().saturating_sub(t.as_second()).max(0) as u64))
        .unwrap_or_default()
}

fn target(action: PowerAction) -> Option<PowerState> {
    match action {
        PowerAction::On => Some(PowerState::On),
        PowerAction::Off | PowerAction::Soft => Some(PowerState::Off),
        PowerAction::Status | PowerAction::Cycle | PowerAction::Reset => None,
    }
}

struct Stepper<'a> {
    input: &'a StepInput<'a>,
    out: Step,
    now: String,
}

impl Stepper<'_> {
    fn st(&mut self) -> &mut BMCJobStatus {
        &mut self.out.status
    }

    fn condition(&mut self, type_: &str, reason: &str, message: &str) {
        // Exactly one of the four is True at a time.
        let now = self.now.clone();
        for t in [WAITING, RUNNING, COMPLETED, FAILED] {
            let (status, r, m) = if t == type_ {
                ("True", reason, message)
            } else {
                ("False", t, "")
            };
            set_condition(&mut self.st().conditions, t, status, r, m, &now, None);
        }
    }

    fn event(&mut self, warning: bool, reason: &'static str, message: impl Into<String>) {
        self.out.events.push(JobEvent {
            warning,
            reason,
            message: message.into(),
        });
    }

    fn waiting(&mut self) {
        let host = self.input.spec.host_ref.name.clone();
        if self.input.deleting {
            return self.finish_unstarted("the job was deleted before it started");
        }
        match self.input.host {
            HostView::Missing => {
                self.finish_unstarted(&format!("BareMetalHost {host} does not exist"));
            }
            HostView::Busy(why) => {
                let m = format!("host {host} is {why}");
                self.condition(WAITING, "HostBusy", &m);
                self.out.requeue = Some(HOST_WAIT);
            }
            HostView::Ready { .. } => {
                if let Some(other) = self.input.behind {
                    let m = format!("job {other} runs on host {host} first");
                    self.condition(WAITING, "HostHasJob", &m);
                    self.out.requeue = Some(HOST_WAIT);
                    return;
                }
                let now = self.now.clone();
                let restore = self.input.spec.restore_desired_state;
                let st = self.st();
                st.phase = JobPhase::Running;
                st.start_time = Some(now);
                st.restore = restore.then(RestoreStatus::default);
                self.condition(RUNNING, "Started", "");
                self.event(false, "JobStarted", format!("running on host {host}"));
                self.out.requeue = Some(Duration::ZERO);
            }
        }
    }

    /// Ends a job that never ran a task: every task skipped, nothing to restore.
    fn finish_unstarted(&mut self, why: &str) {
        for t in &mut self.st().tasks {
            t.state = TaskState::Skipped;
        }
        self.st().restore = None;
        self.finish(false, why);
    }

    fn finish(&mut self, ok: bool, message: &str) {
        let now = self.now.clone();
        let st = self.st();
        st.phase = if ok {
            JobPhase::Completed
        } else {
            JobPhase::Failed
        };
        st.completion_time = Some(now);
        if ok {
            self.condition(COMPLETED, "Completed", message);
            self.event(false, "JobCompleted", message.to_string());
        } else {
            self.condition(FAILED, "Failed", message);
            self.event(true, "JobFailed", message.to_string());
        }
    }

    fn running(&mut self) {
        let Some(i) = self
            .out
            .status
            .tasks
            .iter()
            .position(|t| t.state != TaskState::Succeeded)
        else {
            return self.after_tasks(None);
        };
        if self.input.host == &HostView::Missing {
            return self.fail_task(i, "the BareMetalHost was deleted".into(), false);
        }
        let task = self.input.spec.tasks[i].clone();
        let t = self.out.status.tasks[i].clone();
        if self.input.deleting && !t.issued {
            return self.fail_task(i, "the job was deleted".into(), true);
        }
        if let Some(why) = &self.input.act_failed
            && t.issued
            && t.state == TaskState::Running
        {
            return self.fail_task(i, format!("{}: {why}", task.describe()), true);
        }
        let saving = self
            .out
            .status
            .restore
            .as_ref()
            .is_some_and(|r| !r.boot_saved);
        if t.state == TaskState::Pending && task.one_time_boot_device_action.is_some() && saving {
            // Read the override before changing it, so the restore can put it back.
            match &self.input.seen {
                Some(Seen::Boot(saved)) => {
                    let r = self.restore_mut();
                    r.boot_saved = true;
                    r.boot_before = saved.clone();
                }
                Some(_) => self.restore_mut().boot_saved = true,
                None => {
                    self.out.look = Some(Look::Boot);
                    return;
                }
            }
        }
        if t.state == TaskState::Pending {
            let now = self.now.clone();
            let ts = &mut self.out.status.tasks[i];
            ts.state = TaskState::Running;
            ts.start_time = Some(now);
            if task.power_action == Some(PowerAction::Status) {
                // Read-only: nothing to send, only a reading.
                return self.observe(i, &task);
            }
            return self.issue(i, &task);
        }
        self.observe(i, &task);
    }

    /// Marks task `i` issued and asks for its action (written first, then sent).
    fn issue(&mut self, i: usize, task: &JobTask) {
        self.out.status.tasks[i].issued = true;
        let act = if let Some(p) = task.power_action {
            if let (Some(r), PowerAction::On | PowerAction::Cycle | PowerAction::Reset) =
                (self.out.status.restore.as_mut(), p)
            {
                r.booted = true;
            }
            Act::Power(p)
        } else if let Some(b) = &task.one_time_boot_device_action {
            if let Some(r) = self.out.status.restore.as_mut() {
                r.clear_boot = true;
            }
            Act::Boot {
                device: b.device.first().copied().unwrap_or(BootDevice::Pxe),
                efi: b.efi_boot,
            }
        } else {
            let m = task.virtual_media_action.clone().unwrap_or_default();
            if let Some(r) = self.out.status.restore.as_mut() {
                r.media_changed = true;
            }
            if m.media_url.is_empty() {
                Act::EjectMedia
            } else {
                Act::InsertMedia(m.media_url)
            }
        };
        self.event(
            false,
            "TaskStarted",
            format!("task {}: {}", i + 1, task.describe()),
        );
        self.out.act = Some(act);
        self.out.requeue = Some(Duration::ZERO);
    }

    /// A running task: done when the BMC shows its effect.
    fn observe(&mut self, i: usize, task: &JobTask) {
        let started = self.out.status.tasks[i].start_time.clone();
        let late = elapsed(started.as_deref(), self.input.now) > self.input.timeout;
        let want_power = task.power_action.map(|p| (p, target(p)));
        match (want_power, &task.virtual_media_action, &self.input.seen) {
            // Cycle, reset and boot overrides show no lasting state: sent is done.
            (Some((_, None)), _, _) if task.power_action != Some(PowerAction::Status) => {
                self.succeed(i, String::new())
            }
            (None, None, _) => self.succeed(i, String::new()),
            (Some((PowerAction::Status, _)), _, Some(Seen::Power(p))) => {
                self.succeed(i, format!("power is {p}"))
            }
            (Some((_, Some(want))), _, Some(Seen::Power(p))) if *p == want => {
                self.succeed(i, String::new())
            }
            (None, Some(m), Some(Seen::Media { inserted, image }))
                if (m.media_url.is_empty() && !inserted)
                    || (*inserted && image.as_deref() == Some(m.media_url.as_str())) =>
            {
                self.succeed(i, String::new())
            }
            (_, _, Some(seen)) if late => {
                let shown = match seen {
                    Seen::Power(p) => format!("the BMC reports power {p}"),
                    Seen::Media { image, .. } => format!(
                        "the BMC reports media {}",
                        image.as_deref().unwrap_or("none")
                    ),
                    Seen::Boot(_) => "a boot reading".into(),
                    Seen::Error(e) => e.clone(),
                };
                let m = format!(
                    "{} not observed within {}s: {shown}",
                    task.describe(),
                    self.input.timeout.as_secs()
                );
                self.fail_task(i, m, true)
            }
            (_, _, Some(_)) => self.out.requeue = Some(POLL),
            (_, _, None) => {
                self.out.look = Some(if task.virtual_media_action.is_some() {
                    Look::Media
                } else {
                    Look::Power
                })
            }
        }
    }

    fn succeed(&mut self, i: usize, message: String) {
        let now = self.now.clone();
        let ts = &mut self.out.status.tasks[i];
        ts.state = TaskState::Succeeded;
        ts.message = message;
        ts.completion_time = Some(now);
        let d = self.input.spec.tasks[i].describe();
        self.event(false, "TaskSucceeded", format!("task {}: {d}", i + 1));
        self.out.requeue = Some(Duration::ZERO);
        if i + 1 == self.out.status.tasks.len() {
            self.after_tasks(None);
        }
    }

    /// Task `i` failed: later tasks are skipped and the restore runs (`restore`: the host is
    /// still there to restore).
    fn fail_task(&mut self, i: usize, message: String, restore: bool) {
        let now = self.now.clone();
        let st = self.st();
        st.tasks[i].state = TaskState::Failed;
        st.tasks[i].message = message.chars().take(1024).collect();
        st.tasks[i].completion_time = Some(now);
        for t in st.tasks.iter_mut().skip(i + 1) {
            t.state = TaskState::Skipped;
        }
        if !restore {
            st.restore = None;
        }
        self.event(true, "TaskFailed", format!("task {}: {message}", i + 1));
        self.after_tasks(Some(format!("task {} failed: {message}", i + 1)));
    }

    fn after_tasks(&mut self, failure: Option<String>) {
        let restore = self.out.status.restore.is_some();
        if restore {
            let deadline = rfc3339(self.restore_deadline());
            let r = self.restore_mut();
            r.state = TaskState::Running;
            r.message = format!("restoring the desired state (gives up at {deadline})");
            self.out.requeue = Some(Duration::ZERO);
        }
        match failure {
            // Failed at once, as Rufio: automation waiting for Failed need not wait for the
            // restore, whose progress is in status.restore.
            Some(f) if restore => self.finish(false, &format!("{f}; restoring the desired state")),
            Some(f) => self.finish(false, &f),
            None if restore => self.st().phase = JobPhase::Restoring,
            None => self.finish(true, "all tasks succeeded"),
        }
    }

    /// Back to the desired state: the media slot as the host's provisioning left it (its live
    /// ISO, or empty), the boot override put back (or set to that ISO), power as
    /// `spec.online` says, and a host the job booted elsewhere booted into its image again;
    /// each observed before it counts.
    fn restoring(&mut self) {
        if let Some(e) = self.input.act_failed.clone() {
            return self.restore_error(e);
        }
        let (online, image) = match self.input.host {
            HostView::Ready { online, media } => (*online, media.clone()),
            HostView::Busy(_) => {
                self.out.requeue = Some(HOST_WAIT);
                return;
            }
            HostView::Missing => return self.end_restore(None),
        };
        let r = self.out.status.restore.clone().unwrap_or_default();
        if r.media_changed {
            match &self.input.seen {
                Some(Seen::Media { inserted, image: i })
                    if (image.is_none() && !inserted)
                        || (*inserted && i.is_some() && *i == image) =>
                {
                    let r = self.restore_mut();
                    r.media_changed = false;
                    // The image is back: so must be the boot that starts it.
                    r.clear_boot |= image.is_some();
                    self.out.requeue = Some(Duration::ZERO);
                }
                // Harmless to repeat (an insert of what is inserted is a no-op): sent until
                // the slot shows it.
                Some(Seen::Media { .. }) => {
                    self.out.act = Some(match image {
                        Some(url) => Act::InsertMedia(url),
                        None => Act::EjectMedia,
                    });
                    self.out.requeue = Some(POLL);
                }
                Some(Seen::Error(e)) => self.restore_error(e.clone()),
                _ => self.out.look = Some(Look::Media),
            }
            return;
        }
        if r.clear_boot {
            let r = self.restore_mut();
            r.clear_boot = false;
            let saved = match &image {
                // The boot the live ISO needs, as provisioning set it.
                Some(_) => {
                    r.restart = r.booted && online;
                    Some(SavedBoot {
                        device: "Cd".into(),
                        once: true,
                        mode: r.boot_before.as_ref().and_then(|b| b.mode.clone()),
                    })
                }
                None => r.boot_before.clone(),
            };
            self.out.act = Some(Act::RestoreBoot(saved));
            self.out.requeue = Some(Duration::ZERO);
            return;
        }
        let want = if online {
            PowerState::On
        } else {
            PowerState::Off
        };
        match &self.input.seen {
            // A restart into the image counts once sent (sent is done, as for tasks).
            Some(Seen::Power(p)) if *p == want && (!r.restart || r.power_issued) => {
                self.end_restore(None)
            }
            Some(Seen::Power(p)) if !r.power_issued => {
                self.restore_mut().power_issued = true;
                self.out.act = Some(Act::Power(match (online, p) {
                    // On, but running what the job booted: restart into the image.
                    (true, PowerState::On) => PowerAction::Reset,
                    (true, _) => PowerAction::On,
                    (false, _) => PowerAction::Off,
                }));
                self.out.requeue = Some(POLL);
            }
            Some(Seen::Error(e)) => self.restore_error(e.clone()),
            Some(seen) => {
                if self.restore_late() {
                    let shown = match seen {
                        Seen::Power(p) => format!("the BMC reports power {p}"),
                        _ => "no power reading".into(),
                    };
                    self.end_restore(Some(format!("power {want} not observed: {shown}")));
                } else {
                    self.out.requeue = Some(POLL);
                }
            }
            None => self.out.look = Some(Look::Power),
        }
    }

    fn restore_mut(&mut self) -> &mut RestoreStatus {
        self.out
            .status
            .restore
            .get_or_insert_with(RestoreStatus::default)
    }

    /// When the restore gives up: twice a task's timeout after the last task ended.
    fn restore_deadline(&self) -> Timestamp {
        let since = self
            .out
            .status
            .tasks
            .iter()
            .filter_map(|t| t.completion_time.as_deref())
            .filter_map(|t| t.parse::<Timestamp>().ok())
            .max()
            .unwrap_or(self.input.now);
        let bound = (self.input.timeout * 2).as_secs() as i64;
        Timestamp::from_second(since.as_second() + bound).unwrap_or(since)
    }

    fn restore_late(&self) -> bool {
        self.input.now > self.restore_deadline()
    }

    /// The BMC refused or did not answer: retried until the deadline, saying so meanwhile.
    fn restore_error(&mut self, e: String) {
        if self.restore_late() {
            self.end_restore(Some(e));
        } else {
            let deadline = rfc3339(self.restore_deadline());
            let m: String = format!("retrying until {deadline}: {e}")
                .chars()
                .take(1024)
                .collect();
            self.restore_mut().message = m;
            self.out.requeue = Some(POLL);
        }
    }

    fn end_restore(&mut self, failure: Option<String>) {
        let r = self.restore_mut();
        match &failure {
            Some(m) => {
                r.state = TaskState::Failed;
                r.message = m.chars().take(1024).collect();
            }
            None => {
                r.state = TaskState::Succeeded;
                r.message.clear();
            }
        }
        let failed_task = self
            .out
            .status
            .tasks
            .iter()
            .position(|t| t.state == TaskState::Failed);
        let restored = match &failure {
            Some(f) => format!("restore failed: {f}"),
            None => "desired state restored".into(),
        };
        let Some(i) = failed_task else {
            return match failure {
                Some(_) => self.finish(false, &restored),
                None => self.finish(true, "all tasks succeeded; desired state restored"),
            };
        };
        let m = format!(
            "task {} failed: {}; {restored}",
            i + 1,
            self.out.status.tasks[i].message
        );
        if self.out.status.phase == JobPhase::Failed {
            // Failed since the task failed: only the restore's outcome is new.
            let now = self.now.clone();
            set_condition(
                &mut self.st().conditions,
                FAILED,
                "True",
                "Failed",
                &m,
                &now,
                None,
            );
            let (warning, reason) = match failure {
                Some(_) => (true, "RestoreFailed"),
                None => (false, "RestoreSucceeded"),
            };
            self.event(warning, reason, restored);
        } else {
            self.finish(false, &m);
        }
    }
}
