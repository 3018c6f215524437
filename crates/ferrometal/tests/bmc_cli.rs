//! `ferrometal bmc` as a user runs it, against sushy-tools, the emulator and ipmi_sim; and the
//! rule that a BMC password never shows in output, logs, errors or the process list.

use std::process::{Command, Output, Stdio};

use ferrometal_emulator::{Emulator, EmulatorConfig};
use ferrometal_test_support::peers::{self, IpmiSim, SUSHY_SYSTEM_0, Sushy, TempDir};

struct Cli {
    dir: TempDir,
}

impl Cli {
    fn new(password: &str) -> Cli {
        let dir = TempDir::new();
        std::fs::write(dir.path().join("password"), format!("{password}\n")).unwrap();
        Cli { dir }
    }

    fn run(&self, address: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_ferrometal"))
            .args([
                "--log",
                "debug",
                "bmc",
                "--address",
                address,
                "--username",
                "admin",
                "--password-file",
            ])
            .arg(self.dir.path().join("password"))
            .args(["--timeout", "5"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, address: &str, args: &[&str]) -> String {
        let out = self.run(address, args);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{args:?} failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn bmc_cli_against_sushy_tools() {
    let sushy = Sushy::start(1, "admin:password");
    let cli = Cli::new("password");
    let address = sushy.address(SUSHY_SYSTEM_0);
    assert_eq!(cli.ok(&address, &["power", "status"]).trim(), "power: Off");
    let out = json(&cli.ok(&address, &["-o", "json", "power", "on", "--wait"]));
    assert_eq!(out["power"], "On");
    assert_eq!(sushy.system(SUSHY_SYSTEM_0)["PowerState"], "On");
    cli.ok(&address, &["boot", "pxe", "--once"]);
    assert_eq!(
        sushy.system(SUSHY_SYSTEM_0)["Boot"]["BootSourceOverrideTarget"],
        "Pxe"
    );
    let files = peers::FileServer::start();
    let url = files.url("live.iso");
    let out = cli.ok(&address, &["media", "insert", &url]);
    assert!(out.contains("media.inserted: true"), "{out}");
    assert_eq!(sushy.virtual_cd(SUSHY_SYSTEM_0)["Image"], url.as_str());
    cli.ok(&address, &["media", "eject"]);
    assert_eq!(sushy.virtual_cd(SUSHY_SYSTEM_0)["Inserted"], false);
    let out = cli.ok(&address, &["inventory"]);
    assert!(out.contains("52:54:00:00:00:00"), "{out}");
    let out = cli.ok(&address, &["power", "off", "--wait"]);
    assert!(out.contains("power: Off"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bmc_cli_against_the_emulator() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 2,
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let address = emu.system_url(1).replace("http://", "redfish+http://");
    let cli = Cli::new("password");
    let inv = json(&cli.ok(&address, &["-o", "json", "inventory"]));
    assert!(!inv["inventory"]["cpus"].as_array().unwrap().is_empty());
    assert!(!inv["inventory"]["disks"].as_array().unwrap().is_empty());
    // As the README writes it: the output flag after the subcommand.
    let after = json(&cli.ok(&address, &["inventory", "-o", "json"]));
    assert_eq!(after["inventory"]["cpus"], inv["inventory"]["cpus"]);
    cli.ok(&address, &["power", "cycle"]);
    assert!(
        emu.state(1)
            .actions
            .iter()
            .any(|a| a.contains("PowerCycle"))
    );
    cli.ok(
        &address,
        &["--session", "boot", "cdrom", "--once", "--mode", "uefi"],
    );
    assert_eq!(emu.state(1).boot.target, "Cd");
    assert_eq!(
        emu.counters().open_sessions,
        0,
        "the CLI logs its session out"
    );
    let identity = cli.ok(&address, &["identity"]);
    assert!(identity.contains("identity.uuid: "), "{identity}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bios_settings_are_checked_staged_and_applied_at_the_next_boot() {
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let address = emu.system_url(0).replace("http://", "redfish+http://");
    let cli = Cli::new("password");
    let show = || json(&cli.ok(&address, &["-o", "json", "bios", "show"]))["bios"].clone();
    let bios = show();
    assert_eq!(bios["attributes"]["ProcTurboMode"], "Enabled");
    assert!(
        bios["registry"].as_array().is_some_and(|r| r.len() > 5),
        "{bios}"
    );
    let table = cli.ok(&address, &["bios", "show"]);
    assert!(
        table.contains("ProcTurboMode") && table.contains("[Enabled|Disabled]"),
        "{table}"
    );

    // Refused before anything is sent, naming the attribute as metal3 does.
    for (setting, why) in [
        (
            "NumCores=99",
            "Setting NumCores is invalid, integer 99 is above maximum value 64",
        ),
        (
            "SerialNumber=X",
            "Setting SerialNumber is invalid, it is ReadOnly",
        ),
        ("ProcTurboMode=On", "unknown enumeration value - On"),
        (
            "Warp=9",
            "Setting Warp is invalid, it is not in the BMC's attribute registry",
        ),
        ("NumCores", "is not NAME=VALUE"),
    ] {
        let out = cli.run(&address, &["bios", "set", setting]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{setting} accepted");
        assert!(stderr.contains(why), "{setting}: {stderr}");
    }
    assert!(
        !emu.state(0)
            .actions
            .iter()
            .any(|a| a.starts_with("PatchBios")),
        "nothing reached the BMC: {:?}",
        emu.state(0).actions
    );

    // Staged, typed as the registry says, pending until a boot.
    cli.ok(
        &address,
        &["bios", "set", "ProcTurboMode=Disabled", "NumCores=16"],
    );
    assert!(
        emu.state(0)
            .actions
            .iter()
            .any(|a| a == "PatchBios:NumCores,ProcTurboMode")
    );
    let bios = show();
    assert_eq!(bios["pending"]["NumCores"], 16);
    assert_eq!(bios["attributes"]["ProcTurboMode"], "Enabled");
    cli.ok(&address, &["power", "on", "--wait"]);
    let bios = show();
    assert_eq!(bios["attributes"]["ProcTurboMode"], "Disabled");
    assert_eq!(bios["attributes"]["NumCores"], 16);
    assert_eq!(bios["pending"], serde_json::json!({}));
}

#[test]
fn bios_settings_are_refused_clearly_where_the_bmc_has_none() {
    // sushy-tools' fake driver links no Bios resource (its libvirt driver does).
    let sushy = Sushy::start(1, "admin:password");
    let cli = Cli::new("password");
    let address = sushy.address(SUSHY_SYSTEM_0);
    let out = cli.run(&address, &["bios", "set", "ProcTurboMode=Disabled"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("does not support BIOS settings (the system links no Bios resource)"),
        "{stderr}"
    );
    let ipmi = IpmiSim::start();
    let out = cli.run(&ipmi.address(), &["bios", "show"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("does not support BIOS settings"),
        "{stderr}"
    );
}

#[test]
fn bmc_cli_against_ipmi_sim() {
    let sim = IpmiSim::start();
    let cli = Cli::new("password");
    let address = sim.address();
    assert_eq!(cli.ok(&address, &["power", "status"]).trim(), "power: Off");
    cli.ok(&address, &["power", "on"]);
    assert_eq!(sim.chassis("power"), "1");
    cli.ok(&address, &["boot", "pxe"]);
    assert_eq!(sim.chassis("boot"), "pxe");
    cli.ok(&address, &["power", "off"]);
    assert_eq!(sim.chassis("power"), "0");
    // A Redfish-only feature is refused with a clear message.
    let out = cli.run(&address, &["media", "status"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not support virtual media over IPMI")
    );
}

/// Every subcommand the help lists says what it does (media eject and status did not), and the
/// job CLI's help lists every boot device its parser accepts.
#[test]
fn help_describes_every_subcommand() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let media = help(&["bmc", "media", "--help"]);
    for verb in ["insert", "eject", "status"] {
        let line = media
            .lines()
            .find(|l| l.trim_start().starts_with(verb))
            .unwrap_or_else(|| panic!("{verb} missing: {media}"));
        assert!(
            line.trim() != verb,
            "no help text for media {verb}: {media}"
        );
    }
    let job = help(&["job", "run", "--help"]);
    assert!(job.contains("boot=pxe|disk|cdrom|bios|safe[,efi]"), "{job}");
    let refused = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["job", "run", "--host", "h", "boot=usb"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("pxe, disk, cdrom, bios, safe"), "{err}");
}

#[test]
fn bad_input_is_named() {
    let cli = Cli::new("password");
    let out = cli.run("gopher://h", &["power", "status"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--address") && err.contains("\"gopher\""),
        "{err}"
    );
}

/// The password must not reach stdout, stderr (debug logs included), errors, or `ps`.
#[tokio::test(flavor = "multi_thread")]
async fn the_password_never_leaks() {
    let secret = "Sup3r-Secret-Pa55";
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
            password: secret.into(),
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let sushy = Sushy::start(1, &format!("admin:{secret}"));
    let sim = IpmiSim::start_with_password(secret);
    let right = Cli::new(secret);
    let wrong = Cli::new(&format!("{secret}-wrong"));
    let redfish = emu.system_url(0).replace("http://", "redfish+http://");
    let mut outputs = vec![
        right.run(&redfish, &["power", "on"]),
        right.run(&redfish, &["--session", "inventory"]),
        wrong.run(&redfish, &["power", "status"]),
        wrong.run(&redfish, &["--session", "power", "status"]),
        right.run(&sushy.address(SUSHY_SYSTEM_0), &["-o", "json", "inventory"]),
        wrong.run(&sushy.address(SUSHY_SYSTEM_0), &["power", "on"]),
        right.run(&sim.address(), &["power", "on"]),
        wrong.run(&sim.address(), &["power", "status"]),
    ];
    // Faults produce errors too; none may carry the password.
    for fault in [
        ferrometal_emulator::Fault::Http500,
        ferrometal_emulator::Fault::ConnectionReset,
    ] {
        emu.set_fault(0, Some(fault));
        outputs.push(right.run(&redfish, &["power", "status"]));
    }
    emu.set_fault(0, None);
    let mut failures = 0;
    for out in &outputs {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains(secret), "password leaked: {text}");
        failures += usize::from(!out.status.success());
    }
    assert_eq!(failures, 6, "wrong passwords and faults must fail");

    // `ps` view: while ipmitool waits on a BMC that never answers, scan every command line.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let address = format!("ipmi://127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args([
            "bmc",
            "--address",
            &address,
            "--username",
            "admin",
            "--password-file",
        ])
        .arg(right.dir.path().join("password"))
        .args(["--timeout", "4", "power", "status"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut saw_ipmitool = false;
    for _ in 0..40 {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                assert!(
                    !cmdline.contains(secret),
                    "password in a command line: {cmdline}"
                );
                saw_ipmitool |=
                    cmdline.starts_with("ipmitool") && cmdline.contains(&format!("-p {port} "));
            }
        }
        if saw_ipmitool {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(saw_ipmitool, "ipmitool was never seen running");
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains(secret));
}
