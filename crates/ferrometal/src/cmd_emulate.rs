//! `ferrometal emulate`.

#[derive(clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("not implemented yet")
}
