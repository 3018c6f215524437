//! Memory and CPU of a process (and of its process tree) from /proc.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A `Key:   123 kB` line of /proc/PID/status, in bytes.
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

/// Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses):
/// index 0 is field 3 (`state`).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().collect())
}

/// (utime + stime) in clock ticks, from /proc/PID/stat.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let f = stat_fields(stat)?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Parent PID, from /proc/PID/stat.
pub fn stat_ppid(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

pub fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}

/// A point-in-time reading of one process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    pub rss: u64,
    /// Peak RSS over the process's life so far (VmHWM).
    pub hwm: u64,
    /// Of `rss`: anonymous memory (heap, stacks) and file-backed pages (mostly the binary's
    /// own code, shared and reclaimable).
    pub rss_anon: u64,
    pub rss_file: u64,
    pub cpu_secs: f64,
}

pub fn read(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(Reading {
        rss: status_kb(&status, "VmRSS").unwrap_or(0),
        hwm: status_kb(&status, "VmHWM").unwrap_or(0),
        rss_anon: status_kb(&status, "RssAnon").unwrap_or(0),
        rss_file: status_kb(&status, "RssFile").unwrap_or(0),
        cpu_secs: stat_cpu_ticks(&stat)? as f64 / clock_ticks() as f64,
    })
}

/// `pid` and every process descending from it.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat"))
                && let Some(pp) = stat_ppid(&stat)
            {
                children.entry(pp).or_default().push(p);
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// Sum over a process tree: current RSS, CPU seconds (of the live processes).
pub fn read_tree(pid: u32) -> Reading {
    let mut total = Reading::default();
    for p in tree(pid) {
        if let Some(r) = read(p) {
            total.rss += r.rss;
            total.hwm += r.hwm;
            total.rss_anon += r.rss_anon;
            total.rss_file += r.rss_file;
            total.cpu_secs += r.cpu_secs;
        }
    }
    total
}

/// Samples a process tree's summed RSS every `every` on a thread and keeps the peak.
pub struct PeakSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakSampler {
    pub fn start(pid: u32, every: Duration) -> PeakSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (peak, stop) = (peak.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(read_tree(pid).rss, Ordering::Relaxed);
                    std::thread::sleep(every);
                }
            }
        });
        PeakSampler {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_stat() {
        let status =
            "Name:\tferrometal\nVmPeak:\t  900 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40000 kB\n";
        assert_eq!(status_kb(status, "VmHWM"), Some(51234 * 1024));
        assert_eq!(status_kb(status, "VmRSS"), Some(40000 * 1024));
        assert_eq!(status_kb(status, "VmSwap"), None);
        // The command name may contain spaces and parentheses.
        let stat = "4242 (tokio (rt) w) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 1234 5000 100";
        assert_eq!(stat_cpu_ticks(stat), Some(325));
        assert_eq!(stat_ppid(stat), Some(17));
        assert_eq!(stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let r = read(me).expect("own /proc entry");
        assert!(r.rss > 0 && r.hwm >= r.rss);
        assert!(tree(me).contains(&me));
    }
}
