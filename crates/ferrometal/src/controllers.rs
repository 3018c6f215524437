//! Starting the controllers with a chosen provisioner, and the metrics endpoint. Shared by
//! `serve` (in-process client), `controller` (any cluster) and `demo`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;

use crate::agent_server::AgentServerConfig;
use clap::ValueEnum;
use ferrometal_bmc::RequestCounter;
use ferrometal_controller::ControllerConfig;
use ferrometal_provisioner::Provisioner;
use ferrometal_provisioner::fixture::FixtureProvisioner;
use ferrometal_provisioner::ironic::{
    IronicEndpoint, IronicOptions, IronicProvisioner, IronicSupervisor, SupervisorConfig,
};
use ferrometal_provisioner::redfish::{RedfishOptions, RedfishProvisioner};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProvisionerKind {
    /// Drive BMCs directly (Redfish; IPMI for power and boot only).
    Redfish,
    /// In-memory, for tests and benchmarks: touches no BMC.
    Fixture,
    /// OpenStack Ironic: supervised by ferrometal, or an existing one with `--ironic-url`.
    Ironic,
}

/// Controller flags shared by every command that runs controllers.
#[derive(clap::Args, Clone, Debug)]
pub struct ControllerArgs {
    /// Which provisioner drives the hosts.
    #[arg(long, value_enum, default_value_t = ProvisionerKind::Redfish)]
    pub provisioner: ProvisionerKind,
    /// Steady-state power poll per host, in seconds (metal3 uses 60).
    #[arg(long, default_value_t = 60)]
    pub power_poll_interval: u64,
    /// Hosts reconciled at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: u16,
    /// Hosts inspecting, provisioning or deprovisioning at once; more wait as `delayed`.
    /// Default: 1000 with `redfish` (each step is a few BMC requests, nothing heavy to
    /// protect), 20 with `ironic` and `fixture` (metal3's limit, sized for Ironic's conductor).
    #[arg(long)]
    pub max_busy: Option<usize>,
    /// Failed provisioning attempts of one image before the host stays available with a
    /// provisioning error (metal3's flag and default); 0 = retry forever.
    #[arg(long, default_value_t = 5)]
    pub max_provisioning_retries: u32,
    /// Per-request BMC timeout, in seconds.
    #[arg(long, default_value_t = 10)]
    pub bmc_timeout: u64,
    /// Calls at once to one BMC (its endpoint and system), across host reconciles and
    /// BMCJobs; more wait without holding a reconcile worker.
    #[arg(long, default_value_t = 4)]
    pub bmc_concurrency: usize,
    /// Consecutive connection failures or timeouts after which a BMC is left alone for a
    /// while (first `--error-backoff`, doubling while it stays silent); 0 = never.
    #[arg(long, default_value_t = 3)]
    pub bmc_breaker_threshold: u32,
    /// First error backoff in seconds; doubles per consecutive error (metal3: 60).
    #[arg(long, default_value_t = 10)]
    pub error_backoff: u64,
    /// How often, in seconds, the FirmwareSchemas ferrometal wrote are checked for ones no
    /// HostFirmwareSettings names any more (deleted when unnamed at two checks in a row).
    #[arg(long, default_value_t = 300)]
    pub firmware_schema_sweep: u64,
    /// Only manage hosts with these labels (e.g. `ferrometal.io/shard=a`), to split a fleet.
    #[arg(long)]
    pub label_selector: Option<String>,
    /// Serve Prometheus metrics on this address (`/metrics`).
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// With `--provisioner ironic`: use this Ironic instead of starting one (basic-auth
    /// credentials from FERROMETAL_IRONIC_USERNAME / FERROMETAL_IRONIC_PASSWORD).
    #[arg(long)]
    pub ironic_url: Option<String>,
    /// With `--provisioner ironic` and no `--ironic-url`: where the supervised Ironic keeps its
    /// config and SQLite database (`serve` uses its own data directory).
    #[arg(long)]
    pub ironic_data_dir: Option<std::path::PathBuf>,
    /// The supervised Ironic's API listens on this address. With an agent ramdisk, an
    /// address of the provisioning network: the ramdisk calls Ironic and Ironic calls it.
    #[arg(long, default_value = "127.0.0.1")]
    pub ironic_listen: std::net::IpAddr,
    /// The supervised Ironic's API as hosts' agent ramdisks reach it (`ipa-api-url`).
    /// Default: http://IRONIC-LISTEN:PORT.
    #[arg(long)]
    pub ironic_callback_url: Option<String>,
    /// What the supervised Ironic publishes for BMCs (the ISOs it builds for virtual media)
    /// is served over HTTP here (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub ironic_http_listen: SocketAddr,
    /// That server's URL as BMCs reach it. Default: http://IRONIC-HTTP-LISTEN.
    #[arg(long)]
    pub ironic_http_url: Option<String>,
    /// Kernel parameters of the agent ramdisk's boots (metal3's IRONIC_KERNEL_PARAMS).
    #[arg(long, default_value = ferrometal_provisioner::ironic::DEFAULT_KERNEL_PARAMS)]
    pub ironic_kernel_params: String,
    /// With `--provisioner ironic`: kernel of Ironic's agent ramdisk (IPA), which cleaning,
    /// disk-image and custom deploys boot over the network (metal3's DEPLOY_KERNEL_URL).
    #[arg(long, env = "DEPLOY_KERNEL_URL")]
    pub deploy_kernel_url: Option<String>,
    /// With `--provisioner ironic`: initramfs of the agent ramdisk (DEPLOY_RAMDISK_URL).
    #[arg(long, env = "DEPLOY_RAMDISK_URL")]
    pub deploy_ramdisk_url: Option<String>,
    /// With `--provisioner ironic`: the agent as an ISO, for virtual-media BMCs
    /// (DEPLOY_ISO_URL).
    #[arg(long, env = "DEPLOY_ISO_URL")]
    pub deploy_iso_url: Option<String>,
    /// With `--provisioner ironic`: an EFI system partition image with a boot loader, which
    /// Ironic puts into the virtual-media ISOs it builds from the kernel and initramfs above
    /// for UEFI hosts (`esp.img` of scripts/ipa-ramdisk.sh; Ironic's `bootloader`).
    #[arg(long, env = "DEPLOY_BOOTLOADER_URL")]
    pub deploy_bootloader_url: Option<String>,
    /// With `--provisioner redfish`: ferrometal's deploy agent ramdisk (`agent.iso`, or the
    /// directory `scripts/agent-ramdisk.sh` wrote it to). Turns on disk-image deploys, in-band
    /// inspection (`inspectionMode: agent`) and metadata cleaning through virtual media.
    #[arg(long)]
    pub agent_ramdisk: Option<std::path::PathBuf>,
    /// Where the agent service keeps its CA, certificate and each boot's media (`serve`:
    /// DATA_DIR/agent).
    #[arg(long)]
    pub agent_dir: Option<std::path::PathBuf>,
    /// The agent API (HTTPS) listens here.
    #[arg(long, default_value = "127.0.0.1:6385")]
    pub agent_listen: SocketAddr,
    /// The agent API's URL as hosts reach it (a provisioning network address, or 10.0.2.2 for
    /// QEMU's user-mode network); its host goes into the certificate. Default: https://LISTEN.
    #[arg(long)]
    pub agent_url: Option<String>,
    /// The media server (HTTP, for BMCs' virtual media) listens here.
    #[arg(long, default_value = "127.0.0.1:6386")]
    pub agent_media_listen: SocketAddr,
    /// The media server's URL as BMCs reach it. Default: http://MEDIA-LISTEN.
    #[arg(long)]
    pub agent_media_url: Option<String>,
    /// PEM file of CA certificates the deploy agent trusts for image and checksum downloads
    /// besides the system's roots (image servers signed by a private CA).
    #[arg(long)]
    pub agent_image_ca: Option<std::path::PathBuf>,
    /// How long in-band inspection listens for LLDP on each NIC (a switch's VLANs become the
    /// NIC's `vlans` and `vlanId`); it stops sooner once every NIC heard one. `0s`: never.
    #[arg(long, default_value = "30s", value_parser = crate::duration::parse_duration)]
    pub agent_lldp_wait: Duration,
    /// How long a host booting the agent ramdisk may take to call the agent API.
    #[arg(long, default_value = "10m", value_parser = crate::duration::parse_duration)]
    pub agent_boot_timeout: Duration,
    /// How long the agent may stay silent once it called (an image download included).
    #[arg(long, default_value = "30m", value_parser = crate::duration::parse_duration)]
    pub agent_silence_timeout: Duration,
    /// Do not serve Tinkerbell Rufio's Machine/Job/Task (where Rufio itself runs).
    #[arg(long)]
    pub no_rufio: bool,
    /// The only API servers remote HostClaims' kubeconfigs may name (HOST or HOST:PORT,
    /// comma-separated). Default: any https:// server except loopback and link-local
    /// addresses.
    #[arg(long, value_delimiter = ',')]
    pub remote_claim_servers: Vec<String>,
}

/// BMC requests sent, counted by the BMC layer's own observer; shown on /metrics.
pub type BmcRequests = RequestCounter;

fn bmc_exposition(requests: &RequestCounter) -> String {
    let mut out = String::from(
        "# HELP ferrometal_bmc_requests BMC requests sent.\n# TYPE ferrometal_bmc_requests counter\n",
    );
    let rows = [
        ("redfish", "GET", &requests.get),
        ("redfish", "POST", &requests.post),
        ("redfish", "PATCH", &requests.patch),
        ("redfish", "DELETE", &requests.delete),
        ("ipmi", "IPMI", &requests.ipmi),
    ];
    for (protocol, method, count) in rows {
        out.push_str(&format!(
            "ferrometal_bmc_requests_total{{protocol=\"{protocol}\",method=\"{method}\"}} {}\n",
            count.load(Ordering::Relaxed)
        ));
    }
    out
}

impl ControllerArgs {
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            label_selector: self.label_selector.clone(),
            concurrency: self.concurrency.max(1),
            power_poll_interval: Duration::from_secs(self.power_poll_interval.max(1)),
            backoff_base: Duration::from_secs(self.error_backoff.max(1)),
            max_provisioning_retries: self.max_provisioning_retries,
            rufio: !self.no_rufio,
            remote_servers: ferrometal_controller::remote::servers::ServerPolicy {
                allow: self.remote_claim_servers.clone(),
            },
            bmc_concurrency: self.bmc_concurrency.max(1),
            breaker_threshold: self.bmc_breaker_threshold,
            firmware_schema_sweep: Duration::from_secs(self.firmware_schema_sweep.max(1)),
            bmc_timeout: Duration::from_secs(self.bmc_timeout.max(1)),
            ..ControllerConfig::default()
        }
    }

    /// The provisioner, and the Ironic this process supervises for it (if any): it runs as
    /// long as the returned supervisor lives.
    pub async fn provisioner(
        &self,
        requests: Arc<BmcRequests>,
    ) -> anyhow::Result<(Arc<dyn Provisioner>, Option<IronicSupervisor>)> {
        Ok(match self.provisioner {
            ProvisionerKind::Redfish => {
                let mut redfish = RedfishProvisioner::new(RedfishOptions {
                    request_timeout: Duration::from_secs(self.bmc_timeout.max(1)),
                    max_busy: self.max_busy.unwrap_or(1000),
                    observer: Some(requests),
                    ..RedfishOptions::default()
                });
                if let Some(ramdisk) = &self.agent_ramdisk {
                    let dir = self
                        .agent_dir
                        .clone()
                        .unwrap_or_else(|| "ferrometal-agent".into());
                    let service = crate::agent_server::start(AgentServerConfig {
                        ramdisk: ramdisk.clone(),
                        work_dir: dir.join("work"),
                        tls_dir: dir,
                        listen: self.agent_listen,
                        url: self.agent_url.clone(),
                        media_listen: self.agent_media_listen,
                        media_url: self.agent_media_url.clone(),
                        image_ca: self.agent_image_ca.clone(),
                        lldp_wait: self.agent_lldp_wait,
                        boot_timeout: self.agent_boot_timeout,
                        silence_timeout: self.agent_silence_timeout,
                    })
                    .await
                    .context("starting the deploy agent service")?;
                    redfish = redfish.with_agent(service);
                }
                (Arc::new(redfish), None)
            }
            ProvisionerKind::Fixture => (
                Arc::new(FixtureProvisioner::new().with_capacity(self.max_busy.unwrap_or(20))),
                None,
            ),
            ProvisionerKind::Ironic => {
                let (endpoint, supervisor) = match (&self.ironic_url, &self.ironic_data_dir) {
                    (Some(url), _) => (IronicEndpoint::existing(url.clone()), None),
                    (None, Some(dir)) => {
                        let mut config = SupervisorConfig::new(dir);
                        let http =
                            crate::ironic_http::start(config.http_root(), self.ironic_http_listen)
                                .await?;
                        config.http_url = Some(
                            self.ironic_http_url
                                .clone()
                                .unwrap_or_else(|| format!("http://{http}")),
                        );
                        config.listen = self.ironic_listen;
                        config.callback_url = self.ironic_callback_url.clone();
                        config.kernel_params = self.ironic_kernel_params.clone();
                        let supervisor = IronicSupervisor::start(config)
                            .await
                            .context("starting Ironic")?;
                        tracing::info!(url = %supervisor.endpoint().url, "supervising Ironic");
                        (supervisor.endpoint(), Some(supervisor))
                    }
                    (None, None) => anyhow::bail!(
                        "--provisioner ironic needs --ironic-url or --ironic-data-dir"
                    ),
                };
                let mut options = IronicOptions::new(endpoint);
                options.max_busy = self.max_busy.unwrap_or(20);
                let url = |v: &Option<String>| v.clone().filter(|u| !u.trim().is_empty());
                options.deploy_kernel = url(&self.deploy_kernel_url);
                options.deploy_ramdisk = url(&self.deploy_ramdisk_url);
                options.deploy_iso = url(&self.deploy_iso_url);
                options.deploy_bootloader = url(&self.deploy_bootloader_url);
                if options.deploy_kernel.is_some() != options.deploy_ramdisk.is_some() {
                    anyhow::bail!(
                        "--deploy-kernel-url and --deploy-ramdisk-url go together: set both or neither"
                    );
                }
                if options.deploy_kernel.is_none() && options.deploy_iso.is_none() {
                    tracing::warn!(
                        "no agent ramdisk configured (--deploy-kernel-url/--deploy-ramdisk-url or \
                         --deploy-iso-url): hosts need automatedCleaningMode: disabled and live-iso \
                         images; cleaning and disk-image deploys are refused with a Blocked condition"
                    );
                }
                (Arc::new(IronicProvisioner::new(options)), supervisor)
            }
        })
    }
}

/// Creates or updates ferrometal's CRDs (server-side apply, so it is idempotent).
/// The project's ClusterRoles, as shipped in deploy/roles.yaml for cluster mode.
pub const ROLES_YAML: &str = include_str!("../../../deploy/roles.yaml");

pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("ferrometal").force();
    for crd in ferrometal_api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("installing CRD {name}"))?;
    }
    Ok(())
}

/// Runs the controllers (and the metrics endpoint, if asked) until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    args: ControllerArgs,
    requests: Arc<BmcRequests>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    if let Some(addr) = args.metrics_listen {
        serve_endpoints(addr, requests.clone(), client.clone()).await?;
    }
    let (provisioner, ironic) = args.provisioner(requests).await?;
    let result = ferrometal_controller::run(client, provisioner, args.config(), shutdown).await;
    if let Some(ironic) = ironic {
        ironic.shutdown().await;
    }
    result
}

/// Prometheus text: the controller's metrics plus BMC request counters.
pub fn metrics_text(requests: &BmcRequests) -> String {
    let text = ferrometal_controller::metrics_text();
    let extra = bmc_exposition(requests);
    match text.rfind("# EOF") {
        Some(i) => format!("{}{extra}{}", &text[..i], &text[i..]),
        None => format!("{text}{extra}"),
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz` (the process answers) and `/readyz` (the
/// API server answers it now), the probes of deploy/deployment.yaml.
pub async fn serve_endpoints(
    addr: SocketAddr,
    requests: Arc<BmcRequests>,
    client: kube::Client,
) -> anyhow::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("metrics listener on {addr}"))?;
    // The bound address, not the one asked for: port 0 picks a free one.
    let addr = listener.local_addr().unwrap_or(addr);
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let requests = requests.clone();
                async move {
                    (
                        [(
                            "content-type",
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics_text(&requests),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let client = client.clone();
                async move {
                    let version =
                        tokio::time::timeout(Duration::from_secs(3), client.apiserver_version());
                    match version.await {
                        Ok(Ok(_)) => (StatusCode::OK, "ok".to_string()),
                        Ok(Err(e)) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("the API server cannot be reached: {e}"),
                        ),
                        Err(_) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the API server did not answer within 3s".to_string(),
                        ),
                    }
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(())
}
