//! A Kubernetes client for the commands that talk to a cluster.

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

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
