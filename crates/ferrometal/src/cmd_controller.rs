//! `ferrometal controller`: the same controllers as `serve`, against any Kubernetes API server
//! (a real cluster, or another ferrometal's embedded server). This is cluster mode.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::controllers::{self, BmcRequests, ControllerArgs};

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
    #[command(flatten)]
    controllers: ControllerArgs,
}

/// A client from `kubeconfig` (and `context`), else the in-cluster or default kubeconfig.
pub async fn client(
    kubeconfig: Option<&std::path::Path>,
    context: Option<String>,
) -> anyhow::Result<kube::Client> {
    Ok(match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let options = KubeConfigOptions {
                context,
                ..KubeConfigOptions::default()
            };
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?;
            kube::Client::try_from(config)?
        }
        None => kube::Client::try_default()
            .await
            .context("no --kubeconfig and no in-cluster or default kubeconfig")?,
    })
}

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let client = client(args.kubeconfig.as_deref(), args.context.clone()).await?;
    if args.install_crds {
        controllers::install_crds(&client).await?;
    }
    let requests = Arc::new(BmcRequests::default());
    controllers::run(client, args.controllers, requests, crate::shutdown_signal()).await?;
    Ok(std::process::ExitCode::SUCCESS)
}
