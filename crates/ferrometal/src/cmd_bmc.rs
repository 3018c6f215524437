//! `ferrometal bmc`: talk to one BMC directly, e.g. to check an address and credentials
//! before enrolling a host.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Subcommand, ValueEnum};
use std::collections::BTreeMap;

use ferrometal_bmc::{
    AuthMode, Bios, Bmc, BmcAddress, BmcOptions, BootDevice, BootMode, BootOverride, Credentials,
    PowerAction, PowerState,
};
use ferrometal_controller::firmware_settings::setting_schema;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

#[derive(clap::Args)]
pub struct Args {
    /// BMC address as in a BareMetalHost: ipmi://host[:port], redfish[+http]://host/redfish/v1/Systems/ID, ...
    #[arg(long)]
    address: String,
    #[arg(long, env = "FERROMETAL_BMC_USERNAME")]
    username: String,
    /// File holding the password (`-` reads standard input). Never pass a password as an argument.
    #[arg(long)]
    password_file: PathBuf,
    /// Accept any TLS certificate from the BMC.
    #[arg(long)]
    disable_certificate_verification: bool,
    /// Use a Redfish session (logged out at the end) instead of basic auth.
    #[arg(long)]
    session: bool,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 20)]
    timeout: u64,
    /// IPMI cipher suite.
    #[arg(long, default_value_t = 3)]
    cipher_suite: u8,
    /// Output format; accepted before or after the subcommand (`inventory -o json`).
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(subcommand)]
    command: BmcCommand,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand)]
enum BmcCommand {
    /// Power: status, on, off, soft-off, force-on, cycle, restart, force-restart.
    Power {
        action: PowerVerb,
        /// Wait (up to the timeout) until the BMC reports the resulting state.
        #[arg(long)]
        wait: bool,
    },
    /// Boot override: pxe, disk, cdrom, bios, uefihttp.
    Boot {
        device: String,
        /// Only for the next boot (otherwise until changed).
        #[arg(long)]
        once: bool,
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
    },
    /// Virtual media (Redfish only).
    Media {
        #[command(subcommand)]
        action: MediaCommand,
    },
    /// Manufacturer, model, serial number and UUID.
    Identity,
    /// Out-of-band hardware inventory: CPUs, memory, NICs, disks.
    Inventory,
    /// BIOS settings (Redfish only): current, pending, and what the registry allows.
    Bios {
        #[command(subcommand)]
        action: BiosCommand,
    },
}

#[derive(Subcommand)]
enum BiosCommand {
    /// Every attribute: its current value, a pending one, and its type and limits.
    Show,
    /// Stage NAME=VALUE settings for the next boot, checked against the BMC's attribute
    /// registry first (nothing is sent when one is refused).
    Set {
        #[arg(required = true, value_name = "NAME=VALUE")]
        settings: Vec<String>,
    },
}

#[derive(Subcommand)]
enum MediaCommand {
    /// Mount an image URL as the virtual CD.
    Insert { url: String },
    /// Eject the virtual CD (a no-op when none is mounted).
    Eject,
    /// Show what the virtual CD holds and whether it is mounted.
    Status,
}

#[derive(Clone, Copy, ValueEnum)]
enum PowerVerb {
    Status,
    On,
    Off,
    SoftOff,
    ForceOn,
    Cycle,
    Restart,
    ForceRestart,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Uefi,
    Legacy,
}

fn read_password(path: &PathBuf) -> anyhow::Result<String> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .context("reading the password from standard input")?
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the password file {}", path.display()))?
    };
    // Files written with `echo` end in a newline that is not part of the password.
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let address = BmcAddress::parse(&args.address).context("--address")?;
    let credentials = Credentials::new(&args.username, read_password(&args.password_file)?);
    let options = BmcOptions {
        timeout: Duration::from_secs(args.timeout.max(1)),
        disable_certificate_verification: args.disable_certificate_verification,
        auth: if args.session {
            AuthMode::Session
        } else {
            AuthMode::Basic
        },
        ipmi_cipher_suite: args.cipher_suite,
        ..BmcOptions::default()
    };
    let bmc = ferrometal_bmc::connect(&address, credentials, options)?;
    let result = execute(bmc.as_ref(), &args).await;
    // Always end a session, even after an error.
    let logout = bmc.logout().await;
    let value = result?;
    logout?;
    print(&value, args.output);
    Ok(ExitCode::SUCCESS)
}

async fn execute(bmc: &dyn Bmc, args: &Args) -> anyhow::Result<serde_json::Value> {
    Ok(match &args.command {
        BmcCommand::Power { action, wait } => {
            let action = match action {
                PowerVerb::Status => {
                    return Ok(json!({"power": bmc.power_state().await?}));
                }
                PowerVerb::On => PowerAction::On,
                PowerVerb::Off => PowerAction::ForceOff,
                PowerVerb::SoftOff => PowerAction::GracefulShutdown,
                PowerVerb::ForceOn => PowerAction::ForceOn,
                PowerVerb::Cycle => PowerAction::PowerCycle,
                PowerVerb::Restart => PowerAction::GracefulRestart,
                PowerVerb::ForceRestart => PowerAction::ForceRestart,
            };
            bmc.power(action).await?;
            let mut out = json!({"action": action.as_str(), "issued": true});
            if *wait {
                let state = wait_for(
                    bmc,
                    action.target_state(),
                    Duration::from_secs(args.timeout.max(1)),
                )
                .await?;
                out["power"] = json!(state);
            }
            out
        }
        BmcCommand::Boot { device, once, mode } => {
            let device: BootDevice = device.parse().map_err(anyhow::Error::msg)?;
            let mode = mode.map(|m| match m {
                ModeArg::Uefi => BootMode::Uefi,
                ModeArg::Legacy => BootMode::Legacy,
            });
            let boot = BootOverride {
                device,
                once: *once,
                mode,
            };
            bmc.set_boot(boot).await?;
            json!({"boot": boot})
        }
        BmcCommand::Media { action } => match action {
            MediaCommand::Insert { url } => {
                bmc.insert_media(url).await?;
                json!({"media": bmc.media_status().await?})
            }
            MediaCommand::Eject => {
                bmc.eject_media().await?;
                json!({"media": bmc.media_status().await?})
            }
            MediaCommand::Status => json!({"media": bmc.media_status().await?}),
        },
        BmcCommand::Identity => json!({"identity": bmc.identity().await?}),
        BmcCommand::Inventory => json!({"inventory": bmc.inventory().await?}),
        BmcCommand::Bios { action } => match action {
            BiosCommand::Show => json!({"bios": bmc.bios().await?}),
            BiosCommand::Set { settings } => {
                let bios = bmc.bios().await?;
                let changes = bios_changes(&bios, settings)?;
                bmc.set_bios(&changes).await?;
                json!({"staged": changes, "appliesAt": "next boot"})
            }
        },
    })
}

/// `NAME=VALUE` arguments as the BMC wants them (numbers and booleans where the registry, or
/// else the current value, says so), each checked against the registry as metal3 checks
/// HostFirmwareSettings.
fn bios_changes(
    bios: &Bios,
    settings: &[String],
) -> anyhow::Result<BTreeMap<String, serde_json::Value>> {
    let mut out = BTreeMap::new();
    for setting in settings {
        let Some((name, text)) = setting.split_once('=') else {
            bail!("{setting:?} is not NAME=VALUE");
        };
        let attr = bios.registry.iter().find(|a| a.name == name);
        if !bios.registry.is_empty() {
            let Some(attr) = attr else {
                bail!("Setting {name} is invalid, it is not in the BMC's attribute registry");
            };
            let value = match text.parse::<i32>() {
                Ok(n) if attr.kind == "Integer" => IntOrString::Int(n),
                _ => IntOrString::String(text.to_string()),
            };
            setting_schema(attr)
                .validate(name, &value)
                .map_err(anyhow::Error::msg)?;
        } else if !bios.attributes.contains_key(name) {
            bail!("Setting {name} is invalid, the BMC reports no such attribute");
        }
        let kind =
            attr.map(|a| a.kind.as_str())
                .unwrap_or_else(|| match bios.attributes.get(name) {
                    Some(serde_json::Value::Number(_)) => "Integer",
                    Some(serde_json::Value::Bool(_)) => "Boolean",
                    _ => "String",
                });
        let value = match kind {
            "Integer" => json!(
                text.parse::<i64>()
                    .with_context(|| format!("Setting {name}: {text:?} is not an integer"))?
            ),
            "Boolean" => json!(
                text.parse::<bool>()
                    .with_context(|| format!("Setting {name}: {text:?} is not true or false"))?
            ),
            _ => json!(text),
        };
        out.insert(name.to_string(), value);
    }
    Ok(out)
}

async fn wait_for(
    bmc: &dyn Bmc,
    target: PowerState,
    limit: Duration,
) -> anyhow::Result<PowerState> {
    let deadline = Instant::now() + limit;
    loop {
        let state = bmc.power_state().await?;
        if state == target {
            return Ok(state);
        }
        if Instant::now() >= deadline {
            bail!("the BMC still reports {state} after {limit:?}, expected {target}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn print(value: &serde_json::Value, output: Output) {
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
        return;
    }
    if let Some(inv) = value.get("inventory") {
        print_inventory(inv);
        return;
    }
    if let Some(bios) = value.get("bios") {
        print_bios(bios);
        return;
    }
    print_flat("", value);
}

/// `key: value` lines, nested keys joined with dots: readable and greppable.
fn print_flat(prefix: &str, value: &serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                print_flat(&key, v);
            }
        }
        serde_json::Value::String(s) => println!("{prefix}: {s}"),
        serde_json::Value::Null => println!("{prefix}: -"),
        other => println!("{prefix}: {other}"),
    }
}

fn print_inventory(inv: &serde_json::Value) {
    print_flat("identity", &inv["identity"]);
    let rows = |key: &str| inv[key].as_array().cloned().unwrap_or_default();
    let cpus = rows("cpus");
    println!("cpus: {}", cpus.len());
    for c in &cpus {
        println!(
            "  {}  {} cores / {} threads  {} MHz  {}",
            c["model"].as_str().unwrap_or("-"),
            c["cores"],
            c["threads"],
            c["speedMhz"],
            c["architecture"].as_str().unwrap_or("")
        );
    }
    let memory = rows("memory");
    let total: u64 = memory
        .iter()
        .filter_map(|m| m["capacityMib"].as_u64())
        .sum();
    println!("memory: {} modules, {} MiB", memory.len(), total);
    let nics = rows("nics");
    println!("nics: {}", nics.len());
    for n in &nics {
        println!(
            "  {}  {}  {} Mb/s",
            n["name"].as_str().unwrap_or("-"),
            n["mac"].as_str().unwrap_or("-"),
            n["speedMbps"]
        );
    }
    let disks = rows("disks");
    println!("disks: {}", disks.len());
    for d in &disks {
        let gb = d["sizeBytes"].as_u64().unwrap_or(0) / 1_000_000_000;
        println!(
            "  {}  {} GB  {}  {}",
            d["name"].as_str().unwrap_or("-"),
            gb,
            d["mediaType"].as_str().unwrap_or(""),
            d["model"].as_str().unwrap_or("")
        );
    }
    for w in rows("warnings") {
        println!("warning: {}", w.as_str().unwrap_or_default());
    }
}

/// One line per attribute: name, current value, pending value (or -), type and limits.
fn print_bios(bios: &serde_json::Value) {
    let registry = bios["registry"].as_array().cloned().unwrap_or_default();
    let empty = serde_json::Map::new();
    let attributes = bios["attributes"].as_object().unwrap_or(&empty);
    let pending = bios["pending"].as_object().unwrap_or(&empty);
    let shown = |v: Option<&serde_json::Value>| match v {
        None => "-".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    println!("{:<28} {:<20} {:<20} TYPE", "NAME", "VALUE", "PENDING");
    for (name, value) in attributes {
        let attr = registry.iter().find(|a| a["name"] == name.as_str());
        let mut kind = attr
            .and_then(|a| a["kind"].as_str())
            .unwrap_or("")
            .to_string();
        if let Some(a) = attr {
            if a["readOnly"] == true {
                kind.push_str(" read-only");
            }
            if let Some(values) = a["allowableValues"].as_array() {
                let values: Vec<&str> = values.iter().filter_map(|v| v.as_str()).collect();
                kind.push_str(&format!(" [{}]", values.join("|")));
            }
            if a["lowerBound"].is_number() || a["upperBound"].is_number() {
                kind.push_str(&format!(" {}..{}", a["lowerBound"], a["upperBound"]));
            }
        }
        println!(
            "{:<28} {:<20} {:<20} {}",
            name,
            shown(Some(value)),
            shown(pending.get(name)),
            kind.trim()
        );
    }
    if registry.is_empty() {
        println!(
            "(the BMC publishes no attribute registry: values are not checked before sending)"
        );
    }
}
