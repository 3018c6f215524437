//! `ferrometal job run`: one BMCJob from the command line, followed to its end.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_api::BareMetalHost;
use ferrometal_api::job::{BMCJob, JobPhase, TaskState};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Create a BMCJob for a host: tasks in order, e.g. `power=off boot=pxe power=on`.
    Run(RunArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    #[arg(long)]
    context: Option<String>,
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// The BareMetalHost whose BMC runs the tasks.
    #[arg(long)]
    host: String,
    /// The job's name (default: generated from the host's).
    #[arg(long)]
    name: Option<String>,
    /// Leave the host as the tasks left it (Rufio's semantics) instead of restoring it.
    #[arg(long)]
    no_restore: bool,
    /// Delete the job this many seconds after it finished.
    #[arg(long)]
    ttl: Option<i64>,
    /// Follow the job with a line per phase and task; exit 1 if it fails.
    #[arg(long)]
    wait: bool,
    /// With `--wait`: give up waiting after this long (`90s`, `10m`, `1h`) and exit 1; the job
    /// itself stays and runs when it can (`kubectl delete bmcjob NAME` cancels it).
    #[arg(long, default_value = "10m", value_parser = crate::duration::parse_duration)]
    timeout: Duration,
    /// `power=on|off|soft|status|cycle|reset`, `boot=pxe|disk|cdrom|bios|safe[,efi]`,
    /// `media=URL` or `media=eject`.
    #[arg(required = true, value_name = "TASK")]
    tasks: Vec<String>,
}

/// One `key=value` word into a task of the BMCJob's spec.
pub fn parse_task(word: &str) -> anyhow::Result<Value> {
    let Some((key, value)) = word.split_once('=') else {
        bail!("task {word:?}: expected power=..., boot=... or media=...");
    };
    Ok(match key {
        "power" => {
            if !["on", "off", "soft", "status", "cycle", "reset"].contains(&value) {
                bail!("task {word:?}: power is one of on, off, soft, status, cycle, reset");
            }
            json!({"powerAction": value})
        }
        "boot" => {
            let (device, efi) = match value.split_once(',') {
                Some((d, "efi")) => (d, true),
                Some(_) => bail!("task {word:?}: boot=DEVICE or boot=DEVICE,efi"),
                None => (value, false),
            };
            if !["pxe", "disk", "cdrom", "bios", "safe"].contains(&device) {
                bail!("task {word:?}: boot device is one of pxe, disk, cdrom, bios, safe");
            }
            json!({"oneTimeBootDeviceAction": {"device": [device], "efiBoot": efi}})
        }
        "media" if value == "eject" => {
            json!({"virtualMediaAction": {"mediaURL": "", "kind": "CD"}})
        }
        "media" => {
            if !(value.starts_with("http://") || value.starts_with("https://")) {
                bail!("task {word:?}: media=http(s)://... or media=eject");
            }
            json!({"virtualMediaAction": {"mediaURL": value, "kind": "CD"}})
        }
        _ => bail!("task {word:?}: expected power=..., boot=... or media=..."),
    })
}

pub async fn run(cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    let Command::Run(args) = cmd;
    let tasks = args
        .tasks
        .iter()
        .map(|t| parse_task(t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let client =
        crate::kube_client::client(args.kubeconfig.as_deref(), args.context.clone()).await?;
    let hosts: Api<BareMetalHost> = Api::namespaced(client.clone(), &args.namespace);
    // A job for a host that does not exist would only fail once the controller gives up on
    // it; say so now. Someone who may not read hosts (403) still gets the job.
    match hosts.get_opt(&args.host).await {
        Ok(Some(_)) => {}
        Ok(None) => bail!(
            "--host {}: no BareMetalHost {} in namespace {} (kubectl get bmh -n {} lists them)",
            args.host,
            args.host,
            args.namespace,
            args.namespace
        ),
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        Err(e) => return Err(e).context("reading the host"),
    }
    let jobs: Api<BMCJob> = Api::namespaced(client, &args.namespace);
    let mut metadata = json!({});
    match &args.name {
        Some(n) => metadata["name"] = json!(n),
        None => metadata["generateName"] = json!(format!("{}-", args.host)),
    }
    let mut spec = json!({"hostRef": {"name": args.host}, "tasks": tasks,
        "restoreDesiredState": !args.no_restore});
    if let Some(ttl) = args.ttl {
        spec["ttlSecondsAfterFinished"] = json!(ttl);
    }
    let job: BMCJob = serde_json::from_value(json!({
        "apiVersion": "ferrometal.io/v1alpha1", "kind": "BMCJob",
        "metadata": metadata, "spec": spec,
    }))?;
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .context("creating the BMCJob")?;
    let name = created.metadata.name.clone().unwrap_or_default();
    println!("bmcjob/{name} created");
    if !args.wait {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    follow(&jobs, &hosts, &name, &created, args.timeout).await
}

/// Prints a line per phase, task and waiting reason until the job ends or `timeout` passes.
async fn follow(
    jobs: &Api<BMCJob>,
    hosts: &Api<BareMetalHost>,
    name: &str,
    created: &BMCJob,
    timeout: Duration,
) -> anyhow::Result<std::process::ExitCode> {
    let started = Instant::now();
    let describe: Vec<String> = created.spec.tasks.iter().map(|t| t.describe()).collect();
    let total = describe.len();
    let mut shown = vec![TaskState::Pending; total];
    let mut said = String::new();
    let mut host_said = String::new();
    let mut phase_said = None;
    loop {
        let job = jobs.get(name).await.context("reading the BMCJob")?;
        let st = job.status.unwrap_or_default();
        if st.phase == JobPhase::Waiting
            && let Some(c) = st
                .conditions
                .iter()
                .find(|c| c.type_ == "Waiting" && c.status == "True")
            && c.message != said
        {
            println!("waiting: {}", c.message);
            said = c.message.clone();
        }
        if st.phase == JobPhase::Waiting {
            // A host in error may stay so: show why, rather than waiting in silence.
            let note = host_error(hosts, &created.spec.host_ref.name).await;
            if note != host_said && !note.is_empty() {
                println!("waiting: {note}");
            }
            host_said = note;
        }
        for (i, t) in st.tasks.iter().enumerate().take(total) {
            if t.state != shown[i] && t.state != TaskState::Pending {
                let note = if t.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", t.message)
                };
                println!("task {}/{total} {} {:?}{note}", i + 1, describe[i], t.state);
                shown[i] = t.state;
            }
        }
        // After the tasks: a poll that finds the job restoring shows its tasks first.
        if phase_said != Some(st.phase) {
            println!("bmcjob/{name} {:?}", st.phase);
            phase_said = Some(st.phase);
        }
        if matches!(st.phase, JobPhase::Completed | JobPhase::Failed) {
            let c = st
                .conditions
                .iter()
                .find(|c| c.status == "True")
                .map(|c| c.message.clone())
                .unwrap_or_default();
            println!("{:?}: {c}", st.phase);
            return Ok(if st.phase == JobPhase::Completed {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            });
        }
        if started.elapsed() >= timeout {
            bail!(
                "--timeout {}s passed with bmcjob/{name} still {:?}; the job stays and runs when \
                 it can (kubectl delete bmcjob {name} -n {} cancels it)",
                timeout.as_secs(),
                st.phase,
                job.metadata.namespace.unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The host's error, if it has one: `host NAME has a registration error: MESSAGE`.
async fn host_error(hosts: &Api<BareMetalHost>, name: &str) -> String {
    let Ok(Some(host)) = hosts.get_opt(name).await else {
        return String::new();
    };
    let status = host.status.unwrap_or_default();
    let Some(kind) = status.error_type.map(|t| t.as_str()) else {
        return String::new();
    };
    format!(
        "host {name} has a {kind}: {}",
        status.error_message.chars().take(300).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_words() {
        assert_eq!(
            parse_task("power=off").unwrap(),
            json!({"powerAction": "off"})
        );
        assert_eq!(
            parse_task("boot=pxe,efi").unwrap(),
            json!({"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": true}})
        );
        assert_eq!(
            parse_task("media=eject").unwrap()["virtualMediaAction"]["mediaURL"],
            ""
        );
        for bad in [
            "power=maybe",
            "boot=floppy",
            "media=ftp://x",
            "reboot",
            "x=y",
        ] {
            assert!(parse_task(bad).is_err(), "{bad}");
        }
    }
}
