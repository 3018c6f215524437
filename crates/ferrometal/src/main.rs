//! The ferrometal binary: CLI wiring only. Each subcommand lives in its own module.

mod cmd_bmc;
mod cmd_crds;
mod cmd_emulate;
mod cmd_serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ferrometal",
    version,
    about = "Kubernetes-native lifecycle management of physical servers"
)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info,ferrometal=debug`.
    #[arg(long, global = true, env = "FERROMETAL_LOG", default_value = "info")]
    log: String,
    /// Log format.
    #[arg(long, global = true, value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Talk to one BMC directly: power, boot override, virtual media, inventory.
    Bmc(cmd_bmc::Args),
    /// Run a Redfish BMC fleet emulator.
    Emulate(cmd_emulate::Args),
    /// Print the CustomResourceDefinitions (for `kubectl apply -f -` on a real cluster).
    Crds,
    /// Run the embedded Kubernetes-compatible API server (and, later, the controllers).
    Serve(cmd_serve::Args),
}

fn init_tracing(filter: &str, format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli.log, &cli.log_format);
    let result = match cli.command {
        Command::Bmc(args) => cmd_bmc::run(args).await,
        Command::Crds => cmd_crds::run(),
        Command::Emulate(args) => cmd_emulate::run(args).await,
        Command::Serve(args) => cmd_serve::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
