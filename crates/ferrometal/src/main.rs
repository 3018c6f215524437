//! The ferrometal binary: CLI wiring only. Each subcommand lives in its own module.

mod agent_server;
mod cmd_bmc;
mod cmd_controller;
mod cmd_crds;
mod cmd_demo;
mod cmd_emulate;
mod cmd_job;
mod cmd_kubeconfig;
mod cmd_move;
mod cmd_serve;
mod cmd_store;
mod console;
mod controllers;
mod duration;
mod file_response;
mod ironic_http;
mod kube_client;
mod signals;
mod tls_serve;

use clap::{Parser, Subcommand};

/// The API server and controllers allocate and free many short-lived JSON values on every
/// request and watch event; glibc's allocator spent about 40% of serve's CPU on them in a
/// profile of `ferrometal move` (bench/RESULTS.md). mimalloc does the same work for less.
/// The `system-allocator` feature leaves it out, for heap profilers that hook malloc
/// (heaptrack; bench/RESULTS.md).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Everything on one machine: an emulated fleet, the API server and the controllers.
    Demo(cmd_demo::Args),
    /// Run the controllers against a Kubernetes API server (cluster mode).
    Controller(cmd_controller::Args),
    /// Run the embedded Kubernetes-compatible API server and the controllers.
    Serve(cmd_serve::Args),
    /// One-off BMC tasks on a host (a BMCJob), followed to the end with `--wait`.
    #[command(subcommand)]
    Job(cmd_job::Command),
    /// Print a kubeconfig for another user, with a client certificate signed by serve's CA.
    Kubeconfig(cmd_kubeconfig::Args),
    /// Move (pivot) hosts or claims from one cluster to another.
    Move(cmd_move::Args),
    /// The web console alone, in front of a cluster's API (serve has it with --console-listen).
    Console(console::Args),
    /// Inspect a stopped server's store.
    #[command(subcommand)]
    Store(cmd_store::Command),
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // As `#[tokio::main]`. The commands that run the API server validate every write on a
    // deep stack: their threads get it (only touched pages are committed), so validation
    // runs in place instead of mapping one per write. The others keep tokio's default, which
    // also keeps their address-space reservation small where overcommit is strict.
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if matches!(cli.command, Command::Serve(_) | Command::Demo(_)) {
        runtime.thread_stack_size(ferrometal_apiserver::THREAD_STACK_BYTES);
    }
    match runtime.build() {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> std::process::ExitCode {
    init_tracing(&cli.log, &cli.log_format);
    let result = match cli.command {
        Command::Bmc(args) => cmd_bmc::run(args).await,
        Command::Crds => cmd_crds::run(),
        Command::Controller(args) => cmd_controller::run(args).await,
        Command::Demo(args) => cmd_demo::run(args).await,
        Command::Emulate(args) => cmd_emulate::run(args).await,
        Command::Serve(args) => cmd_serve::run(args).await,
        Command::Console(args) => console::run(args).await,
        Command::Job(cmd) => cmd_job::run(cmd).await,
        Command::Kubeconfig(args) => cmd_kubeconfig::run(args),
        Command::Move(args) => cmd_move::run(args).await,
        Command::Store(cmd) => cmd_store::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
