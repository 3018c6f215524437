//! A lab of virtual servers for one test: QEMU VMs behind sushy-tools' libvirt driver, started by
//! `scripts/vmlab.sh` with fresh names and a free port, taken down on drop and, when the test
//! process dies without clean-up, by the script's owner-watch. The guest images come from
//! `scripts/guest-images.sh` (built once, cached). What a VM prints on its serial console is the
//! truth a test checks.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

use crate::peers::{TempDir, repo_root};

/// How the lab's VMs boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Firmware {
    Uefi,
    Legacy,
}

#[derive(Debug, Deserialize)]
pub struct Summary {
    pub prefix: String,
    pub sushy: SushySummary,
    pub manifests: PathBuf,
    pub vms: Vec<Vm>,
    /// With [`Lab::up_provisioning`]: the VMs' first NICs' network.
    #[serde(default)]
    pub provisioning: Option<Provisioning>,
}

/// A lab's provisioning network: a bridge on the host with DHCP for the VMs' first NICs.
#[derive(Debug, Deserialize, Clone)]
pub struct Provisioning {
    pub bridge: String,
    /// The host's address on it: services bound here reach the VMs and are reached by them.
    pub address: String,
    pub cidr: String,
    /// dnsmasq's lease file (`EXPIRY MAC IP …` lines).
    pub leases: PathBuf,
}

#[derive(Debug, Deserialize)]
pub struct SushySummary {
    pub url: String,
    pub port: u16,
    pub username: String,
    pub password_file: PathBuf,
}

/// One VM as the lab made it.
#[derive(Debug, Deserialize, Clone)]
pub struct Vm {
    pub name: String,
    pub uuid: String,
    pub macs: Vec<String>,
    pub boot_mac: String,
    pub console_log: PathBuf,
    /// `UEFI` or `legacy`, as the BareMetalHost's `bootMode`.
    pub boot_mode: String,
    pub bmc_address: String,
    pub redfish_system: String,
    /// A Secret and a BareMetalHost for this VM (`online: false`).
    pub manifest: PathBuf,
    /// With [`Lab::up_with_switch`]: the NIC fed by UDP, as a switch port.
    #[serde(default)]
    pub switch_port: Option<SwitchPort>,
}

/// A VM's last NIC, whose wire is a UDP socket: a datagram sent to `port` on 127.0.0.1 arrives
/// on the NIC as an Ethernet frame.
#[derive(Debug, Deserialize, Clone)]
pub struct SwitchPort {
    pub port: u16,
    pub mac: String,
}

pub struct Lab {
    pub state: TempDir,
    pub summary: Summary,
}

fn vmlab(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/vmlab.sh"))
        .args(args)
        // The lab goes with this test process, however it ends.
        .env("FERROMETAL_PEER_OWNER", std::process::id().to_string())
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/vmlab.sh")
}

impl Lab {
    /// `n` VMs (1 GiB RAM, 1 CPU, one 2 GiB disk, one NIC), powered off, in namespace `ns`.
    /// A lab that cannot start fails the test.
    pub fn up(n: usize, firmware: Firmware, ns: &str) -> Lab {
        Lab::up_with_disk(n, firmware, ns, "2G")
    }

    /// As `up`, with disks of `disk` (`5G`: the deploy agent, like Ironic's, chooses a root
    /// disk of at least 4 GiB when no hints are given). Disks are sparse qcow2 volumes.
    pub fn up_with_disk(n: usize, firmware: Firmware, ns: &str, disk: &str) -> Lab {
        Lab::make(n, firmware, ns, &["--disk", disk, "--ram", "1024"])
    }

    /// As `up_with_disk`, with `disks` disks of `disk` each (vda, vdb, ...).
    pub fn up_with_disks(n: usize, firmware: Firmware, ns: &str, disk: &str, disks: usize) -> Lab {
        let disks = disks.to_string();
        Lab::make(
            n,
            firmware,
            ns,
            &["--disk", disk, "--disks", &disks, "--ram", "1024"],
        )
    }

    /// VMs whose first NIC is on a provisioning network of the lab's own
    /// ([`Summary::provisioning`]), with `ram_mib` of memory (an agent ramdisk with a Python
    /// userland needs 2048) and `disks` disks of `disk` each.
    pub fn up_provisioning(
        n: usize,
        firmware: Firmware,
        ns: &str,
        disk: &str,
        disks: usize,
        ram_mib: u32,
    ) -> Lab {
        let disks = disks.to_string();
        let ram = ram_mib.to_string();
        Lab::make(
            n,
            firmware,
            ns,
            &[
                "--disk",
                disk,
                "--disks",
                &disks,
                "--ram",
                &ram,
                "--prov-network",
            ],
        )
    }

    /// The provisioning network's host address (panics on a lab without one).
    pub fn provisioning_address(&self) -> &str {
        &self
            .summary
            .provisioning
            .as_ref()
            .expect("a lab with --prov-network")
            .address
    }

    /// As `up_with_disk`, each VM with a second NIC cabled to a "switch port" the test feeds
    /// frames into ([`Lab::send_frame`]).
    pub fn up_with_switch(n: usize, firmware: Firmware, ns: &str, disk: &str) -> Lab {
        Lab::make(
            n,
            firmware,
            ns,
            &["--disk", disk, "--ram", "1024", "--switch-port"],
        )
    }

    fn make(n: usize, firmware: Firmware, ns: &str, shape: &[&str]) -> Lab {
        let state = TempDir::new();
        let mode = match firmware {
            Firmware::Uefi => "--uefi",
            Firmware::Legacy => "--legacy",
        };
        let count = n.to_string();
        let mut args = vec![
            "up",
            &count,
            mode,
            "--nics",
            "1",
            "--namespace",
            ns,
            "--state",
            state.path_str(),
        ];
        args.extend_from_slice(shape);
        let out = vmlab(&args);
        assert!(
            out.status.success(),
            "scripts/vmlab.sh {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = std::fs::read_to_string(state.path().join("lab.json")).unwrap();
        let summary: Summary = serde_json::from_str(&summary).unwrap();
        assert_eq!(summary.vms.len(), n);
        Lab { state, summary }
    }

    pub fn vm(&self, i: usize) -> &Vm {
        &self.summary.vms[i]
    }

    /// Every VM's Secret and BareMetalHost, as one YAML stream.
    pub fn manifests(&self) -> String {
        std::fs::read_to_string(&self.summary.manifests).unwrap()
    }

    pub fn password(&self) -> String {
        std::fs::read_to_string(&self.summary.sushy.password_file)
            .unwrap()
            .trim()
            .to_string()
    }

    /// The VM's serial console so far (CR stripped).
    pub fn console(&self, vm: &Vm) -> String {
        // Firmware and boot loaders write bytes that are not UTF-8 (OVMF's screen control).
        String::from_utf8_lossy(&std::fs::read(&vm.console_log).unwrap_or_default())
            .replace('\r', "")
    }

    /// Bytes the console holds now: pass to [`Lab::wait_console`] to wait for a later line.
    pub fn console_len(&self, vm: &Vm) -> u64 {
        std::fs::metadata(&vm.console_log).map_or(0, |m| m.len())
    }

    /// Waits (up to `timeout`) for a console line holding `text` written past the first `after`
    /// bytes, and returns it; fails the test with the console's tail otherwise.
    pub fn wait_console(&self, vm: &Vm, text: &str, after: u64, timeout: Duration) -> String {
        let out = vmlab(&[
            "wait",
            "--state",
            self.state.path_str(),
            "--timeout",
            &timeout.as_secs().to_string(),
            "--after",
            &after.to_string(),
            &vm.name,
            text,
        ]);
        if !out.status.success() {
            let console = self.console(vm);
            let tail: String = console
                .chars()
                .rev()
                .take(3000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            panic!(
                "{}: no console line with {text:?} within {timeout:?}: {}\n--- console tail ---\n{tail}",
                vm.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The system as sushy-tools reports it (its view of libvirt), bypassing ferrometal.
    pub fn system(&self, vm: &Vm) -> serde_json::Value {
        self.redfish_get(&vm.redfish_system)
    }

    /// The VM's virtual CD as sushy-tools reports it.
    pub fn virtual_cd(&self, vm: &Vm) -> serde_json::Value {
        self.redfish_get(&format!("{}/VirtualMedia/Cd", vm.redfish_system))
    }

    fn redfish_get(&self, url: &str) -> serde_json::Value {
        let user = format!("{}:{}", self.summary.sushy.username, self.password());
        let out = Command::new("curl")
            .args(["-sf", "-u", &user, url])
            .output()
            .expect("curl");
        assert!(out.status.success(), "curl {url}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// libvirt's own view of the domain (`running`, `shut off`, ...).
    pub fn domain_state(&self, vm: &Vm) -> String {
        let out = Command::new("virsh")
            .args(["-q", "-c", "qemu:///system", "domstate", &vm.name])
            .output()
            .expect("virsh");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The PCI address (`0000:01:00.0`) libvirt gave a device of the VM: the interface with
    /// MAC `mac`, or the disk with target `vda`.
    pub fn pci_address(&self, vm: &Vm, device: &str) -> String {
        let out = Command::new("virsh")
            .args(["-c", "qemu:///system", "dumpxml", &vm.name])
            .output()
            .expect("virsh");
        let xml = String::from_utf8_lossy(&out.stdout);
        let attr = |block: &str, name: &str| {
            let at = block.find(&format!("{name}='"))? + name.len() + 2;
            let end = block[at..].find('\'')?;
            Some(block[at..at + end].trim_start_matches("0x").to_string())
        };
        let blocks = |open: &'static str, close: &'static str| {
            xml.split(open)
                .skip(1)
                .map(move |b| b.split(close).next().unwrap_or(b))
        };
        for block in blocks("<interface ", "</interface>").chain(blocks("<disk ", "</disk>")) {
            let named = block.contains(&format!("address='{device}'"))
                || block.contains(&format!("dev='{device}'"));
            let Some(pci) = block.find("<address type='pci'").map(|i| &block[i..]) else {
                continue;
            };
            if named {
                let (d, b, s, f) = (
                    attr(pci, "domain").unwrap(),
                    attr(pci, "bus").unwrap(),
                    attr(pci, "slot").unwrap(),
                    attr(pci, "function").unwrap(),
                );
                let n = |h: &str| u32::from_str_radix(h, 16).unwrap();
                return format!("{:04x}:{:02x}:{:02x}.{:x}", n(&d), n(&b), n(&s), n(&f));
            }
        }
        panic!("{}: no PCI device {device} in\n{xml}", vm.name)
    }

    /// Sends one Ethernet frame to the VM's switch port.
    pub fn send_frame(&self, vm: &Vm, frame: &[u8]) {
        let port = vm
            .switch_port
            .as_ref()
            .expect("a lab with switch ports")
            .port;
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(frame, ("127.0.0.1", port)).unwrap();
    }

    /// Takes disk `target` (`vda`) out of the VM's persistent definition, as a failed disk
    /// pulled from a server: the next start runs without it (its volume stays the lab's).
    pub fn detach_disk(&self, vm: &Vm, target: &str) {
        let out = Command::new("virsh")
            .args([
                "-q",
                "-c",
                "qemu:///system",
                "detach-disk",
                &vm.name,
                target,
                "--config",
            ])
            .output()
            .expect("virsh");
        assert!(
            out.status.success(),
            "virsh detach-disk {} {target}: {}",
            vm.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The file behind the VM's first disk (a qcow2 volume), as libvirt names it.
    pub fn disk_path(&self, vm: &Vm) -> PathBuf {
        self.disk_path_at(vm, 0)
    }

    /// The file behind the VM's disk number `n` (0: vda, 1: vdb, ...).
    pub fn disk_path_at(&self, vm: &Vm, n: usize) -> PathBuf {
        let out = Command::new("virsh")
            .args([
                "-q",
                "-c",
                "qemu:///system",
                "domblklist",
                "--details",
                &vm.name,
            ])
            .output()
            .expect("virsh");
        let text = String::from_utf8_lossy(&out.stdout);
        let source = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() == 4 && f[1] == "disk")
            .nth(n)
            .map(|f| f[3].to_string())
            .unwrap_or_else(|| panic!("no disk {n} in virsh domblklist {}: {text}", vm.name));
        if source.starts_with('/') {
            return PathBuf::from(source);
        }
        // A volume of the lab's storage pool (scripts/vmlab.sh: `default`).
        let out = Command::new("virsh")
            .args([
                "-q",
                "-c",
                "qemu:///system",
                "vol-path",
                "--pool",
                "default",
                &source,
            ])
            .output()
            .expect("virsh");
        assert!(out.status.success(), "virsh vol-path {source}");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }

    /// `len` bytes of the VM's first disk at `offset` (both multiples of 512), read by
    /// `qemu-img` as the guest sees them, shared with a running VM.
    pub fn read_disk(&self, vm: &Vm, offset: u64, len: u64) -> Vec<u8> {
        self.read_disk_at(vm, 0, offset, len)
    }

    /// As [`Lab::read_disk`], of the VM's disk number `n`.
    pub fn read_disk_at(&self, vm: &Vm, n: usize, offset: u64, len: u64) -> Vec<u8> {
        assert!(offset.is_multiple_of(512) && len.is_multiple_of(512));
        let dir = TempDir::new();
        let out = dir.path().join("part.raw");
        let o = Command::new("qemu-img")
            .args(["dd", "-U", "-O", "raw", "bs=512"])
            .arg(format!("skip={}", offset / 512))
            // qemu-img's count includes the skipped blocks.
            .arg(format!("count={}", (offset + len) / 512))
            .arg(format!("if={}", self.disk_path_at(vm, n).display()))
            .arg(format!("of={}", out.display()))
            .output()
            .expect("qemu-img");
        assert!(
            o.status.success(),
            "qemu-img dd: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(bytes.len() as u64, len, "read past the disk's end?");
        bytes
    }

    /// The disk's size as the guest sees it.
    pub fn disk_size(&self, vm: &Vm) -> u64 {
        let o = Command::new("qemu-img")
            .args(["info", "-U", "--output=json"])
            .arg(self.disk_path(vm))
            .output()
            .expect("qemu-img");
        let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        info["virtual-size"].as_u64().unwrap()
    }

    /// Requests sushy-tools received that change something, in order (its log).
    pub fn changes(&self) -> Vec<String> {
        let log = self.state.path().join("sushy/sushy.log");
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"POST ") || l.contains("\"PATCH "))
            .map(String::from)
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let out = vmlab(&["down", "--state", self.state.path_str()]);
        if !out.status.success() {
            eprintln!(
                "scripts/vmlab.sh down failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The guest images, built once per test process (cached across runs by the script).
/// An LLDP frame as a switch sends it: chassis (a MAC), `port`, TTL, `system` name, the
/// untagged `pvid` and the named `vlans` (IEEE 802.1 TLVs), end.
pub fn lldp_frame(system: &str, port: &str, pvid: u16, vlans: &[(u16, &str)]) -> Vec<u8> {
    let tlv = |kind: u16, value: &[u8]| {
        let mut t = ((kind << 9) | value.len() as u16).to_be_bytes().to_vec();
        t.extend_from_slice(value);
        t
    };
    let chassis = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];
    let mut f = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
    f.extend_from_slice(&chassis);
    f.extend_from_slice(&[0x88, 0xcc]);
    f.extend(tlv(1, &[&[4u8][..], &chassis].concat()));
    f.extend(tlv(2, &[&[5u8][..], port.as_bytes()].concat()));
    f.extend(tlv(3, &[0, 120]));
    f.extend(tlv(5, system.as_bytes()));
    f.extend(tlv(
        127,
        &[&[0x00, 0x80, 0xc2, 1][..], &pvid.to_be_bytes()].concat(),
    ));
    for (id, name) in vlans {
        let head = [
            &[0x00, 0x80, 0xc2, 3][..],
            &id.to_be_bytes(),
            &[name.len() as u8],
        ]
        .concat();
        f.extend(tlv(127, &[&head[..], name.as_bytes()].concat()));
    }
    f.extend(tlv(0, &[]));
    f
}

pub struct GuestImages {
    pub live_iso: PathBuf,
    pub disk_raw: PathBuf,
    pub disk_qcow2: PathBuf,
}

/// Runs `scripts/NAME` (which builds something and caches it) and returns what it printed as
/// `key=path` lines, to be looked up with [`Printed::get`].
struct Printed {
    script: &'static str,
    text: String,
}

impl Printed {
    fn run(script: &'static str, args: &[&str]) -> Printed {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts").join(script))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
        assert!(
            out.status.success(),
            "scripts/{script} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Printed {
            script,
            text: String::from_utf8_lossy(&out.stdout).into_owned(),
        }
    }

    fn get(&self, key: &str) -> PathBuf {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("{} printed no {key}: {}", self.script, self.text))
    }
}

pub fn guest_images() -> &'static GuestImages {
    static IMAGES: OnceLock<GuestImages> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let printed = Printed::run("guest-images.sh", &[]);
        let get = |key: &str| printed.get(key);
        GuestImages {
            live_iso: get("live_iso"),
            disk_raw: get("disk_raw"),
            disk_qcow2: get("disk_qcow2"),
        }
    })
}

/// Links `file` into `dir` under `name`, for a [`crate::peers::FileServer`] to serve.
pub fn publish(dir: &Path, name: &str, file: &Path) {
    let link = dir.join(name);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(file, link).unwrap();
}

/// Ironic's agent ramdisk (IPA from PyPI on Debian, `scripts/ipa-ramdisk.sh`, cached).
pub struct IpaRamdisk {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub iso: PathBuf,
    /// An EFI system partition with GRUB, for the ISOs Ironic builds for UEFI machines.
    pub esp: PathBuf,
}

pub fn ipa_ramdisk() -> &'static IpaRamdisk {
    static RAMDISK: OnceLock<IpaRamdisk> = OnceLock::new();
    RAMDISK.get_or_init(|| {
        let printed = Printed::run("ipa-ramdisk.sh", &[]);
        let get = |key: &str| printed.get(key);
        IpaRamdisk {
            kernel: get("kernel"),
            initrd: get("initrd"),
            iso: get("iso"),
            esp: get("esp"),
        }
    })
}

/// The deploy agent's ramdisk (`scripts/agent-ramdisk.sh`, cached), with the agent built in
/// this target directory's debug profile: the directory holding `agent.iso`.
pub fn agent_ramdisk() -> &'static PathBuf {
    static RAMDISK: OnceLock<PathBuf> = OnceLock::new();
    RAMDISK.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let built = Command::new(&cargo)
            .args(["build", "-q", "-p", "ferrometal-agent"])
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .status()
            .expect("run cargo build -p ferrometal-agent");
        assert!(built.success(), "cargo build -p ferrometal-agent failed");
        // Test binaries live in target/debug/deps; the agent in target/debug.
        let exe = std::env::current_exe().unwrap();
        let agent = exe
            .ancestors()
            .map(|d| d.join("ferrometal-agent"))
            .find(|p| p.is_file())
            .expect("the ferrometal-agent binary next to the test binaries");
        let agent = agent.to_string_lossy();
        let iso = Printed::run("agent-ramdisk.sh", &["--agent", &agent]).get("iso");
        iso.parent().unwrap().to_path_buf()
    })
}
