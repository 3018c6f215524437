//! `ferrometal job run`: one BMCJob from the command line, followed to its end.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
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
    /// Follow the job with a line per task; exit 1 if it fails.
    #[arg(long)]
    wait: bool,
    /// `power=on|off|soft|status|cycle|reset`, `boot=pxe|disk|cdrom|bios[,efi]`,
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
    let describe: Vec<String> = created.spec.tasks.iter().map(|t| t.describe()).collect();
    let total = describe.len();
    let mut shown = vec![TaskState::Pending; total];
    let mut waiting_said = String::new();
    loop {
        let job = jobs.get(&name).await.context("reading the BMCJob")?;
        let st = job.status.unwrap_or_default();
        if st.phase == JobPhase::Waiting
            && let Some(c) = st
                .conditions
                .iter()
                .find(|c| c.type_ == "Waiting" && c.status == "True")
            && c.message != waiting_said
        {
            println!("waiting: {}", c.message);
            waiting_said = c.message.clone();
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
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
