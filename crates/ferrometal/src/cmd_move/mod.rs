//! `ferrometal move`: pivot BareMetalHosts (metal3's contract) or HostClaims from one cluster
//! to another, through nothing but the two clusters' Kubernetes APIs.
//!
//! Hosts move in four phases, each done for every host before the next begins; within a phase
//! `--concurrency` hosts (32 by default) are worked on at a time, each host's steps in order.
//! A phase prints a line when it starts, one every few seconds while it runs and one with its
//! counts at the end; a host that fails is named with its error on a line of its own.
//!
//! 1. `pause` — `baremetalhost.metal3.io/paused: ferrometal.io/move` on each host at the source
//!    (a host paused by someone else keeps that value, here and at the target), then wait until
//!    the source's controllers are quiet (every host's resourceVersion stable for a second).
//! 2. `copy` — the host's Secrets (BMC credentials, user/network/meta data), the host (metadata,
//!    spec, and `baremetalhost.metal3.io/status` holding the source's `.status`, still paused)
//!    and its HardwareData are created at the target, or brought up to date.
//! 3. `unpause` — the move's pause is removed at the target: its controller restores the status
//!    from the annotation and carries on from the same state, without provisioning again.
//! 4. `remove` — at the source, each host's pause is first swapped for metal3's `detached`
//!    annotation so that the source's provisioner forgets it without touching it (a source Ironic
//!    left running would otherwise keep enforcing the power state it knew), bounded to 30 s;
//!    then, paused again, the Secrets no remaining host references, the HardwareData and the
//!    host are deleted, finalizers removed first: the source never deprovisions or powers off.
//!
//! Every step looks at the current state first, so running the command again after an
//! interruption at any point completes the move, with nothing duplicated or lost.
//!
//! Crash injection, for tests: `FERROMETAL_MOVE_CRASH_AFTER=<phase>` (`pause`, `copy`, `unpause`,
//! `remove`) aborts the process (`std::process::abort`) right after that phase is done for every
//! host; `<phase>:N` right after its Nth host finished (other hosts of the phase may be half-way
//! then, as in a real crash).

mod args;
mod claims;
mod common;
mod host_parts;
mod hosts;
mod hosts_detach;
mod hosts_dry_run;
mod hosts_guard;
mod hosts_item;
mod hosts_outcome;
mod hosts_remove;
mod objects;
mod phase;

pub use args::Args;

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let (from, to) = common::connect_both(&args.from, &args.to).await?;
    if args.claims {
        claims::run(&args, &from, &to).await
    } else {
        hosts::run(&args, &from, &to).await
    }
}
