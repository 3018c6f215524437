//! `ferrometal controller`: the same controllers as `serve`, against any Kubernetes API server
//! (a real cluster, or another ferrometal's embedded server). This is cluster mode.

use std::path::PathBuf;
use std::sync::Arc;

use ferrometal_controller::leader::{Elector, LeaseConfig};

use crate::controllers::{self, BmcRequests, ControllerArgs};
use crate::kube_client::client;

#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig to use; without it, the in-cluster service account or ~/.kube/config.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    context: Option<String>,
    /// Create or update the CRDs first (needs permission to write CRDs).
    #[arg(long)]
    install_crds: bool,
    /// Act only while holding a coordination.k8s.io/v1 Lease, so several replicas can run and
    /// one leads; a leader that loses the lease exits at once (its replacement takes over
    /// within the lease duration, 15 s).
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the lease; default: the client's namespace (in a pod, its own).
    #[arg(long)]
    leader_elect_namespace: Option<String>,
    /// Name of the lease; replicas sharing it elect one leader.
    #[arg(long, default_value = "ferrometal-controller")]
    leader_elect_id: String,
    #[command(flatten)]
    controllers: ControllerArgs,
}

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let client = client(args.kubeconfig.as_deref(), args.context.clone()).await?;
    if args.install_crds {
        controllers::install_crds(&client).await?;
    }
    let requests = Arc::new(BmcRequests::default());
    let mut controller_args = args.controllers;
    // Probes answer from the start, standby replicas included.
    if let Some(addr) = controller_args.metrics_listen.take() {
        controllers::serve_endpoints(addr, requests.clone(), client.clone()).await?;
    }
    if !args.leader_elect {
        controllers::run(
            client,
            controller_args,
            requests,
            crate::signals::shutdown_signal(),
        )
        .await?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let namespace = args
        .leader_elect_namespace
        .unwrap_or_else(|| client.default_namespace().to_string());
    let elector = Arc::new(Elector::new(
        client.clone(),
        LeaseConfig::new(&namespace, &args.leader_elect_id, &identity()),
    ));
    tokio::select! {
        () = elector.acquire() => {}
        () = crate::signals::shutdown_signal() => return Ok(std::process::ExitCode::SUCCESS),
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn({
        let elector = elector.clone();
        async move {
            elector.hold().await;
            // Another replica may lead from now on: nothing more may be sent to a BMC, so
            // no graceful stop (as client-go's and controller-runtime's leaders do).
            eprintln!("leader election lost: exiting");
            std::process::exit(1);
        }
    });
    tokio::spawn(async move {
        crate::signals::shutdown_signal().await;
        let _ = stop_tx.send(());
    });
    let result = controllers::run(client, controller_args, requests, async move {
        let _ = stop_rx.await;
    })
    .await;
    holder.abort();
    elector.release().await;
    result?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// This process as a lease candidate: the host (a pod's name), its pid and the start instant, so a
/// restarted replica never mistakes the lease of its previous life for its own.
fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ferrometal".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}_{}_{nanos:08x}", std::process::id())
}
