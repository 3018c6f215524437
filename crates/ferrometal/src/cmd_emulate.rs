//! `ferrometal emulate`: run a Redfish BMC fleet emulator until interrupted.
//! All behaviour lives in the `ferrometal-emulator` crate; this only parses flags.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use ferrometal_emulator::{Emulator, EmulatorConfig};

#[derive(clap::Args)]
pub struct Args {
    /// Number of emulated systems (sys-0 .. sys-N-1).
    #[arg(long, default_value_t = 20)]
    systems: usize,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8000")]
    listen: SocketAddr,
    /// Time a power change takes to land after a reset request.
    #[arg(long, default_value_t = 0)]
    power_delay_ms: u64,
    /// Redfish username.
    #[arg(long, default_value = "admin")]
    username: String,
    /// File holding the Redfish password (trailing newline ignored); default "password".
    #[arg(long)]
    password_file: Option<std::path::PathBuf>,
    /// Leave PowerCycle out of the allowed reset types, like some real BMCs.
    #[arg(long)]
    omit_power_cycle: bool,
    /// Record inserted images without fetching them. By default InsertMedia fetches the image
    /// and refuses one nothing serves, as real BMCs and sushy-tools do.
    #[arg(long)]
    no_fetch_media: bool,
}

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let mut config = EmulatorConfig {
        systems: args.systems,
        power_delay: Duration::from_millis(args.power_delay_ms),
        username: args.username,
        omit_power_cycle: args.omit_power_cycle,
        fetch_media: !args.no_fetch_media,
        ..EmulatorConfig::default()
    };
    if let Some(path) = &args.password_file {
        let password = std::fs::read_to_string(path)
            .with_context(|| format!("reading password file {}", path.display()))?;
        config.password = password.trim_end_matches(['\r', '\n']).to_owned();
    }
    let emulator = Emulator::start(config, args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let base = emulator.base_url();
    // One parseable line for people and scripts.
    println!(
        "emulator ready: base_url={base}/redfish/v1 system_url={base}/redfish/v1/Systems/sys-{{index}} systems={} control_url={base}/emulator",
        args.systems
    );
    wait_for_signal().await?;
    tracing::info!("stopping emulator");
    emulator.shutdown().await;
    Ok(std::process::ExitCode::SUCCESS)
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing SIGTERM handler")?;
    tokio::select! {
        res = tokio::signal::ctrl_c() => res.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
