//! ferrometal benchmarks. Each scenario starts what it needs on 127.0.0.1 (free ports, fresh
//! state), prints progress, ends with a table, writes `bench/results/SCENARIO-N.json`, and stops
//! its children. Run release builds:
//!
//! ```sh
//! cargo build --release -p ferrometal -p ferrometal-bench
//! cargo run --release -p ferrometal-bench -- scale --hosts 1000
//! ```

mod apiserver;
mod cel;
mod common;
mod console;
mod crash;
mod deploy;
mod emucap;
mod hybrid;
mod isolation;
mod jobs;
mod pivot;
mod procfs;
mod scale;
mod stats;
mod vmlab;
mod vs_ironic;
mod vs_ironic_deploy;
mod writes;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ferrometal-bench", about = "ferrometal benchmarks")]
struct Cli {
    /// The ferrometal binary (default: next to this one, e.g. target/release/ferrometal).
    #[arg(long, global = true)]
    ferrometal: Option<PathBuf>,
    /// Keep the scratch directories (data dirs, logs) instead of removing them.
    #[arg(long, global = true)]
    keep: bool,
    /// Suffix for the result file (`bench/results/SCENARIO-N-TAG.json`), for variant runs.
    #[arg(long, global = true)]
    tag: Option<String>,
    #[command(subcommand)]
    scenario: Scenario,
}

/// The flags of scenarios that run a fleet through `ferrometal serve`.
#[derive(clap::Args)]
struct Fleet {
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    /// Creates in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1200)]
    timeout: u64,
    /// Extra `ferrometal serve` flags (repeatable).
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
}

#[derive(Subcommand)]
enum Scenario {
    /// N hosts on the built-in emulator: apply → available → provisioned, memory, CPU, BMC
    /// requests per phase and in steady state, annotation → BMC latency.
    Scale {
        #[arg(long, default_value_t = 100)]
        hosts: usize,
        /// `serve --power-poll-interval`, seconds (also the steady-state counting unit).
        #[arg(long, default_value_t = 10)]
        poll_interval: u64,
        /// Steady-state window, in poll intervals.
        #[arg(long, default_value_t = 3)]
        steady_intervals: u64,
        /// Operation-annotation latency samples (one host at a time).
        #[arg(long, default_value_t = 200)]
        latency_samples: usize,
        /// Create/patch requests in flight.
        #[arg(long, default_value_t = 16)]
        create_concurrency: usize,
        /// Give up after this many seconds (the partial figures are still reported).
        #[arg(long, default_value_t = 900)]
        timeout: u64,
        /// Seconds of emulator capacity measurement before the run.
        #[arg(long, default_value_t = 5)]
        capacity_seconds: u64,
        /// Extra `ferrometal serve` flags, e.g. --serve-arg=--max-busy=1000 (repeatable).
        #[arg(long = "serve-arg", allow_hyphen_values = true)]
        serve_args: Vec<String>,
        /// Provision through one HostClaim per host (from a tenant namespace) instead of
        /// patching the hosts directly.
        #[arg(long)]
        via_claims: bool,
    },
    /// Ironic versus ferrometal on the same sushy-tools emulator: enroll → available.
    VsIronic {
        #[arg(long, default_value_t = 100)]
        hosts: usize,
        /// Creates in flight to ferrometal's API.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Requests in flight to Ironic's API (its all-in-one process stalls with many).
        #[arg(long, default_value_t = 4)]
        ironic_concurrency: usize,
        /// Give up on a side after this many seconds.
        #[arg(long, default_value_t = 1200)]
        timeout: u64,
        /// Run the ferrometal side only.
        #[arg(long)]
        skip_ironic: bool,
    },
    /// The embedded API server alone: creates/s, list latency, watch fan-out, store size.
    Apiserver {
        #[arg(long, default_value_t = 10000)]
        objects: usize,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Full lists timed.
        #[arg(long, default_value_t = 20)]
        lists: usize,
        /// Objects changed once each while the watchers watch.
        #[arg(long, default_value_t = 1000)]
        changes: usize,
        #[arg(long, default_value_t = 10)]
        watchers: usize,
        /// Run as an ordinary user (a client certificate bound to `edit` in the namespace,
        /// among BINDINGS other RoleBindings and ClusterRoleBindings) instead of the admin,
        /// whose `system:masters` group skips RBAC evaluation.
        #[arg(long)]
        rbac_user: bool,
        #[arg(long, default_value_t = 500)]
        bindings: usize,
    },
    /// The CRD schema's validation (OpenAPI and CEL rules) alone, in process: microseconds per
    /// validation of a host's status write, spec edit and create, and a BMCJob's status write.
    Cel {
        #[arg(long, default_value_t = 20000)]
        iterations: usize,
    },
    /// N hosts on the emulator, then one three-task BMCJob per host at once: wall time, BMC
    /// requests per job, job latency.
    Jobs {
        #[command(flatten)]
        fleet: Fleet,
        /// Start the jobs as soon as the hosts are available and on, without waiting for
        /// every host's firmware objects to be read first.
        #[arg(long)]
        unsettled: bool,
    },
    /// Crash under load: N hosts provision while serve is killed with SIGKILL K times; fails
    /// on any repeated destructive BMC action, revision going backwards or watch disorder.
    Crash {
        #[command(flatten)]
        fleet: Fleet,
        #[arg(long, default_value_t = 10)]
        kills: usize,
    },
    /// Pivot: N hosts (two thirds provisioned) moved from one serve to another with
    /// `ferrometal move`: phase times, time until all report their state at the target, BMC
    /// actions meanwhile (must be none).
    Pivot {
        #[command(flatten)]
        fleet: Fleet,
        /// `ferrometal move --concurrency` (default: the move's own default).
        #[arg(long)]
        move_concurrency: Option<usize>,
    },
    /// Isolation: N healthy hosts and a rack of B more whose BMCs then all hang; annotation ->
    /// BMC latency and the healthy hosts' power polls with the rack answering and silent.
    Isolation {
        #[command(flatten)]
        fleet: Fleet,
        /// Hosts in the rack that goes silent.
        #[arg(long, default_value_t = 200)]
        broken: usize,
        /// `serve --power-poll-interval`, seconds.
        #[arg(long, default_value_t = 10)]
        poll_interval: u64,
        /// `serve --bmc-timeout`, seconds: how long each hung request is held.
        #[arg(long, default_value_t = 10)]
        bmc_timeout: u64,
        /// Each window's length, in poll intervals.
        #[arg(long, default_value_t = 6)]
        intervals: u64,
        /// Annotation samples per window, spread over it.
        #[arg(long, default_value_t = 200)]
        samples: usize,
    },
    /// Real (virtual) machines: N QEMU VMs behind sushy-tools' libvirt driver (needs root),
    /// apply -> available -> the live ISO running on each (console line seen), BMC requests
    /// per host per phase.
    Vmlab {
        #[arg(long, default_value_t = 4)]
        vms: usize,
        /// Legacy BIOS instead of UEFI.
        #[arg(long)]
        legacy: bool,
        #[arg(long, default_value_t = 900)]
        timeout: u64,
    },
    /// The deploy agent on N lab VMs (needs root): a raw and a qcow2 disk image of
    /// `--image-mib` MiB and the live ISO, available -> OS booted (console line), the agent's
    /// phases p50/max, MB/s written, serve CPU and peak RSS.
    Deploy {
        #[arg(long, default_value_t = 4)]
        vms: usize,
        #[arg(long, default_value_t = 256)]
        image_mib: u64,
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
    },
    /// HostClaims over bare metal and VMs side by side (needs root): N claims served by lab
    /// VMs behind sushy-tools through the deploy agent, N by a libvirt HostClass, one image:
    /// apply -> OS booted and delete -> released, per kind.
    Hybrid {
        #[arg(long, default_value_t = 2)]
        vms: usize,
        #[arg(long, default_value_t = 64)]
        image_mib: u64,
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
    },
    /// The web console with a large fleet in headless Chromium: first paint, update latency.
    Console {
        #[arg(long, default_value_t = 10000)]
        hosts: usize,
        /// Single-host changes timed.
        #[arg(long, default_value_t = 20)]
        samples: usize,
        /// Hosts changed at once.
        #[arg(long, default_value_t = 1000)]
        burst: usize,
    },
    /// Ironic with its agent ramdisk (IPA) against ferrometal's deploy agent on N lab VMs each
    /// (needs root), one stack after the other: apply -> available, a raw and a qcow2 image of
    /// `--image-mib` MiB to OS booted, deprovisioning, BMC requests, peak RSS of each stack.
    VsIronicDeploy {
        #[arg(long, default_value_t = 4)]
        vms: usize,
        #[arg(long, default_value_t = 256)]
        image_mib: u64,
        /// BIOS VMs instead of UEFI.
        #[arg(long)]
        legacy: bool,
        #[arg(long, default_value_t = 3600)]
        timeout: u64,
    },
    /// The emulator's own capacity (GET/s of a ComputerSystem).
    Emulator {
        #[arg(long, default_value_t = 10000)]
        systems: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(tag) = &cli.tag {
        let _ = common::TAG.set(tag.clone());
    }
    let result = match cli.scenario {
        Scenario::Scale {
            hosts,
            poll_interval,
            steady_intervals,
            latency_samples,
            create_concurrency,
            timeout,
            capacity_seconds,
            serve_args,
            via_claims,
        } => {
            scale::run(scale::Opts {
                hosts: hosts.max(1),
                poll_interval: poll_interval.max(1),
                steady_intervals: steady_intervals.max(1),
                latency_samples,
                create_concurrency,
                timeout,
                capacity_seconds: capacity_seconds.max(1),
                serve_args,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
                via_claims,
            })
            .await
        }
        Scenario::VsIronic {
            hosts,
            concurrency,
            ironic_concurrency,
            timeout,
            skip_ironic,
        } => {
            vs_ironic::run(vs_ironic::Opts {
                hosts: hosts.max(1),
                concurrency,
                ironic_concurrency: ironic_concurrency.max(1),
                timeout,
                skip_ironic,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Apiserver {
            objects,
            concurrency,
            lists,
            changes,
            watchers,
            rbac_user,
            bindings,
        } => {
            apiserver::run(apiserver::Opts {
                rbac_user: rbac_user.then_some(bindings),
                objects: objects.max(1),
                concurrency,
                lists: lists.max(1),
                changes,
                watchers,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Cel { iterations } => cel::run(cel::Opts { iterations }),
        Scenario::Jobs { fleet, unsettled } => {
            jobs::run(jobs::Opts {
                hosts: fleet.hosts.max(1),
                concurrency: fleet.concurrency,
                timeout: fleet.timeout,
                serve_args: fleet.serve_args,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
                unsettled,
            })
            .await
        }
        Scenario::Crash { fleet, kills } => {
            crash::run(crash::Opts {
                hosts: fleet.hosts.max(1),
                kills,
                concurrency: fleet.concurrency,
                timeout: fleet.timeout,
                serve_args: fleet.serve_args,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Pivot {
            fleet,
            move_concurrency,
        } => {
            pivot::run(pivot::Opts {
                hosts: fleet.hosts.max(1),
                concurrency: fleet.concurrency,
                timeout: fleet.timeout,
                serve_args: fleet.serve_args,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
                move_concurrency,
            })
            .await
        }
        Scenario::Isolation {
            fleet,
            broken,
            poll_interval,
            bmc_timeout,
            intervals,
            samples,
        } => {
            isolation::run(isolation::Opts {
                hosts: fleet.hosts.max(1),
                broken,
                poll_interval: poll_interval.max(1),
                bmc_timeout: bmc_timeout.max(1),
                intervals: intervals.max(1),
                samples: samples.max(1),
                concurrency: fleet.concurrency,
                timeout: fleet.timeout,
                serve_args: fleet.serve_args,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Hybrid {
            vms,
            image_mib,
            timeout,
        } => {
            hybrid::run(hybrid::Opts {
                vms: vms.max(1),
                image_mib,
                timeout,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Deploy {
            vms,
            image_mib,
            timeout,
        } => {
            deploy::run(deploy::Opts {
                vms: vms.max(1),
                image_mib,
                timeout,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::VsIronicDeploy {
            vms,
            image_mib,
            legacy,
            timeout,
        } => {
            vs_ironic_deploy::run(vs_ironic_deploy::Opts {
                vms: vms.max(1),
                image_mib,
                legacy,
                timeout,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Console {
            hosts,
            samples,
            burst,
        } => {
            console::run(console::Opts {
                hosts: hosts.max(1),
                samples: samples.max(1),
                burst,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Vmlab {
            vms,
            legacy,
            timeout,
        } => {
            vmlab::run(vmlab::Opts {
                vms: vms.max(1),
                legacy,
                timeout,
                ferrometal: cli.ferrometal,
                keep: cli.keep,
            })
            .await
        }
        Scenario::Emulator {
            systems,
            seconds,
            runs,
        } => {
            emucap::run(emucap::Opts {
                systems: systems.max(1),
                seconds: seconds.max(1),
                runs: runs.max(1),
                keep: cli.keep,
            })
            .await
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
