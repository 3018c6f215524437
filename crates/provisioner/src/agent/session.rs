//! One boot of one host into the agent ramdisk: the instructions it is handed in order, what it
//! reported, and when it was last heard from. Pure bookkeeping, no I/O: the service around it
//! decides when a session starts and ends.

use std::time::{Duration, Instant};

use ferrometal_agent::protocol::{DeploySpec, Hardware, Instruction, Outcome, Report};

/// What a boot into the ramdisk is for.
#[derive(Debug, Clone, PartialEq)]
pub enum Purpose {
    /// In-band inspection.
    Inspect,
    /// Metadata cleaning alone (deprovisioning, `automatedCleaningMode: metadata`).
    Clean,
    /// Write an image; `clean` first when metadata cleaning is on.
    Deploy { spec: Box<DeploySpec>, clean: bool },
}

impl Purpose {
    fn steps(&self, boot: &str) -> Vec<Instruction> {
        let id = |what: &str| format!("{boot}-{what}");
        match self {
            Purpose::Inspect => vec![Instruction::Inspect { id: id("inspect") }],
            Purpose::Clean => vec![Instruction::Clean { id: id("clean") }],
            Purpose::Deploy { spec, clean } => {
                let mut steps = Vec::new();
                if *clean {
                    steps.push(Instruction::Clean { id: id("clean") });
                }
                steps.push(Instruction::Deploy {
                    id: id("deploy"),
                    deploy: spec.clone(),
                });
                steps
            }
        }
    }
}

/// The session's end, once known.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Succeeded,
    Failed(String),
}

#[derive(Debug)]
pub struct Session {
    pub boot: String,
    pub purpose: Purpose,
    steps: Vec<Instruction>,
    next: usize,
    pub started: Instant,
    /// When the boot media were ready: the host's boot is timed from here.
    pub media_ready: Option<Instant>,
    /// The agent's first call (the ramdisk booted and reached the API).
    pub hello: Option<Instant>,
    pub last_contact: Option<Instant>,
    pub ending: Option<Ending>,
    pub hardware: Option<Hardware>,
    /// Seconds per phase, in the order they happened.
    pub timings: Vec<(String, f64)>,
    pub write_mb_per_s: Option<f64>,
    pub root_disk: Option<String>,
}

impl Session {
    pub fn new(boot: String, purpose: Purpose, now: Instant) -> Session {
        let steps = purpose.steps(&boot);
        Session {
            boot,
            purpose,
            steps,
            next: 0,
            started: now,
            media_ready: None,
            hello: None,
            last_contact: None,
            ending: None,
            hardware: None,
            timings: Vec::new(),
            write_mb_per_s: None,
            root_disk: None,
        }
    }

    /// What the agent is to do now. The same answer until the step's report arrives.
    pub fn instruction(&mut self, now: Instant) -> Instruction {
        self.contact(now);
        match (&self.ending, self.steps.get(self.next)) {
            (None, Some(step)) => step.clone(),
            _ => Instruction::Finish {
                id: format!("{}-finish", self.boot),
                reboot: false,
            },
        }
    }

    /// The boot ISO is written: its time is a phase, and the boot is timed from now.
    pub fn set_media_ready(&mut self, now: Instant) {
        if self.media_ready.is_none() {
            self.media_ready = Some(now);
            self.timings.push((
                "bootMedia".to_string(),
                now.duration_since(self.started).as_secs_f64(),
            ));
        }
    }

    fn contact(&mut self, now: Instant) {
        if self.hello.is_none() {
            self.hello = Some(now);
            let from = self.media_ready.unwrap_or(self.started);
            self.timings.push((
                "ramdiskBoot".to_string(),
                now.duration_since(from).as_secs_f64(),
            ));
        }
        self.last_contact = Some(now);
    }

    /// Takes a report; one for a step already done (a retry) or not current changes nothing.
    pub fn report(&mut self, report: Report, now: Instant) {
        self.contact(now);
        let Some(id) = report.id.as_deref() else {
            return; // the hello
        };
        if self.ending.is_some() || self.steps.get(self.next).and_then(|s| s.id()) != Some(id) {
            return;
        }
        let step = match &self.steps[self.next] {
            Instruction::Inspect { .. } => "inspection",
            Instruction::Clean { .. } => "cleaning",
            _ => "deploy",
        };
        // A step's own total is its phase unless the agent timed its parts (a deploy's
        // download+write and config drive), which would only repeat it.
        let parts: Vec<(String, f64)> = report
            .timings
            .iter()
            .filter(|(phase, _)| *phase != "total")
            .map(|(phase, seconds)| (phase.clone(), *seconds))
            .collect();
        match report.timings.get("total") {
            Some(total) if parts.is_empty() => self.timings.push((step.to_string(), *total)),
            _ => self.timings.extend(parts),
        }
        match report.outcome {
            Outcome::Failed { message } => {
                self.ending = Some(Ending::Failed(message));
                return;
            }
            Outcome::Inspected { hardware } => self.hardware = Some(*hardware),
            Outcome::Deployed { root_disk } => {
                self.root_disk = Some(root_disk);
                self.write_mb_per_s = report.write_mb_per_s;
            }
            Outcome::Cleaned { .. } | Outcome::Alive => {}
        }
        self.next += 1;
        if self.next >= self.steps.len() {
            self.ending = Some(Ending::Succeeded);
        }
    }

    /// A failure when the agent never called (`boot_timeout` after the session began) or went
    /// silent (`silence_timeout` since it was last heard from) before the end.
    pub fn overdue(
        &self,
        now: Instant,
        boot_timeout: Duration,
        silence_timeout: Duration,
    ) -> Option<String> {
        if self.ending.is_some() {
            return None;
        }
        match self.last_contact {
            None if now.duration_since(self.started) > boot_timeout => Some(format!(
                "the deploy agent did not call back within {} s of the boot into its ramdisk",
                boot_timeout.as_secs()
            )),
            Some(last) if now.duration_since(last) > silence_timeout => Some(format!(
                "the deploy agent stopped answering ({} s since it was last heard from)",
                now.duration_since(last).as_secs()
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn spec() -> Box<DeploySpec> {
        Box::new(DeploySpec {
            image_url: "http://images/disk.qcow2".into(),
            format: "qcow2".into(),
            checksum: "abc".into(),
            checksum_type: "sha256".into(),
            root_device_hints: Default::default(),
            config_drive_url: None,
            software_raid: Vec::new(),
        })
    }

    fn report(id: &str, outcome: Outcome) -> Report {
        Report {
            id: Some(id.into()),
            outcome,
            timings: BTreeMap::from([("total".to_string(), 1.5)]),
            write_mb_per_s: Some(90.0),
        }
    }

    #[test]
    fn a_deploy_hands_out_cleaning_then_the_image_then_finish() {
        let t0 = Instant::now();
        let mut s = Session::new(
            "b1".into(),
            Purpose::Deploy {
                spec: spec(),
                clean: true,
            },
            t0,
        );
        let first = s.instruction(t0 + Duration::from_secs(9));
        assert_eq!(
            first,
            Instruction::Clean {
                id: "b1-clean".into()
            }
        );
        assert_eq!(s.timings[0], ("ramdiskBoot".to_string(), 9.0));
        // Asked again before reporting: the same step.
        assert_eq!(s.instruction(t0), first);
        // A report for another step changes nothing.
        s.report(
            report(
                "b1-deploy",
                Outcome::Deployed {
                    root_disk: "/dev/vda".into(),
                },
            ),
            t0,
        );
        assert_eq!(s.instruction(t0), first);
        s.report(report("b1-clean", Outcome::Cleaned { disks: vec![] }), t0);
        assert!(matches!(s.instruction(t0), Instruction::Deploy { .. }));
        s.report(
            report(
                "b1-deploy",
                Outcome::Deployed {
                    root_disk: "/dev/vda".into(),
                },
            ),
            t0,
        );
        assert_eq!(s.ending, Some(Ending::Succeeded));
        assert_eq!(s.root_disk.as_deref(), Some("/dev/vda"));
        assert!(matches!(s.instruction(t0), Instruction::Finish { .. }));
        // The same report again (a retry): still one success, nothing added.
        let timings = s.timings.len();
        s.report(
            report(
                "b1-deploy",
                Outcome::Deployed {
                    root_disk: "/dev/sdb".into(),
                },
            ),
            t0,
        );
        assert_eq!(s.root_disk.as_deref(), Some("/dev/vda"));
        assert_eq!(s.timings.len(), timings);
    }

    #[test]
    fn a_failure_ends_the_session_with_the_agents_words() {
        let t0 = Instant::now();
        let mut s = Session::new(
            "b2".into(),
            Purpose::Deploy {
                spec: spec(),
                clean: false,
            },
            t0,
        );
        assert!(matches!(s.instruction(t0), Instruction::Deploy { .. }));
        s.report(
            report(
                "b2-deploy",
                Outcome::Failed {
                    message: "HTTP 404".into(),
                },
            ),
            t0,
        );
        assert_eq!(s.ending, Some(Ending::Failed("HTTP 404".into())));
        assert!(matches!(s.instruction(t0), Instruction::Finish { .. }));
    }

    #[test]
    fn inspection_keeps_the_hardware() {
        let t0 = Instant::now();
        let mut s = Session::new("b3".into(), Purpose::Inspect, t0);
        let hw = Hardware {
            ram_mebibytes: 2048,
            ..Hardware::default()
        };
        s.report(
            report(
                "b3-inspect",
                Outcome::Inspected {
                    hardware: Box::new(hw.clone()),
                },
            ),
            t0,
        );
        assert_eq!(s.hardware, Some(hw));
        assert_eq!(s.ending, Some(Ending::Succeeded));
    }

    #[test]
    fn silence_before_the_first_call_and_after_the_last_is_overdue() {
        let t0 = Instant::now();
        let (boot, quiet) = (Duration::from_secs(600), Duration::from_secs(60));
        let mut s = Session::new("b4".into(), Purpose::Inspect, t0);
        assert_eq!(s.overdue(t0 + Duration::from_secs(599), boot, quiet), None);
        let err = s
            .overdue(t0 + Duration::from_secs(601), boot, quiet)
            .unwrap();
        assert!(err.contains("did not call back within 600 s"), "{err}");
        s.instruction(t0 + Duration::from_secs(10));
        assert_eq!(s.overdue(t0 + Duration::from_secs(70), boot, quiet), None);
        let err = s
            .overdue(t0 + Duration::from_secs(71), boot, quiet)
            .unwrap();
        assert!(err.contains("stopped answering (61 s"), "{err}");
        s.ending = Some(Ending::Succeeded);
        assert_eq!(s.overdue(t0 + Duration::from_secs(9999), boot, quiet), None);
    }
}
