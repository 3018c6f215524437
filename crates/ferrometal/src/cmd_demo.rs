//! `ferrometal demo`: the whole product on one machine. An emulated Redfish fleet, the embedded
//! API server, the controllers; hosts are enrolled, inspected, made available, and some of them
//! boot a live ISO through virtual media. Then kubectl can explore what happened.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_api::{BareMetalHost, ProvisioningState};
use ferrometal_apiserver::{ApiServer, ServerConfig};
use ferrometal_emulator::{Emulator, EmulatorConfig};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::controllers::{self, BmcRequests, ControllerArgs, ProvisionerKind};

#[derive(clap::Args)]
pub struct Args {
    /// Number of emulated servers.
    #[arg(long, default_value_t = 20)]
    hosts: usize,
    /// How many of them boot a live ISO once available (default: a quarter, at least one).
    #[arg(long)]
    provision: Option<usize>,
    /// Where the API server keeps its data (wiped at start).
    #[arg(long, default_value = "ferrometal-demo")]
    data_dir: PathBuf,
    /// API server address (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Web console address (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    console_listen: SocketAddr,
    /// Time an emulated power change takes to land, in milliseconds.
    #[arg(long, default_value_t = 300)]
    power_delay_ms: u64,
    /// Stop once every host reached its expected state, instead of running until Ctrl-C.
    #[arg(long)]
    exit: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

const NAMESPACE: &str = "default";
const SECRET: &str = "demo-bmc";

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let started = Instant::now();
    let provision = args
        .provision
        .unwrap_or(args.hosts.div_ceil(4))
        .min(args.hosts);
    let deadline = started + Duration::from_secs(args.timeout);

    // 1. The fleet.
    let emulator = Emulator::start(
        EmulatorConfig {
            systems: args.hosts,
            power_delay: Duration::from_millis(args.power_delay_ms),
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await
    .context("starting the BMC emulator")?;
    say(&format!(
        "emulated fleet: {} Redfish BMCs at {}/redfish/v1",
        args.hosts,
        emulator.base_url()
    ));

    // 2. The API server, with a fresh store.
    if args.data_dir.exists() {
        std::fs::remove_dir_all(&args.data_dir)
            .with_context(|| format!("wiping {}", args.data_dir.display()))?;
    }
    let server = Arc::new(
        ApiServer::open(ServerConfig::new(&args.data_dir))
            .await
            .with_context(|| format!("opening {}", args.data_dir.display()))?,
    );
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let url = server.url_for(listener.local_addr()?);
    let kubeconfig = server.write_kubeconfig(&url)?;
    let serving = tokio::spawn({
        let server = server.clone();
        async move { server.serve(listener).await }
    });
    let client = server.client();
    controllers::install_crds(&client).await?;
    say(&format!(
        "API server: {url} (kubeconfig {})",
        kubeconfig.display()
    ));
    let console = crate::console::start(crate::console::ConsoleConfig {
        listen: args.console_listen,
        api: crate::console::api_config(&kubeconfig).await?,
        tls_dir: (!args.console_listen.ip().is_loopback())
            .then(|| args.data_dir.join("console-tls")),
    })
    .await?;
    say(&format!(
        "web console: {console} (sign in with the token in {})",
        args.data_dir.join("token").display()
    ));

    // 3. An image server for the live ISO and the metrics endpoint.
    let files = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let files_addr = files.local_addr()?;
    tokio::spawn(serve_files(files));
    let image_url = format!("http://{files_addr}/images/demo-live.iso");

    // 4. The controllers, talking to the API server in-process.
    let requests = Arc::new(BmcRequests::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let controller_args = ControllerArgs {
        provisioner: ProvisionerKind::Redfish,
        power_poll_interval: 30,
        concurrency: 32,
        max_busy: None,
        max_provisioning_retries: 5,
        bmc_timeout: 5,
        bmc_concurrency: 4,
        bmc_breaker_threshold: 3,
        error_backoff: 2,
        firmware_schema_sweep: 300,
        label_selector: None,
        metrics_listen: Some("127.0.0.1:0".parse()?),
        ironic_url: None,
        ironic_data_dir: None,
        ironic_listen: std::net::Ipv4Addr::LOCALHOST.into(),
        ironic_callback_url: None,
        ironic_http_listen: "127.0.0.1:0".parse()?,
        ironic_http_url: None,
        ironic_kernel_params: ferrometal_provisioner::ironic::DEFAULT_KERNEL_PARAMS.into(),
        deploy_kernel_url: None,
        deploy_ramdisk_url: None,
        deploy_iso_url: None,
        deploy_bootloader_url: None,
        agent_ramdisk: None,
        agent_dir: None,
        agent_listen: "127.0.0.1:0".parse()?,
        agent_url: None,
        agent_media_listen: "127.0.0.1:0".parse()?,
        agent_media_url: None,
        agent_image_ca: None,
        agent_lldp_wait: Duration::from_secs(30),
        agent_boot_timeout: Duration::from_secs(600),
        agent_silence_timeout: Duration::from_secs(1800),
        no_rufio: false,
        remote_claim_servers: Vec::new(),
    };
    let controllers = tokio::spawn(controllers::run(
        client.clone(),
        controller_args,
        requests.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    // 5. Enroll the fleet.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NAMESPACE},
        "stringData": {"username": "admin", "password": "password"},
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    let hosts: Api<BareMetalHost> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..args.hosts {
        let address = emulator
            .system_url(i)
            .replace("http://", "redfish-virtualmedia+http://");
        let host: BareMetalHost = serde_json::from_value(json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": host_name(i), "namespace": NAMESPACE, "labels": {"demo": "true"}},
            "spec": {
                "online": false,
                "bmc": {"address": address, "credentialsName": SECRET},
                "inspectionMode": "fast",
                "description": format!("emulated server {i}"),
            },
        }))?;
        hosts.create(&PostParams::default(), &host).await?;
    }
    say(&format!(
        "enrolled {} hosts; waiting for them to become available",
        args.hosts
    ));

    // 6. Registering → inspecting → preparing → available.
    let outcome = async {
        wait_for(&hosts, deadline, started, |state, _| state == ProvisioningState::Available, args.hosts).await?;
        say(&format!("all {} hosts available after {:.1}s", args.hosts, started.elapsed().as_secs_f64()));

        // 7. Boot a live ISO on some of them.
        let params = PatchParams::default();
        for i in 0..provision {
            let patch = json!({"spec": {"online": true, "image": {"url": image_url, "format": "live-iso"}}});
            hosts.patch(&host_name(i), &params, &Patch::Merge(&patch)).await?;
        }
        say(&format!("provisioning a live ISO on {provision} hosts"));
        wait_for(
            &hosts,
            deadline,
            started,
            |state, index| {
                if index < provision {
                    state == ProvisioningState::Provisioned
                } else {
                    state == ProvisioningState::Available
                }
            },
            args.hosts,
        )
        .await?;
        say(&format!("{provision} hosts provisioned after {:.1}s", started.elapsed().as_secs_f64()));
        anyhow::Ok(())
    }
    .await;

    summary(&hosts, &emulator).await?;
    say(&format!(
        "BMC requests sent: {} ({:.1} per host)",
        requests.total(),
        requests.total() as f64 / args.hosts.max(1) as f64
    ));
    let kc = kubeconfig.display();
    // With --exit (or a failure) the server stops next: nothing left to explore.
    if outcome.is_ok() && !args.exit {
        explore(&kc.to_string());
        println!("\nOr open the web console: {console}");
    }
    let _ = std::io::stdout().flush();

    if outcome.is_ok() && !args.exit {
        println!("\nRunning until Ctrl-C.");
        crate::signals::shutdown_signal().await;
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), controllers).await;
    server.shutdown().await;
    let _ = serving.await;
    emulator.shutdown().await;
    outcome?;
    Ok(std::process::ExitCode::SUCCESS)
}

fn host_name(i: usize) -> String {
    format!("demo-{i:02}")
}

fn host_index(host: &BareMetalHost) -> Option<usize> {
    host.metadata
        .name
        .as_deref()?
        .strip_prefix("demo-")?
        .parse()
        .ok()
}

fn say(line: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Prints a progress line whenever the count of hosts per state changes; returns once
/// `expected(state, index)` holds for every host.
async fn wait_for(
    hosts: &Api<BareMetalHost>,
    deadline: Instant,
    started: Instant,
    expected: impl Fn(ProvisioningState, usize) -> bool,
    count: usize,
) -> anyhow::Result<()> {
    let mut last = String::new();
    loop {
        let list = hosts
            .list(&ListParams::default().labels("demo=true"))
            .await?;
        let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
        let mut done = 0;
        let mut errors = Vec::new();
        for host in &list.items {
            let state = host.state();
            let label = if state == ProvisioningState::None {
                "new"
            } else {
                state.as_str()
            };
            *by_state.entry(label.to_string()).or_default() += 1;
            let index = host_index(host).unwrap_or(usize::MAX);
            if expected(state, index) {
                done += 1;
            }
            if let Some(status) = &host.status
                && let Some(error) = status.error_type
            {
                errors.push(format!(
                    "{}: {}: {}",
                    host.metadata.name.as_deref().unwrap_or("?"),
                    error.as_str(),
                    status.error_message
                ));
            }
        }
        let line = by_state
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(" | ");
        if line != last {
            say(&format!(
                "[{:>6.1}s] {line}",
                started.elapsed().as_secs_f64()
            ));
            last = line;
        }
        if done == count {
            return Ok(());
        }
        if Instant::now() > deadline {
            for e in errors.iter().take(5) {
                say(&format!("  error: {e}"));
            }
            bail!("timed out with {done} of {count} hosts where expected");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn summary(hosts: &Api<BareMetalHost>, emulator: &Emulator) -> anyhow::Result<()> {
    let mut list: Vec<(usize, BareMetalHost)> = hosts
        .list(&ListParams::default().labels("demo=true"))
        .await?
        .items
        .into_iter()
        .filter_map(|h| Some((host_index(&h)?, h)))
        .collect();
    list.sort_by_key(|(i, _)| *i);
    println!();
    println!(
        "{:<10} {:<13} {:<6} {:<7} {:>5} {:>8} {:>5} {:<14} {:>9}",
        "NAME", "STATE", "POWER", "ONLINE", "CPUS", "RAM-GiB", "NICS", "MEDIA", "BMC-REQS"
    );
    for (i, host) in &list {
        let i = *i;
        let status = host.status.clone().unwrap_or_default();
        let hw = status.hardware.clone().unwrap_or_default();
        let snapshot = emulator.state(i);
        let media = if snapshot.virtual_media.inserted {
            "live-iso"
        } else {
            "-"
        };
        println!(
            "{:<10} {:<13} {:<6} {:<7} {:>5} {:>8} {:>5} {:<14} {:>9}",
            host.metadata.name.as_deref().unwrap_or("?"),
            host.state().as_str(),
            if status.powered_on { "on" } else { "off" },
            host.spec.online,
            hw.cpu.as_ref().map(|c| c.count).unwrap_or(0),
            hw.ram_mebibytes / 1024,
            hw.nics.len(),
            media,
            emulator.counters().system(i).total(),
        );
    }
    Ok(())
}

async fn serve_files(listener: tokio::net::TcpListener) {
    use axum::routing::get;
    // A tiny stand-in ISO: the emulated BMCs do not download it, real ones would.
    let iso: &'static [u8] = &[0u8; 2048];
    let app = axum::Router::new().route("/images/demo-live.iso", get(move || async move { iso }));
    let _ = axum::serve(listener, app).await;
}

/// What to try with kubectl while the demo keeps running.
fn explore(kc: &str) {
    println!();
    println!("Explore with kubectl:");
    println!("  kubectl --kubeconfig {kc} get bmh");
    println!("  kubectl --kubeconfig {kc} describe bmh {}", host_name(0));
    println!(
        "  kubectl --kubeconfig {kc} get hardwaredata {} -o yaml",
        host_name(0)
    );
    println!(
        "  kubectl --kubeconfig {kc} annotate bmh {} ferrometal.io/operation=PowerCycle",
        host_name(0)
    );
}
