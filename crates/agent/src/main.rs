//! `ferrometal-agent`: the ramdisk's main job. Reads its configuration, says it is up, then
//! asks the agent API what to do until told it is finished. A failure to reach the API is
//! retried for as long as the host stays in the ramdisk (the server's timeout decides when to
//! give up on it); a failed instruction is reported, never retried on the agent's own.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ferrometal_agent::api::{Api, error_chain};
use ferrometal_agent::protocol::{AgentConfig, CONFIG_PATH, Instruction, Outcome, Report};
use ferrometal_agent::{clean, deploy, inspect, lldp, network};

fn log(text: &str) {
    // The console is the ramdisk's only log; the lab's tests read it too.
    println!("ferrometal-agent: {text}");
}

fn read_config(path: &str) -> AgentConfig {
    match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            log(&format!("cannot read the configuration {path}: {e}"));
            std::process::exit(2);
        }
    }
}

/// `ferrometal-agent network [CONFIG]`, run once by the ramdisk's init before the agent:
/// applies the host's network data. Exits 0 when applied, 3 when there is none (init leases
/// by DHCP), 1 when it could not be applied (init falls back to DHCP, the console says why).
fn configure_network(path: &str) -> ! {
    let config = read_config(path);
    let Some(data) = &config.network_data else {
        std::process::exit(3);
    };
    let nics: Vec<network::Nic> = std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let mac = std::fs::read_to_string(e.path().join("address")).ok()?;
            (name != "lo").then(|| network::Nic {
                name,
                mac: mac.trim().to_string(),
            })
        })
        .collect();
    let steps = match network::plan(data, &nics) {
        Ok(s) => s,
        Err(e) => {
            log(&format!("the host's network data cannot be applied: {e}"));
            std::process::exit(1);
        }
    };
    for step in steps {
        let (what, ok) = match &step {
            network::Step::Ip(args) => (
                format!("ip {}", args.join(" ")),
                std::process::Command::new("ip")
                    .args(args)
                    .status()
                    .is_ok_and(|s| s.success()),
            ),
            network::Step::Dhcp(dev) => (
                format!("DHCP on {dev}"),
                std::process::Command::new("udhcpc")
                    .args(["-i", dev, "-n", "-q", "-t", "5", "-T", "1"])
                    .args(["-s", "/etc/udhcpc.script"])
                    .status()
                    .is_ok_and(|s| s.success()),
            ),
            network::Step::Resolv(servers) => {
                let text: String = servers
                    .iter()
                    .map(|s| format!("nameserver {s}\n"))
                    .collect();
                (
                    format!("name servers {}", servers.join(" ")),
                    std::fs::write("/etc/resolv.conf", text).is_ok(),
                )
            }
        };
        if !ok {
            log(&format!("network data: {what} failed"));
            std::process::exit(1);
        }
        log(&format!("network data: {what}"));
    }
    std::process::exit(0);
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("network") {
        args.next();
        configure_network(&args.next().unwrap_or_else(|| CONFIG_PATH.to_string()));
    }
    let path = args.next().unwrap_or_else(|| CONFIG_PATH.to_string());
    let config = read_config(&path);
    let api = match Api::new(&config) {
        Ok(api) => api,
        Err(e) => {
            log(&e);
            std::process::exit(2);
        }
    };
    // Images come from anywhere the user points: the system's roots, serve's CA and the CAs
    // the operator added for image servers.
    let mut images = reqwest::Client::builder().connect_timeout(Duration::from_secs(30));
    if let Ok(ca) = reqwest::Certificate::from_pem(config.ca_pem.as_bytes()) {
        images = images.tls_certs_merge([ca]);
    }
    if let Some(pem) = &config.image_ca_pem {
        match reqwest::Certificate::from_pem_bundle(pem.as_bytes()) {
            Ok(cas) => images = images.tls_certs_merge(cas),
            Err(e) => log(&format!("the image CA bundle is unreadable: {e}")),
        }
    }
    let images = images.build().unwrap_or_default();
    log(&format!("up; agent API {}", config.api_url));
    let hello = Report {
        id: None,
        outcome: Outcome::Alive,
        timings: BTreeMap::new(),
        write_mb_per_s: None,
    };
    send(&api, &hello).await;

    let root = Path::new("/");
    loop {
        let instruction = match api.instruction().await {
            Ok(i) => i,
            Err(e) => {
                log(&format!("asking for work: {e}; again in 3 s"));
                tokio::time::sleep(Duration::from_secs(3)).await;
                continue;
            }
        };
        let started = Instant::now();
        let (id, outcome, mut timings, rate) = match instruction {
            Instruction::Wait { seconds } => {
                tokio::time::sleep(Duration::from_secs(u64::from(seconds.clamp(1, 60)))).await;
                continue;
            }
            Instruction::Finish { id, reboot } => {
                log(&format!(
                    "finished (the server {} the host)",
                    if reboot { "reboots" } else { "powers off" }
                ));
                send(&api, &report(id, Outcome::Alive, BTreeMap::new(), None)).await;
                // Power is the BMC's business; the agent just stops asking.
                loop {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            }
            Instruction::Inspect { id } => {
                log("inspecting");
                let mut hardware = inspect::inspect_with(root, &addresses());
                hear_switches(&mut hardware, config.lldp_wait_seconds);
                (
                    id,
                    Outcome::Inspected {
                        hardware: Box::new(hardware),
                    },
                    BTreeMap::new(),
                    None,
                )
            }
            Instruction::Clean { id } => {
                log("cleaning disk metadata");
                (id, clean_all(root), BTreeMap::new(), None)
            }
            Instruction::Deploy { id, deploy } => {
                log(&format!("deploying {}", deploy.image_url));
                let disks = inspect::inspect(root).storage;
                match deploy::deploy(&api, &images, &deploy, &disks, root).await {
                    Ok(done) => (
                        {
                            for line in &done.software_raid {
                                log(&format!("software RAID {line}"));
                            }
                            id
                        },
                        Outcome::Deployed {
                            root_disk: done.root_disk,
                        },
                        done.timings,
                        Some(done.mb_per_s),
                    ),
                    Err(message) => (id, Outcome::Failed { message }, BTreeMap::new(), None),
                }
            }
        };
        if let Outcome::Failed { message } = &outcome {
            log(&format!("failed: {message}"));
        }
        timings
            .entry("total".to_string())
            .or_insert_with(|| started.elapsed().as_secs_f64());
        send(&api, &report(id, outcome, timings, rate)).await;
    }
}

/// Listens for LLDP on every NIC (brought up first: a NIC the network data left alone is
/// down) and puts each switch port's VLANs on its NIC, as metal3 reports them.
fn hear_switches(hardware: &mut ferrometal_agent::protocol::Hardware, wait_seconds: u32) {
    if wait_seconds == 0 || hardware.nics.is_empty() {
        return;
    }
    let mut interfaces = Vec::new();
    for nic in &hardware.nics {
        let _ = std::process::Command::new("ip")
            .args(["link", "set", &nic.name, "up"])
            .status();
        let index = std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", nic.name))
            .ok()
            .and_then(|i| i.trim().parse::<i32>().ok());
        if let Some(index) = index {
            interfaces.push((nic.name.clone(), index));
        }
    }
    log(&format!("listening for LLDP for up to {wait_seconds} s"));
    let (heard, errors) = lldp::listen(&interfaces, Duration::from_secs(u64::from(wait_seconds)));
    for e in errors {
        log(&format!("LLDP: {e}"));
    }
    for nic in &mut hardware.nics {
        let Some(n) = heard.get(&nic.name) else {
            continue;
        };
        log(&format!(
            "LLDP on {}: switch {} port {}, untagged VLAN {}, VLANs {:?}",
            nic.name,
            n.system_name
                .as_deref()
                .or(n.chassis_id.as_deref())
                .unwrap_or("?"),
            n.port_id.as_deref().unwrap_or("?"),
            n.port_vlan_id.map_or("none".to_string(), |v| v.to_string()),
            n.vlans.iter().filter_map(|v| v.id).collect::<Vec<_>>()
        ));
        if n.port_vlan_id.is_some() {
            nic.vlan_id = n.port_vlan_id;
        }
        for vlan in &n.vlans {
            if !nic.vlans.iter().any(|v| v.id == vlan.id) {
                nic.vlans.push(vlan.clone());
            }
        }
        nic.vlans.sort_by_key(|v| v.id);
    }
}

fn report(
    id: String,
    outcome: Outcome,
    timings: BTreeMap<String, f64>,
    write_mb_per_s: Option<f64>,
) -> Report {
    Report {
        id: Some(id),
        outcome,
        timings,
        write_mb_per_s,
    }
}

/// Sends a report until the API takes it (reports are idempotent on the server).
async fn send(api: &Api, report: &Report) {
    loop {
        match api.report(report).await {
            Ok(()) => return,
            Err(e) => {
                log(&format!("reporting: {e}; again in 3 s"));
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
        }
    }
}

fn clean_all(root: &Path) -> Outcome {
    let mut done = Vec::new();
    for disk in inspect::inspect(root).storage {
        let name = disk.name.trim_start_matches("/dev/").to_string();
        let ranges = clean::ranges(
            u64::try_from(disk.size_bytes).unwrap_or(0),
            &clean::partitions(root, &name),
        );
        let result = std::fs::OpenOptions::new()
            .write(true)
            .open(&disk.name)
            .and_then(|f| clean::wipe(&f, &ranges));
        if let Err(e) = result {
            return Outcome::Failed {
                message: format!("wiping {}: {}", disk.name, error_chain(&e)),
            };
        }
        done.push(disk.name);
    }
    Outcome::Cleaned { disks: done }
}

/// IPv4 addresses per interface, from busybox's `ip -o -4 addr`.
fn addresses() -> BTreeMap<String, String> {
    let Ok(out) = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
    else {
        return BTreeMap::new();
    };
    let mut map = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0"
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(name), Some(pos)) = (fields.get(1), fields.iter().position(|f| *f == "inet"))
            && let Some(addr) = fields.get(pos + 1)
        {
            let ip = addr.split('/').next().unwrap_or_default();
            map.entry(name.trim_end_matches(':').to_string())
                .or_insert_with(|| ip.to_string());
        }
    }
    map
}
