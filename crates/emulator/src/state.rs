//! Per-system mutable state and its power/boot semantics.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::Method;
use serde::{Deserialize, Serialize};

use crate::counters::MethodCounts;
use crate::fault::Fault;

/// Oldest entries are dropped beyond this so a long demo cannot grow memory.
const MAX_ACTIONS: usize = 1024;

pub const BOOT_TARGETS: &[&str] = &["None", "Pxe", "Hdd", "Cd", "BiosSetup", "UefiHttp"];
pub const BOOT_ENABLED: &[&str] = &["Disabled", "Once", "Continuous"];
pub const BOOT_MODES: &[&str] = &["UEFI", "Legacy"];
pub const RESET_TYPES: &[&str] = &[
    "On",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "ForceOn",
    "PowerCycle",
    "Nmi",
];

pub fn system_id(index: usize) -> String {
    format!("sys-{index}")
}

/// Parses `sys-N` (canonical decimal, no leading zeros) below `count`.
pub fn parse_system_id(id: &str, count: usize) -> Option<usize> {
    let digits = id.strip_prefix("sys-")?;
    parse_index(digits, count)
}

/// Parses a canonical decimal index below `count`.
pub fn parse_index(digits: &str, count: usize) -> Option<usize> {
    let bytes = digits.as_bytes();
    if bytes.is_empty() || bytes.len() > 19 || (bytes.len() > 1 && bytes[0] == b'0') {
        return None;
    }
    let mut n: usize = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(usize::from(b - b'0'))?;
    }
    (n < count).then_some(n)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PowerState {
    On,
    Off,
}

impl PowerState {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::On => "On",
            PowerState::Off => "Off",
        }
    }
}

/// Boot source override, with Redfish's own value names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootOverride {
    /// `None`, `Pxe`, `Hdd`, `Cd`, `BiosSetup` or `UefiHttp`.
    pub target: String,
    /// `Disabled`, `Once` or `Continuous`.
    pub enabled: String,
    /// `UEFI` or `Legacy`.
    pub mode: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualMediaSnapshot {
    pub inserted: bool,
    pub image: Option<String>,
    pub write_protected: bool,
}

/// What one emulated system looks like right now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemSnapshot {
    pub id: String,
    pub power_state: PowerState,
    /// Where an accepted reset will take the power once `power_delay` has passed.
    pub pending_power_state: Option<PowerState>,
    pub boot: BootOverride,
    pub virtual_media: VirtualMediaSnapshot,
    /// Actions received, oldest first: `Reset:<ResetType>`, `PatchBoot`,
    /// `InsertMedia`, `EjectMedia`.
    pub actions: Vec<String>,
    /// When each entry of `actions` was received, in microseconds since the Unix epoch
    /// (same length and order as `actions`), so a client can measure its own latency.
    #[serde(default)]
    pub action_times_us: Vec<u64>,
    /// Number of boots (power-on from Off, or a restart) that have landed.
    pub boots: u64,
    /// Device the last boot used: the override target when one was active,
    /// `Default` otherwise; `None` before the first boot.
    pub last_boot_source: Option<String>,
    pub fault: Option<Fault>,
    /// Current `ETag` of the ComputerSystem resource.
    pub etag: String,
}

#[derive(Clone, Copy)]
struct Pending {
    at: Instant,
    to: PowerState,
    restart: bool,
}

pub struct SystemState {
    pub power: PowerState,
    pending: Option<Pending>,
    pub boot_target: &'static str,
    pub boot_enabled: &'static str,
    pub boot_mode: &'static str,
    pub vm_inserted: bool,
    pub vm_image: Option<String>,
    pub vm_write_protected: bool,
    actions: Vec<String>,
    action_times_us: Vec<u64>,
    boots: u64,
    last_boot: Option<&'static str>,
    version: u64,
    pub fault: Option<Fault>,
    /// BIOS settings: applied and pending (taken at the next boot).
    pub bios: crate::bios::BiosState,
    /// Firmware versions: the system's `BiosVersion`, its manager's `FirmwareVersion`, its
    /// network adapter's `FirmwarePackageVersion`.
    pub bios_version: String,
    pub bmc_version: String,
    pub nic_version: String,
}

impl SystemState {
    fn new(power: PowerState) -> Self {
        Self {
            power,
            pending: None,
            boot_target: "None",
            boot_enabled: "Disabled",
            boot_mode: "UEFI",
            vm_inserted: false,
            vm_image: None,
            vm_write_protected: true,
            actions: Vec::new(),
            action_times_us: Vec::new(),
            boots: 0,
            last_boot: None,
            version: 1,
            fault: None,
            bios: Default::default(),
            bios_version: "FM-BIOS-1.0.0".into(),
            bmc_version: "1.0.0-emulated".into(),
            nic_version: "FM-NIC-20.0.1".into(),
        }
    }

    /// Applies a pending power transition once it is due. Called on every read
    /// so no timer task per system is needed.
    pub fn settle(&mut self, now: Instant) {
        if let Some(p) = self.pending
            && now >= p.at
        {
            self.pending = None;
            self.land(p.to, p.restart);
        }
    }

    fn land(&mut self, to: PowerState, restart: bool) {
        match to {
            PowerState::On if restart || self.power == PowerState::Off => {
                self.power = PowerState::On;
                self.boot();
            }
            PowerState::On => {}
            PowerState::Off => self.power = PowerState::Off,
        }
        self.touch();
    }

    fn boot(&mut self) {
        self.boots += 1;
        if self.fault == Some(Fault::DropBiosSettings) {
            self.bios.drop_pending();
        } else {
            self.bios.apply_pending();
        }
        let overridden = self.boot_enabled != "Disabled" && self.boot_target != "None";
        self.last_boot = Some(if overridden {
            self.boot_target
        } else {
            "Default"
        });
        // Honour Once, unlike some emulators: the override is spent by this boot.
        if self.boot_enabled == "Once" {
            self.boot_enabled = "Disabled";
            self.boot_target = "None";
        }
    }

    /// Bumps the ETag version after any visible change.
    pub fn touch(&mut self) {
        self.version += 1;
    }

    pub fn etag(&self) -> String {
        format!("\"{}\"", self.version)
    }

    pub fn record(&mut self, action: impl Into<String>) {
        if self.actions.len() >= MAX_ACTIONS {
            self.actions.remove(0);
            self.action_times_us.remove(0);
        }
        self.actions.push(action.into());
        self.action_times_us.push(unix_micros(SystemTime::now()));
    }

    /// Accepts a (validated) reset. A later reset replaces one still pending.
    pub fn reset(&mut self, reset_type: &'static str, delay: Duration, now: Instant) {
        self.settle(now);
        self.record(format!("Reset:{reset_type}"));
        let (to, restart) = match reset_type {
            "On" | "ForceOn" => (PowerState::On, false),
            "ForceOff" | "GracefulShutdown" => (PowerState::Off, false),
            "GracefulRestart" | "ForceRestart" | "PowerCycle" => (PowerState::On, true),
            // Nmi only signals the OS; nothing observable changes.
            _ => return,
        };
        if delay.is_zero() {
            self.pending = None;
            self.land(to, restart);
        } else {
            self.pending = Some(Pending {
                at: now + delay,
                to,
                restart,
            });
            self.touch();
        }
    }

    fn snapshot(&self, index: usize) -> SystemSnapshot {
        SystemSnapshot {
            id: system_id(index),
            power_state: self.power,
            pending_power_state: self.pending.map(|p| p.to),
            boot: BootOverride {
                target: self.boot_target.into(),
                enabled: self.boot_enabled.into(),
                mode: self.boot_mode.into(),
            },
            virtual_media: VirtualMediaSnapshot {
                inserted: self.vm_inserted,
                image: self.vm_image.clone(),
                write_protected: self.vm_write_protected,
            },
            actions: self.actions.clone(),
            action_times_us: self.action_times_us.clone(),
            boots: self.boots,
            last_boot_source: self.last_boot.map(str::to_owned),
            fault: self.fault.clone(),
            etag: self.etag(),
        }
    }
}

fn unix_micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Atomic per-method request counters.
#[derive(Default)]
pub struct MethodCells([AtomicU64; 5]);

impl MethodCells {
    pub fn count(&self, method: &Method) {
        let slot = match *method {
            Method::GET => 0,
            Method::POST => 1,
            Method::PATCH => 2,
            Method::DELETE => 3,
            _ => 4,
        };
        self.0[slot].fetch_add(1, Ordering::Relaxed);
    }

    pub fn load(&self) -> MethodCounts {
        let v = |i: usize| self.0[i].load(Ordering::Relaxed);
        MethodCounts {
            get: v(0),
            post: v(1),
            patch: v(2),
            delete: v(3),
            other: v(4),
        }
    }

    pub fn clear(&self) {
        for cell in &self.0 {
            cell.store(0, Ordering::Relaxed);
        }
    }
}

/// One system: its state behind its own mutex plus lock-free counters.
pub struct SystemCell {
    state: Mutex<SystemState>,
    pub counts: MethodCells,
}

impl SystemCell {
    pub fn new(power: PowerState) -> Self {
        Self {
            state: Mutex::new(SystemState::new(power)),
            counts: MethodCells::default(),
        }
    }

    /// Locks the state, settling any due power transition first. A poisoned
    /// lock is recovered: the state is plain data and stays consistent.
    pub fn lock(&self, now: Instant) -> std::sync::MutexGuard<'_, SystemState> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        guard.settle(now);
        guard
    }

    pub fn fault(&self) -> Option<Fault> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fault
            .clone()
    }

    pub fn set_fault(&self, fault: Option<Fault>) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).fault = fault;
    }

    pub fn snapshot(&self, index: usize, now: Instant) -> SystemSnapshot {
        self.lock(now).snapshot(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_canonical_ids_only() {
        assert_eq!(parse_system_id("sys-0", 3), Some(0));
        assert_eq!(parse_system_id("sys-2", 3), Some(2));
        assert_eq!(parse_system_id("sys-3", 3), None);
        assert_eq!(parse_system_id("sys-01", 3), None);
        assert_eq!(parse_system_id("sys-", 3), None);
        assert_eq!(parse_system_id("sys-1a", 3), None);
        assert_eq!(parse_system_id("node-1", 3), None);
        assert_eq!(parse_system_id("sys-99999999999999999999999", 3), None);
    }

    #[test]
    fn once_override_is_spent_by_one_boot() {
        let now = Instant::now();
        let mut s = SystemState::new(PowerState::Off);
        s.boot_target = "Pxe";
        s.boot_enabled = "Once";
        s.reset("On", Duration::ZERO, now);
        assert_eq!(s.power, PowerState::On);
        assert_eq!(s.last_boot, Some("Pxe"));
        assert_eq!((s.boot_target, s.boot_enabled), ("None", "Disabled"));
        s.reset("ForceRestart", Duration::ZERO, now);
        assert_eq!(s.last_boot, Some("Default"));
        assert_eq!(s.boots, 2);
    }

    #[test]
    fn every_action_carries_its_receive_time() {
        let before = unix_micros(SystemTime::now());
        let mut s = SystemState::new(PowerState::Off);
        s.reset("On", Duration::ZERO, Instant::now());
        s.record("PatchBoot");
        let after = unix_micros(SystemTime::now());
        let snap = s.snapshot(0);
        assert_eq!(snap.actions.len(), 2);
        assert_eq!(snap.action_times_us.len(), 2);
        assert!(snap.action_times_us[0] <= snap.action_times_us[1]);
        assert!(
            snap.action_times_us
                .iter()
                .all(|t| (before..=after).contains(t))
        );
        for i in 0..MAX_ACTIONS {
            s.record(format!("a{i}"));
        }
        assert_eq!(s.actions.len(), MAX_ACTIONS);
        assert_eq!(s.action_times_us.len(), MAX_ACTIONS);
    }

    #[test]
    fn delayed_transition_lands_when_due() {
        let now = Instant::now();
        let mut s = SystemState::new(PowerState::On);
        s.reset("ForceOff", Duration::from_secs(5), now);
        assert_eq!(s.power, PowerState::On);
        s.settle(now + Duration::from_secs(4));
        assert_eq!(s.power, PowerState::On);
        s.settle(now + Duration::from_secs(5));
        assert_eq!(s.power, PowerState::Off);
        assert!(s.pending.is_none());
    }
}
