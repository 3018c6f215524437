//! The three Rufio reconcilers: read, decide, act, write status.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::job::{BootDevice as D, PowerAction};
use ferrometal_api::rufio::{self, Action, Connection, Job, Machine, Task};
use ferrometal_bmc::{Bmc, BootDevice as B, BootMode, BootOverride, Credentials, PowerState};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::connection::{rufio_words, target};
use super::context::{RufioContext, TaskCall};
use super::task::{TaskStep, next};
use crate::detached::Found;
use crate::error::{Error, retry_after};

/// Set on a Task before its action is sent: a restart observes instead of sending again.
pub const SENT: &str = "ferrometal.io/sent";

fn now() -> String {
    let t = Timestamp::now();
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

pub fn error_policy<K>(_o: Arc<K>, error: &Error, _c: Arc<RufioContext>) -> Requeue {
    tracing::debug!(%error, "rufio reconcile failed");
    retry_after(error)
}

/// A BMC client for the connection; the message says what is wrong (never the password).
async fn connect(
    ctx: &RufioContext,
    conn: &Connection,
    namespace: &str,
) -> Result<(Arc<dyn Bmc>, String), String> {
    let t = target(conn)?;
    let Some(r) = &conn.auth_secret_ref else {
        return Err("connection.authSecretRef is not set".into());
    };
    // Only the object's own namespace: whoever can write a Machine or Task must not get
    // another namespace's password sent to an address of their choosing (admission refuses
    // these too, where this process serves the API).
    let ns = namespace;
    if let Some(other) = r.namespace.as_deref().filter(|n| !n.is_empty() && *n != ns) {
        return Err(format!(
            "connection.authSecretRef.namespace {other:?} is not the object's namespace {ns:?}: Secrets in other namespaces are never read"
        ));
    }
    let name = r.name.as_deref().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let secret = secrets
        .get_opt(name)
        .await
        .map_err(|e| format!("reading Secret {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("Secret {ns}/{name} not found"))?;
    let c = crate::secrets::credentials_of(&secret);
    let (Some(user), Some(password)) = (c.username, c.password) else {
        return Err(format!("Secret {ns}/{name} needs username and password"));
    };
    let options = ferrometal_bmc::BmcOptions {
        timeout: ctx.bmc_timeout,
        disable_certificate_verification: t.insecure_tls,
        ipmi_cipher_suite: t.cipher_suite.unwrap_or(3),
        ..ferrometal_bmc::BmcOptions::default()
    };
    let key = crate::bmc_gate::BmcGate::key(&t.address);
    ferrometal_bmc::connect(&t.address, Credentials::new(user, password), options)
        .map(|bmc| (bmc, key))
        .map_err(|e| e.to_string())
}

fn rufio_power(p: Result<PowerState, ferrometal_bmc::BmcError>) -> &'static str {
    match p {
        Ok(PowerState::On) => "on",
        Ok(PowerState::Off) => "off",
        _ => "unknown",
    }
}

/// The key of one object's calls: a Machine or Task made again under its name is another.
fn call_key<K: Resource>(o: &K) -> String {
    format!(
        "{}/{}/{}",
        o.meta().namespace.as_deref().unwrap_or_default(),
        o.meta().name.as_deref().unwrap_or_default(),
        o.meta().uid.as_deref().unwrap_or_default()
    )
}

pub async fn machine(m: Arc<Machine>, ctx: Arc<RufioContext>) -> Result<Requeue, Error> {
    let ns = m.namespace().unwrap_or_default();
    let mut status = m.status.clone().unwrap_or_default();
    let before = status.clone();
    // The read runs off the workers; its end wakes the Machine, which writes what it found.
    let key = call_key(m.as_ref());
    let (power, message) = match ctx.reads.take(&key) {
        Found::Running => return Ok(Requeue::await_change()),
        Found::Finished { state, .. } => state,
        Found::Idle => {
            let (c, conn) = (ctx.clone(), m.spec.connection.clone());
            // No cache of Machines to ask: a read of one deleted meanwhile is kept (a few
            // bytes) until the process ends.
            ctx.reads
                .spawn(key, ObjectRef::from_obj(m.as_ref()), |_| true, async move {
                    match connect(&c, &conn, &ns).await {
                        Ok((bmc, key)) => {
                            let power = c.gate.run(&key, bmc.power_state()).await;
                            let message = power
                                .as_ref()
                                .err()
                                .map(|e| rufio_words(e.to_string()))
                                .unwrap_or_default();
                            (rufio_power(power), message)
                        }
                        Err(message) => ("unknown", message),
                    }
                });
            return Ok(Requeue::await_change());
        }
    };
    status.power = power.into();
    rufio::set(
        &mut status.conditions,
        "Contactable",
        message.is_empty(),
        &message,
        Some(&now()),
    );
    if status != before {
        let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        api.patch_status(
            &m.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
    }
    Ok(Requeue::requeue(ctx.machine_poll))
}

pub async fn job(j: Arc<Job>, ctx: Arc<RufioContext>) -> Result<Requeue, Error> {
    let ns = j.namespace().unwrap_or_default();
    let name = j.name_any();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let mut status = j.status.clone().unwrap_or_default();
    if rufio::is_true(&status.conditions, "Completed")
        || rufio::is_true(&status.conditions, "Failed")
    {
        return Ok(Requeue::await_change());
    }
    let rv = j.resource_version();
    let write = |status: rufio::JobStatus| {
        let jobs = jobs.clone();
        let name = name.clone();
        // On the version read: a stale copy conflicts instead of going backwards.
        let patch = json!({"metadata": {"resourceVersion": rv.clone()}, "status": status});
        async move {
            jobs.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
    };
    if status.start_time.is_none() {
        status.start_time = Some(now());
        rufio::set(&mut status.conditions, "Running", true, "", None);
        write(status).await?;
        return Ok(Requeue::requeue(Duration::ZERO));
    }
    let mref = &j.spec.machine_ref;
    let mns = ns.as_str();
    // Another namespace's Machine is never acted on, nor its connection copied into a Task
    // here, where this Job's users could read it.
    if !mref.namespace.is_empty() && mref.namespace != mns {
        rufio::set(&mut status.conditions, "Running", false, "", None);
        let m = format!(
            "machineRef.namespace {:?} is not the Job's namespace {mns:?}: Machines in other namespaces are never used",
            mref.namespace
        );
        rufio::set(&mut status.conditions, "Failed", true, &m, None);
        write(status).await?;
        return Ok(Requeue::await_change());
    }
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), mns);
    let Some(machine) = machines.get_opt(&mref.name).await? else {
        rufio::set(&mut status.conditions, "Running", false, "", None);
        let m = format!("machine {mns}/{} not found", mref.name);
        rufio::set(&mut status.conditions, "Failed", true, &m, None);
        write(status).await?;
        return Ok(Requeue::await_change());
    };
    let tasks: Api<Task> = Api::namespaced(ctx.client.clone(), &ns);
    for (n, action) in j.spec.tasks.iter().enumerate() {
        let task_name = format!("{name}-task-{n}");
        match tasks.get_opt(&task_name).await? {
            None => {
                let owner = j.controller_owner_ref(&()).expect("a stored Job has a uid");
                let task: Task = serde_json::from_value(json!({
                    "apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Task",
                    "metadata": {"name": task_name, "namespace": ns, "ownerReferences": [owner]},
                    "spec": {"task": action, "connection": machine.spec.connection},
                }))?;
                tasks.create(&PostParams::default(), &task).await?;
                return Ok(Requeue::requeue(Duration::from_secs(5)));
            }
            Some(t) => {
                let ts = t.status.unwrap_or_default();
                if rufio::is_true(&ts.conditions, "Failed") {
                    let why = ts
                        .conditions
                        .iter()
                        .find(|c| c.type_ == "Failed")
                        .map(|c| c.message.clone())
                        .unwrap_or_default();
                    rufio::set(&mut status.conditions, "Running", false, "", None);
                    let m = format!("Task {task_name} failed: {why}");
                    rufio::set(&mut status.conditions, "Failed", true, &m, None);
                    write(status).await?;
                    return Ok(Requeue::await_change());
                }
                if !rufio::is_true(&ts.conditions, "Completed") {
                    // The Task's status change wakes this Job (it owns the Task).
                    return Ok(Requeue::requeue(Duration::from_secs(5)));
                }
            }
        }
    }
    rufio::set(&mut status.conditions, "Running", false, "", None);
    rufio::set(&mut status.conditions, "Completed", true, "", None);
    status.completion_time = Some(now());
    write(status).await?;
    Ok(Requeue::await_change())
}

pub async fn task(t: Arc<Task>, ctx: Arc<RufioContext>) -> Result<Requeue, Error> {
    let ns = t.namespace().unwrap_or_default();
    let name = t.name_any();
    let api: Api<Task> = Api::namespaced(ctx.client.clone(), &ns);
    let mut status = t.status.clone().unwrap_or_default();
    if rufio::is_true(&status.conditions, "Completed")
        || rufio::is_true(&status.conditions, "Failed")
    {
        return Ok(Requeue::await_change());
    }
    let started = status
        .start_time
        .as_deref()
        .and_then(|s| s.parse::<Timestamp>().ok());
    let elapsed = started
        .map(|s| Duration::from_secs((Timestamp::now().as_second() - s.as_second()).max(0) as u64))
        .unwrap_or_default();
    let sent = t.annotations().contains_key(SENT);
    let action = &t.spec.task;
    let mut step = next(
        action,
        started.is_some(),
        sent,
        elapsed,
        None,
        ctx.task_timeout,
    );
    // The BMC calls run off the workers; a call's end wakes the Task, which goes on from here.
    let key = call_key(t.as_ref());
    let mut finished = match ctx.calls.take(&key) {
        Found::Running => return Ok(Requeue::await_change()),
        Found::Finished { state, .. } => Some(state),
        Found::Idle => None,
    };
    match &finished {
        Some(TaskCall::Unreachable(m)) if matches!(step, TaskStep::Send | TaskStep::LookPower) => {
            step = TaskStep::Fail(format!("Failed to connect to BMC: {m}"));
        }
        Some(TaskCall::Sent(Err(e))) => step = TaskStep::Fail(e.clone()),
        _ => {}
    }
    if step == TaskStep::LookPower {
        match finished.take() {
            Some(TaskCall::Power(Ok(p))) => {
                step = next(action, true, sent, elapsed, Some(p), ctx.task_timeout);
            }
            Some(TaskCall::Power(Err(_))) if elapsed < ctx.task_timeout => step = TaskStep::Wait,
            Some(TaskCall::Power(Err(e))) => step = TaskStep::Fail(e),
            _ => {
                let (c, conn, ns) = (ctx.clone(), t.spec.connection.clone(), ns.clone());
                ctx.calls
                    .spawn(key, ObjectRef::from_obj(t.as_ref()), |_| true, async move {
                        match connect(&c, &conn.unwrap_or_default(), &ns).await {
                            Ok((bmc, key)) => TaskCall::Power(
                                c.gate
                                    .run(&key, bmc.power_state())
                                    .await
                                    .map_err(|e| rufio_words(e.to_string())),
                            ),
                            Err(m) => TaskCall::Unreachable(m),
                        }
                    });
                return Ok(Requeue::await_change());
            }
        }
    }
    let write = |status: rufio::TaskStatus, rv: Option<String>| {
        let api = api.clone();
        let name = name.clone();
        // On the version read: a stale copy (say, one without our Failed) conflicts.
        let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
        async move {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
    };
    let rv = t.resource_version();
    match step {
        TaskStep::Start => {
            status.start_time = Some(now());
            write(status, rv.clone()).await?;
            Ok(Requeue::requeue(Duration::ZERO))
        }
        TaskStep::Send => {
            // Recorded first; the resourceVersion makes a concurrent second sender conflict.
            let marked = api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"annotations": {SENT: now()},
                        "resourceVersion": rv}})),
                )
                .await?;
            let (c, conn, action) = (ctx.clone(), t.spec.connection.clone(), action.clone());
            ctx.calls
                .spawn(key, ObjectRef::from_obj(&marked), |_| true, async move {
                    match connect(&c, &conn.unwrap_or_default(), &ns).await {
                        Ok((bmc, key)) => TaskCall::Sent(send(&c, &key, &*bmc, &action).await),
                        Err(m) => TaskCall::Unreachable(m),
                    }
                });
            Ok(Requeue::await_change())
        }
        TaskStep::Complete => {
            rufio::set(&mut status.conditions, "Completed", true, "", None);
            status.completion_time = Some(now());
            write(status, rv.clone()).await?;
            Ok(Requeue::await_change())
        }
        TaskStep::Fail(m) => {
            rufio::set(&mut status.conditions, "Failed", true, &m, None);
            status.completion_time = Some(now());
            write(status, rv.clone()).await?;
            Ok(Requeue::await_change())
        }
        TaskStep::LookPower | TaskStep::Wait => Ok(Requeue::requeue(Duration::from_secs(3))),
    }
}

/// One Rufio action on the BMC, through its gate (`key`).
async fn send(ctx: &RufioContext, key: &str, bmc: &dyn Bmc, action: &Action) -> Result<(), String> {
    use ferrometal_bmc::PowerAction as P;
    type Call<'a> = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), ferrometal_bmc::BmcError>> + Send + 'a>,
    >;
    let call: Call<'_> = if let Some(p) = action.power_action {
        let a = match p {
            PowerAction::On => P::On,
            PowerAction::Off => P::ForceOff,
            PowerAction::Soft => P::GracefulShutdown,
            PowerAction::Cycle => P::PowerCycle,
            PowerAction::Reset => P::ForceRestart,
            PowerAction::Status => return Ok(()),
        };
        bmc.power(a)
    } else if let Some(b) = &action.one_time_boot_device_action {
        let device = match b.device.first().copied().unwrap_or(D::Pxe) {
            D::Pxe => B::Pxe,
            D::Disk => B::Hdd,
            D::Cdrom => B::Cd,
            D::Bios => B::BiosSetup,
            D::Safe => return Err("boot device safe is not supported".into()),
        };
        bmc.set_boot(BootOverride {
            device,
            once: true,
            mode: b.efi_boot.then_some(BootMode::Uefi),
        })
    } else if let Some(m) = &action.virtual_media_action {
        if m.media_url.is_empty() {
            bmc.eject_media()
        } else {
            bmc.insert_media(&m.media_url)
        }
    } else {
        return Err("the task has no action".into());
    };
    ctx.gate
        .run(key, call)
        .await
        .map_err(|e| rufio_words(e.to_string()))
}
