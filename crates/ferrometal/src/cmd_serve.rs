//! `ferrometal serve`: the embedded API server, with the controllers in the same process unless
//! `--no-controllers`.

use serde_json::Value;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ferrometal_apiserver::{ApiServer, ServerConfig};

#[derive(clap::Args)]
pub struct Args {
    /// Directory for the store, token, kubeconfig and TLS material (created if missing).
    #[arg(long, env = "FERROMETAL_DATA_DIR", default_value = "ferrometal-data")]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Serve HTTPS with a certificate generated at first start (its CA goes into the
    /// kubeconfig). On by default whenever authentication is, because kubectl never sends a
    /// bearer token over plain HTTP.
    #[arg(long, conflicts_with = "no_tls")]
    tls: bool,
    /// Serve plain HTTP even with authentication on (kube-rs and the Python client still send
    /// the token; kubectl does not).
    #[arg(long)]
    no_tls: bool,
    /// Extra DNS name or IP address for the server certificate (repeatable). The listen
    /// address is included automatically unless it is a wildcard.
    #[arg(long = "tls-san", value_name = "NAME")]
    tls_sans: Vec<String>,
    /// Accept requests without the bearer token (only allowed on a loopback address).
    #[arg(long)]
    insecure_no_auth: bool,
    /// Serve the API only; run controllers elsewhere with `ferrometal controller`.
    #[arg(long)]
    no_controllers: bool,
    /// Requests served at once (watches excepted); more get 429 with Retry-After.
    #[arg(long, default_value_t = 600)]
    max_requests_inflight: usize,
    /// Open client connections (each watch holds one); further ones wait to be accepted.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(128..=1_000_000))]
    max_connections: u64,
    /// Connections one user may hold; more are answered 429 and closed. `system:masters` is
    /// not counted and always has 64 connections kept free. Default: a quarter of
    /// --max-connections.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections_per_user: Option<u64>,
    /// Seconds a request (watches excepted) may take before it ends with 504.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    request_timeout: u64,
    /// How long an Event is kept after its last write (kube-apiserver's --event-ttl), e.g.
    /// 1h, 30m. Events are kept in memory only, never in the store: a restart loses every
    /// Event (and no object).
    #[arg(long, default_value = "1h", value_parser = crate::duration::parse_duration)]
    event_ttl: std::time::Duration,
    /// Most Events one namespace holds; past it the Events written longest ago are deleted.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    max_events_per_namespace: u64,
    /// Most Events held in all namespaces together (in memory, ~1.5 KB each); past it the
    /// Events written longest ago are deleted.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    max_events: u64,
    /// Serve the web console here, e.g. 127.0.0.1:8080 (people sign in with their own token
    /// or kubeconfig; off loopback it is served over HTTPS with a certificate in the data
    /// directory).
    #[arg(long, value_name = "ADDR")]
    console_listen: Option<SocketAddr>,
    #[command(flatten)]
    controllers: crate::controllers::ControllerArgs,
}

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    if args.insecure_no_auth && !args.listen.ip().is_loopback() {
        anyhow::bail!(
            "--insecure-no-auth is only allowed on a loopback address, not {}",
            args.listen
        );
    }
    // Without TLS the bearer token and everything else cross the network in the clear.
    if args.no_tls && !args.listen.ip().is_loopback() {
        anyhow::bail!(
            "--no-tls is only allowed on a loopback address, not {}",
            args.listen
        );
    }
    let mut config = ServerConfig::new(&args.data_dir);
    config.tls = args.tls || (!args.no_tls && !args.insecure_no_auth);
    config.auth = !args.insecure_no_auth;
    config.tls_names = args.tls_sans.clone();
    config.limits.max_in_flight = args.max_requests_inflight.max(1);
    config.limits.max_connections = args.max_connections as usize;
    config.limits.max_connections_per_user = args
        .max_connections_per_user
        .map_or(config.limits.max_connections / 4, |n| n as usize);
    config.limits.request_timeout = std::time::Duration::from_secs(args.request_timeout);
    config.events.ttl = args.event_ttl;
    config.events.per_namespace = args.max_events_per_namespace as usize;
    config.events.total = args.max_events as usize;
    config.validators.extend(webhooks());
    let ip = args.listen.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        config.tls_names.push(ip.to_string());
    }
    let server = Arc::new(
        ApiServer::open(config)
            .await
            .with_context(|| format!("opening {}", args.data_dir.display()))?,
    );
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    // The CRDs and the project's roles (tenant, BMC operator, fleet admin), whether the
    // controllers run here or elsewhere.
    crate::controllers::install_crds(&server.client()).await?;
    server
        .install_yaml(crate::controllers::ROLES_YAML, "ferrometal")
        .await
        .context("installing the ferrometal roles")?;
    let url = server.url_for(listener.local_addr()?);
    let kubeconfig = server.write_kubeconfig(&url)?;
    // A closed stdout (the launcher went away) must not stop the server.
    let mut out = std::io::stdout();
    let _ = writeln!(out, "kubeconfig: {}", kubeconfig.display());
    let _ = writeln!(out, "url: {url}");
    if let Some(listen) = args.console_listen {
        let console = crate::console::start(crate::console::ConsoleConfig {
            listen,
            api: crate::console::api_config(&kubeconfig).await?,
            tls_dir: (!listen.ip().is_loopback()).then(|| args.data_dir.join("console-tls")),
        })
        .await?;
        let _ = writeln!(out, "console: {console}");
    }
    let _ = writeln!(
        out,
        "try: kubectl --kubeconfig {} get namespaces",
        kubeconfig.display()
    );
    let _ = out.flush();

    // The controllers use the in-process transport: same code as against a cluster, no socket.
    let (stop_controllers, controllers_stopped) = tokio::sync::oneshot::channel::<()>();
    let controllers = if args.no_controllers {
        None
    } else {
        let client = server.client();
        let requests = Arc::new(crate::controllers::BmcRequests::default());
        let mut controller_args = args.controllers.clone();
        if controller_args.agent_dir.is_none() {
            controller_args.agent_dir = Some(args.data_dir.join("agent"));
        }
        if controller_args.ironic_data_dir.is_none() {
            // A supervised Ironic lives beside the store.
            controller_args.ironic_data_dir = Some(args.data_dir.clone());
        }
        Some(tokio::spawn(crate::controllers::run(
            client,
            controller_args,
            requests,
            async move {
                let _ = controllers_stopped.await;
            },
        )))
    };

    let serving = tokio::spawn({
        let server = server.clone();
        async move { server.serve(listener).await }
    });
    // Controllers that stop on their own (e.g. a supervised Ironic that cannot start) end the
    // process with their error rather than leaving an API server that manages nothing.
    let mut controllers = controllers;
    let failed = match controllers.as_mut() {
        Some(task) => tokio::select! {
            () = shutdown_signal() => None,
            ended = task => Some(match ended {
                Ok(Ok(())) => anyhow::anyhow!("the controllers stopped unexpectedly"),
                Ok(Err(e)) => e,
                Err(e) => anyhow::anyhow!("the controllers panicked: {e}"),
            }),
        },
        None => {
            shutdown_signal().await;
            None
        }
    };
    tracing::info!("shutting down");
    let _ = stop_controllers.send(());
    if failed.is_none()
        && let Some(controllers) = controllers
    {
        match tokio::time::timeout(std::time::Duration::from_secs(20), controllers).await {
            Ok(Ok(Err(e))) => tracing::error!(error = %e, "controllers stopped with an error"),
            Err(_) => tracing::warn!("controllers did not stop within 20s"),
            _ => {}
        }
    }
    server.shutdown().await;
    serving.await??;
    if let Some(e) = failed {
        return Err(e.context("controllers"));
    }
    Ok(std::process::ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// metal3's host rules, and the BMC address parsed as the controller will parse it: a misspelled
/// scheme is refused when written, with the message its status would otherwise show later.
/// Only a new or changed address is checked, so a stored host never blocks other writes.
fn check_host(new: &Value, old: Option<&Value>) -> Vec<ferrometal_api::admission::Problem> {
    let mut out = ferrometal_api::admission::check_host(new, old);
    let at = |v: &Value| {
        v.pointer("/spec/bmc/address")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let address = at(new).unwrap_or_default();
    if !address.is_empty()
        && old.and_then(at).as_deref() != Some(address.as_str())
        && let Err(e) = ferrometal_bmc::BmcAddress::parse(&address)
    {
        out.push(ferrometal_api::admission::Problem {
            field: "spec.bmc.address".into(),
            message: e.to_string(),
        });
    }
    out
}

/// Admission rules a CRD schema cannot hold (annotation JSON, namespaces), run by the embedded
/// API server on every create and update, as kube-apiserver calls a validating webhook:
/// metal3's for BareMetalHosts, and the namespace boundaries of Rufio objects and claims.
fn webhooks() -> Vec<ferrometal_apiserver::Validator> {
    use ferrometal_api::admission as a;
    type Check = fn(&Value, Option<&Value>) -> Vec<a::Problem>;
    let rules: [(&str, &str, Check); 5] = [
        ("metal3.io", "baremetalhosts", check_host),
        ("metal3.io", "hostclaims", a::check_claim),
        ("bmc.tinkerbell.org", "machines", a::check_rufio_connection),
        ("bmc.tinkerbell.org", "jobs", a::check_rufio_job),
        ("bmc.tinkerbell.org", "tasks", a::check_rufio_connection),
    ];
    rules
        .into_iter()
        .map(|(group, resource, check)| ferrometal_apiserver::Validator {
            group: group.into(),
            resource: resource.into(),
            check: std::sync::Arc::new(move |new, old| {
                check(new, old)
                    .into_iter()
                    .map(|p| (p.field, p.message))
                    .collect()
            }),
        })
        .collect()
}
