//! `ferrometal move --claims`: moving HostClaims (placeholder; implemented separately).

use super::Args;
use super::common::Cluster;

pub(crate) async fn run(
    _args: &Args,
    _from: &Cluster,
    _to: &Cluster,
) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("--claims: not implemented yet")
}
