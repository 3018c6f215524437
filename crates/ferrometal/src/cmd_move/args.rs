//! The command line of `ferrometal move`.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig of the cluster the hosts (or claims) leave.
    #[arg(long, value_name = "KUBECONFIG")]
    pub from: PathBuf,
    /// Kubeconfig of the cluster they move to.
    #[arg(long, value_name = "KUBECONFIG")]
    pub to: PathBuf,
    /// Move only this namespace (created at the target if missing); default: every namespace
    /// holding BareMetalHosts (or HostClaims) at the source.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Show what would move and change nothing anywhere.
    #[arg(long)]
    pub dry_run: bool,
    /// Move HostClaims instead of hosts (the hosts stay where they are).
    #[arg(long)]
    pub claims: bool,
    /// Hosts worked on at a time within each phase of a host move (pause, copy, unpause, detach,
    /// remove) and by its dry run. The phases still follow one another: every host is paused
    /// before any is copied, copied before any is unpaused at the target, and so on.
    #[arg(long, default_value_t = 32, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub concurrency: usize,
    /// With `--claims`: a kubeconfig for the cluster that holds the claims' hosts.
    #[arg(long, value_name = "FILE", requires = "claims")]
    pub remote_kubeconfig: Option<PathBuf>,
}
