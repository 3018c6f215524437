//! One reconcile of one BMCJob: read the job and its host, then step (pure) as far as the job
//! can go without waiting: through readings (at most `MAX_READS`) up to one BMC action. The
//! status is written before that action is sent (so a restart never sends it twice), and
//! otherwise once at the end. Each BMC call is a single request with the provisioner's
//! timeout; waiting for the BMC to show an effect is a requeue.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::job::{BMCJob, BMCJobStatus, JobPhase, PowerAction, SavedBoot, TaskState};
use ferrometal_api::{BareMetalHost, OperationalStatus, ProvisioningState as S};
use ferrometal_provisioner::{ErrorKind, HostInfo, ProvisionerError};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;

use super::step::{Act, HostView, JobEvent, Look, Seen, Step, StepInput, restore_pending, step};
use crate::context::Context;
use crate::error::{Error, retry_after};
use crate::events::HostEvent;
use crate::host_info::host_info;
use crate::merge_patch::merge_diff;
use crate::secrets::read_credentials;

/// Held on a job until it has finished (and restored), so deleting a running job stops it
/// cleanly after the current task.
pub const FINALIZER: &str = "ferrometal.io/bmcjob";

/// How long a new job waits for a host it cannot see before failing for want of it.
const HOST_GRACE: Duration = Duration::from_secs(30);

pub struct JobContext {
    pub ctx: Arc<Context>,
    pub jobs: Store<BMCJob>,
    /// How long a task or the restore may take to show on the BMC.
    pub timeout: Duration,
}

fn finished(status: &BMCJobStatus) -> bool {
    matches!(status.phase, JobPhase::Completed | JobPhase::Failed)
}

/// Finished and restored: the job no longer holds its host.
fn settled(status: &BMCJobStatus) -> bool {
    finished(status) && !restore_pending(status)
}

/// What the job controller may do with the host now. `iso_on_media`: the provisioner boots
/// live ISOs from the BMC's virtual media itself (redfish), so a provisioned host's ISO is
/// part of its desired state.
pub fn host_view(host: Option<&BareMetalHost>, iso_on_media: bool) -> HostView {
    let Some(host) = host.filter(|h| h.metadata.deletion_timestamp.is_none()) else {
        return HostView::Missing;
    };
    if host.annotations().contains_key(ann::PAUSED) {
        return HostView::Busy("paused".into());
    }
    let status = host.status.clone().unwrap_or_default();
    let detached = status.operational_status == OperationalStatus::Detached;
    if status.operational_status == OperationalStatus::Servicing {
        // Its firmware is being changed, across a boot the job must not interrupt.
        return HostView::Busy("servicing".into());
    }
    let media = (iso_on_media && status.provisioning.state == S::Provisioned)
        .then_some(status.provisioning.image.as_ref())
        .flatten()
        .filter(|i| i.is_live_iso() && !i.url.is_empty())
        .map(|i| i.url.clone());
    let ready = HostView::Ready {
        online: host.spec.online,
        media,
    };
    match status.provisioning.state {
        _ if detached => ready,
        S::Available | S::Ready | S::Provisioned | S::ExternallyProvisioned => ready,
        S::Unmanaged => HostView::Busy("unmanaged (no BMC)".into()),
        S::None => HostView::Busy("not registered yet".into()),
        other => HostView::Busy(other.as_str().into()),
    }
}

/// The unfinished job this one waits for: the host's current holder, or an older job.
fn ahead_of(jobs: &Store<BMCJob>, job: &BMCJob, host: Option<&BareMetalHost>) -> Option<String> {
    let name = job.name_any();
    let ns = job.namespace();
    if let Some(holder) = host.and_then(|h| h.annotations().get(ann::JOB))
        && *holder != name
        && jobs.state().iter().any(|j| {
            j.name_any() == *holder
                && j.namespace() == ns
                && !j.status.as_ref().is_some_and(settled)
        })
    {
        return Some(holder.clone());
    }
    // Over every job, for each reconcile: the host's own jobs are picked before anything is
    // copied.
    fn order(j: &BMCJob) -> (Option<jiff::Timestamp>, &str) {
        (
            j.metadata.creation_timestamp.as_ref().map(|t| t.0),
            j.metadata.name.as_deref().unwrap_or_default(),
        )
    }
    let mine = order(job);
    let jobs = jobs.state();
    jobs.iter()
        .filter(|j| {
            j.spec.host_ref.name == job.spec.host_ref.name
                && j.metadata.namespace == job.metadata.namespace
                && j.metadata.name.as_deref() != Some(name.as_str())
                && j.metadata.deletion_timestamp.is_none()
                && !j.status.as_ref().is_some_and(settled)
                && order(j) < mine
        })
        .min_by_key(|j| order(j))
        .map(|j| j.name_any())
}

pub async fn reconcile(job: Arc<BMCJob>, jc: Arc<JobContext>) -> Result<Action, Error> {
    let ctx = &jc.ctx;
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let jobs: Api<BMCJob> = Api::namespaced(ctx.client.clone(), &ns);
    let hosts: Api<BareMetalHost> = Api::namespaced(ctx.client.clone(), &ns);
    let status = job.status.clone().unwrap_or_default();
    let deleting = job.metadata.deletion_timestamp.is_some();
    // The host controller's cache: its resourceVersion guards the lock, so a stale copy
    // costs a conflict and a retry, never two holders.
    let host = ctx
        .hosts
        .get(&ObjectRef::new(&job.spec.host_ref.name).within(&ns))
        .map(|h| (*h).clone());
    let young = job.metadata.creation_timestamp.as_ref().is_some_and(|t| {
        Timestamp::now().as_second() - t.0.as_second() < HOST_GRACE.as_secs() as i64
    });
    if host.is_none() && status.phase == JobPhase::Waiting && young && !deleting {
        // Created with its host: the cache may not show the host yet.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if host.is_none() && ctx.config.label_selector.is_some() {
        // Another shard's host, or not cached yet: that shard runs its jobs.
        return Ok(Action::requeue(Duration::from_secs(30)));
    }

    if settled(&status) {
        release(&hosts, host.as_ref(), &name).await?;
        if job.finalizers().iter().any(|f| f == FINALIZER) {
            let rest: Vec<_> = job
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER)
                .collect();
            jobs.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": rest}})),
            )
            .await?;
        }
        return ttl(&jobs, &job, &status).await;
    }
    if !deleting && !job.finalizers().iter().any(|f| f == FINALIZER) {
        let mut all = job.finalizers().to_vec();
        all.push(FINALIZER.into());
        jobs.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": all,
                "resourceVersion": job.resource_version()}})),
        )
        .await?;
        return Ok(Action::requeue(Duration::ZERO));
    }

    let view = host_view(host.as_ref(), ctx.provisioner.name() == "redfish");
    let now = Timestamp::now();
    let mut info: Option<Result<HostInfo, ProvisionerError>> = None;
    // The status as the steps so far left it, written once before an action is sent and
    // once at the end: a task's end and the next task's start are one write.
    let mut current = status.clone();
    let mut events = Vec::new();
    let mut reads = 0;
    // One BMC reading answers a power look and a boot look alike (see `read`); no action is
    // sent between two looks of one reconcile, so the second may use the first's reading.
    let mut system = Reading::NotYet;
    let mut seen = None;
    let mut rv = job.resource_version();
    let mut out;
    let mut iterations = 0;
    loop {
        iterations += 1;
        let behind = (current.phase == JobPhase::Waiting)
            .then(|| ahead_of(&jc.jobs, &job, host.as_ref()))
            .flatten();
        let input = StepInput {
            spec: &job.spec,
            status: &current,
            host: &view,
            behind: behind.as_deref(),
            deleting,
            now,
            seen: seen.take(),
            act_failed: None,
            timeout: jc.timeout,
        };
        out = step(&input);
        events.append(&mut out.events);
        if let Some(look) = out.look {
            let Some(h) = &host else { break };
            if reads == MAX_READS {
                // Read in the next reconcile: what the steps decided so far is written now.
                out.look = None;
                out.requeue = Some(Duration::ZERO);
                break;
            }
            reads += 1;
            if info.is_none() {
                info = Some(target(ctx, h).await);
            }
            seen = Some(match info.as_ref() {
                Some(Ok(i)) => read(ctx, i, look, &mut system).await,
                Some(Err(e)) => Seen::Error(e.message.clone()),
                None => unreachable!("set above"),
            });
            // The same status again, now with the reading.
            continue;
        }
        if current.phase == JobPhase::Waiting && out.status.phase == JobPhase::Running {
            let Some(h) = &host else {
                return Ok(Action::requeue(Duration::from_secs(1)));
            };
            // The host's resourceVersion makes two jobs racing for it conflict (409, retried).
            hosts
                .patch(
                    &h.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"annotations": {ann::JOB: &name},
                        "resourceVersion": h.resource_version()}})),
                )
                .await?;
        }
        if let Some(act) = out.act.clone() {
            // Written before it is sent, so a restart never sends it twice; then this
            // reconcile ends (the next one observes the action's effect).
            write_status(&jobs, &name, &mut rv, &status, &out.status).await?;
            publish(ctx, &job, host.as_ref(), &std::mem::take(&mut events)).await;
            if let Some(h) = &host
                && info.is_none()
            {
                info = Some(target(ctx, h).await);
            }
            let sent = match info {
                Some(Ok(info)) => send(ctx, &info, &act).await,
                Some(Err(e)) => Err(e),
                None => Err(ProvisionerError::new(
                    ErrorKind::InvalidInput,
                    "the host is gone",
                )),
            };
            match sent {
                Ok(()) => {}
                // A one-time override is consumed by the next boot anyway.
                Err(e)
                    if matches!(act, Act::RestoreBoot(_)) && e.kind == ErrorKind::Unsupported => {}
                Err(e) => {
                    let failed = StepInput {
                        status: &out.status,
                        act_failed: Some(e.message.clone()),
                        seen: None,
                        ..input.clone()
                    };
                    let mut after = step(&failed);
                    write_status(&jobs, &name, &mut rv, &out.status, &after.status).await?;
                    publish(ctx, &job, host.as_ref(), &std::mem::take(&mut after.events)).await;
                    return Ok(requeue(&after));
                }
            }
            return Ok(requeue(&out));
        }
        let progressing = out.requeue == Some(Duration::ZERO) && !settled(&out.status);
        if !progressing || iterations >= MAX_STEPS {
            break;
        }
        current = out.status.clone();
    }
    write_status(&jobs, &name, &mut rv, &status, &out.status).await?;
    publish(ctx, &job, host.as_ref(), &events).await;
    Ok(requeue(&out))
}

/// Readings per reconcile: a task's confirmation and the next task's boot reading, so a
/// reconcile ends one task and starts the next. Each is one request with the provisioner's
/// timeout; more would hold a worker longer on a slow BMC.
const MAX_READS: usize = 2;

/// Pure steps per reconcile (each one moves the job on): a bound, not a budget.
const MAX_STEPS: usize = 16;

fn requeue(out: &Step) -> Action {
    match out.requeue {
        Some(d) => Action::requeue(d),
        None if settled(&out.status) => Action::requeue(Duration::ZERO),
        // A reading is still wanted: look again shortly.
        None if out.look.is_some() => Action::requeue(super::step::POLL),
        None => Action::await_change(),
    }
}

pub fn error_policy(_job: Arc<BMCJob>, error: &Error, _jc: Arc<JobContext>) -> Action {
    tracing::debug!(%error, "bmcjob reconcile failed");
    retry_after(error)
}

/// The host's BMC as the provisioner addresses it (credentials from its Secret).
async fn target(ctx: &Context, host: &BareMetalHost) -> Result<HostInfo, ProvisionerError> {
    let (_, creds) = read_credentials(&ctx.client, &ctx.secrets, host)
        .await
        .map_err(|e| ProvisionerError::new(ErrorKind::Unreachable, e.to_string()))?;
    host_info(host, creds.as_ref())
}

/// What this reconcile learned of reading the host's power and boot override together.
enum Reading {
    NotYet,
    /// The backend reads them apart (IPMI, Ironic): each look is its own request.
    Apart,
    Both(
        ferrometal_bmc::PowerState,
        Option<ferrometal_bmc::BootOverride>,
    ),
}

/// Reads what `look` asks for. A power or boot look reads both where the backend has them in
/// one document (Redfish) and keeps the reading in `system` for the reconcile's next look: a
/// task's power confirmation and the next task's boot reading are one request, not two.
async fn read(ctx: &Context, info: &HostInfo, look: Look, system: &mut Reading) -> Seen {
    if matches!(look, Look::Power | Look::Boot) {
        if let Reading::NotYet = system {
            match ctx.bmc(info, ctx.provisioner.power_and_boot(info)).await {
                Ok((power, boot)) => *system = Reading::Both(power, boot),
                Err(e) if e.kind == ErrorKind::Unsupported => *system = Reading::Apart,
                Err(e) => return Seen::Error(e.message),
            }
        }
        if let Reading::Both(power, boot) = system {
            return match look {
                Look::Power => Seen::Power(*power),
                _ => Seen::Boot(boot.map(saved_boot)),
            };
        }
    }
    let r = ctx.bmc(info, read_bmc(ctx, info, look)).await;
    r.unwrap_or_else(|e| Seen::Error(e.message))
}

async fn read_bmc(ctx: &Context, info: &HostInfo, look: Look) -> Result<Seen, ProvisionerError> {
    match look {
        Look::Power => ctx.provisioner.power_state(info).await.map(Seen::Power),
        Look::Media => match ctx.provisioner.media_state(info).await {
            Ok(m) => Ok(Seen::Media {
                inserted: m.inserted,
                image: m.image,
            }),
            // No virtual media here: nothing is inserted, so the restore has nothing to eject.
            Err(e) if e.kind == ErrorKind::Unsupported => Ok(Seen::Media {
                inserted: false,
                image: None,
            }),
            Err(e) => Err(e),
        },
        Look::Boot => match ctx.provisioner.boot_settings(info).await {
            Ok(o) => Ok(Seen::Boot(o.map(saved_boot))),
            // Nothing readable: the restore clears the override instead.
            Err(e) if e.kind == ErrorKind::Unsupported => Ok(Seen::Boot(None)),
            Err(e) => Err(e),
        },
    }
}

async fn send(ctx: &Context, info: &HostInfo, act: &Act) -> Result<(), ProvisionerError> {
    ctx.bmc(info, send_bmc(ctx, info, act)).await
}

async fn send_bmc(ctx: &Context, info: &HostInfo, act: &Act) -> Result<(), ProvisionerError> {
    use ferrometal_api::annotations::Operation as Op;
    use ferrometal_api::job::BootDevice as D;
    use ferrometal_bmc::BootDevice as B;
    let p = &ctx.provisioner;
    match act {
        Act::Power(action) => {
            let op = match action {
                PowerAction::On => Op::ForceOn,
                PowerAction::Off => Op::ForceOff,
                PowerAction::Soft => Op::GracefulShutdown,
                PowerAction::Cycle => Op::PowerCycle,
                PowerAction::Reset => Op::ForceRestart,
                PowerAction::Status => return Ok(()),
            };
            p.operation(info, op).await.map(|_| ())
        }
        Act::Boot { device, efi } => {
            let device = match device {
                D::Pxe => B::Pxe,
                D::Disk => B::Hdd,
                D::Cdrom => B::Cd,
                D::Bios => B::BiosSetup,
                D::Safe => {
                    return Err(ProvisionerError::new(
                        ErrorKind::Unsupported,
                        "boot device safe: no BMC protocol here offers a safe-mode boot",
                    ));
                }
            };
            p.boot_device(info, Some(device), *efi).await
        }
        Act::RestoreBoot(saved) => {
            p.restore_boot(info, saved.as_ref().and_then(boot_override))
                .await
        }
        Act::InsertMedia(url) => p.virtual_media(info, Some(url)).await,
        Act::EjectMedia => p.virtual_media(info, None).await,
    }
}

/// Writes what changed, on the version of the job this reconcile read (`rv`, updated to the
/// written one): a reconcile on a stale copy conflicts instead of repeating an action.
fn saved_boot(o: ferrometal_bmc::BootOverride) -> SavedBoot {
    SavedBoot {
        device: o.device.redfish_name().into(),
        once: o.once,
        mode: o.mode.map(|m| {
            match m {
                ferrometal_bmc::BootMode::Uefi => "UEFI",
                ferrometal_bmc::BootMode::Legacy => "Legacy",
            }
            .into()
        }),
    }
}

fn boot_override(s: &SavedBoot) -> Option<ferrometal_bmc::BootOverride> {
    Some(ferrometal_bmc::BootOverride {
        device: s.device.parse().ok()?,
        once: s.once,
        mode: match s.mode.as_deref() {
            Some("UEFI") => Some(ferrometal_bmc::BootMode::Uefi),
            Some("Legacy") => Some(ferrometal_bmc::BootMode::Legacy),
            _ => None,
        },
    })
}

async fn write_status(
    jobs: &Api<BMCJob>,
    name: &str,
    rv: &mut Option<String>,
    old: &BMCJobStatus,
    new: &BMCJobStatus,
) -> Result<(), Error> {
    let diff = merge_diff(&serde_json::to_value(old)?, &serde_json::to_value(new)?);
    if let Some(diff) = diff {
        let written = jobs
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "status": diff})),
            )
            .await?;
        *rv = written.resource_version();
        record(old, new);
    }
    Ok(())
}

/// Metrics for what this write ended: tasks (their duration) and the job (its outcome).
fn record(old: &BMCJobStatus, new: &BMCJobStatus) {
    let m = crate::metrics::metrics();
    let ended = |s: TaskState| matches!(s, TaskState::Succeeded | TaskState::Failed);
    for (i, t) in new.tasks.iter().enumerate() {
        let was = old.tasks.get(i).map(|t| t.state).unwrap_or_default();
        if ended(t.state) && !ended(was) {
            let at = |s: &Option<String>| s.as_deref().and_then(|s| s.parse::<Timestamp>().ok());
            if let (Some(a), Some(b)) = (at(&t.start_time), at(&t.completion_time)) {
                let secs = (b.as_millisecond() - a.as_millisecond()).max(0) as f64 / 1000.0;
                m.job_task_duration.observe(secs);
            }
        }
    }
    if finished(new) && !finished(old) {
        let outcome = if new.phase == JobPhase::Completed {
            "completed"
        } else {
            "failed"
        };
        m.jobs_finished
            .get_or_create(&crate::metrics::OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }
}

/// Events on the job and, for the job's progress, on its host.
async fn publish(ctx: &Context, job: &BMCJob, host: Option<&BareMetalHost>, events: &[JobEvent]) {
    if events.is_empty() {
        return;
    }
    let events: Vec<HostEvent> = events
        .iter()
        .map(|e| HostEvent {
            warning: e.warning,
            reason: e.reason.into(),
            note: e.message.clone(),
        })
        .collect();
    ctx.events.publish_about(job, &events).await;
    if let Some(h) = host {
        let on_host = on_host(&job.name_any(), &events);
        ctx.events.publish_about(h, &on_host).await;
    }
}

/// What of a job's Events its host gets too: the job's start and end, and every warning; the
/// tasks' own progress stays on the job. Each Event is a write to the API server, and a
/// thousand jobs' task steps on their hosts doubled them for what `kubectl describe bmcjob`
/// already shows.
fn on_host(job: &str, events: &[HostEvent]) -> Vec<HostEvent> {
    events
        .iter()
        .filter(|e| e.warning || matches!(&*e.reason, "JobStarted" | "JobCompleted" | "JobFailed"))
        .map(|e| HostEvent {
            warning: e.warning,
            reason: format!("BMCJob{}", e.reason),
            note: format!("job {job}: {}", e.note),
        })
        .collect()
}

/// Hands the host back to the host controller if this job holds it.
async fn release(
    hosts: &Api<BareMetalHost>,
    host: Option<&BareMetalHost>,
    job: &str,
) -> Result<(), Error> {
    if let Some(h) = host
        && h.annotations().get(ann::JOB).map(String::as_str) == Some(job)
    {
        hosts
            .patch(
                &h.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {ann::JOB: null}}})),
            )
            .await?;
    }
    Ok(())
}

async fn ttl(jobs: &Api<BMCJob>, job: &BMCJob, status: &BMCJobStatus) -> Result<Action, Error> {
    let (Some(ttl), Some(done)) = (
        job.spec.ttl_seconds_after_finished,
        status
            .completion_time
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok()),
    ) else {
        return Ok(Action::await_change());
    };
    let left = done.as_second() + ttl - Timestamp::now().as_second();
    if left > 0 {
        return Ok(Action::requeue(Duration::from_secs(left as u64)));
    }
    match jobs.delete(&job.name_any(), &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(warning: bool, reason: &str) -> HostEvent {
        HostEvent {
            warning,
            reason: reason.into(),
            note: format!("{reason} note"),
        }
    }

    #[test]
    fn a_host_gets_its_jobs_start_end_and_warnings_not_their_task_steps() {
        let all = [
            event(false, "JobStarted"),
            event(false, "TaskStarted"),
            event(false, "TaskSucceeded"),
            event(true, "TaskFailed"),
            event(false, "RestoreSucceeded"),
            event(true, "RestoreFailed"),
            event(false, "JobCompleted"),
            event(true, "JobFailed"),
        ];
        let kept: Vec<(bool, String, String)> = on_host("reimage", &all)
            .into_iter()
            .map(|e| (e.warning, e.reason, e.note))
            .collect();
        let want = |w: bool, r: &str| (w, format!("BMCJob{r}"), format!("job reimage: {r} note"));
        assert_eq!(
            kept,
            vec![
                want(false, "JobStarted"),
                want(true, "TaskFailed"),
                want(true, "RestoreFailed"),
                want(false, "JobCompleted"),
                want(true, "JobFailed"),
            ]
        );
    }
}
