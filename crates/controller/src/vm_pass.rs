//! One pass of bringing a HostClaim's VM (libvirt HostClass) in line, run off the claim
//! controller's workers: observe the domain, then create it (image downloaded and checked,
//! config drive written, volumes uploaded, domain defined), power it, reset it or remove it,
//! and observe again.
//!
//! Every step can be cut off (serve killed) and done again: the names come from the claim's
//! uid, a volume left half-written is replaced, and the domain is defined last, so a claim
//! whose domain exists has its disks.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use ferrometal_agent::checksum::{Algorithm, digest_from_file};
use ferrometal_api::host_class::url_allowed;
use ferrometal_libvirt::{DomainSpec, Hypervisor, Names, Power};
use tokio::io::AsyncWriteExt;

/// What the claim wants of its VM, with everything the job needs (no client, no cache).
#[derive(Clone, Debug)]
pub struct Want {
    pub uri: String,
    pub names: Names,
    pub pool: String,
    /// The domain as it is to be defined (its disk format is the image's).
    pub domain: DomainSpec,
    pub image: Option<ImageWant>,
    pub config_drive: Option<ConfigDrive>,
    pub disk_bytes: u64,
    pub power_on: bool,
    /// A one-shot action (metal3's reboot annotation, a `ferrometal.io/operation`) is due.
    pub action: Option<OneShot>,
    /// Take the VM down (image removed, or the claim deleted).
    pub remove: bool,
    /// Where downloads and the config drive are staged.
    pub work: PathBuf,
}

/// A one-shot action on the VM, as a BMC would do it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OneShot {
    /// ForceRestart, and metal3's reboot annotation.
    Reset,
    /// GracefulRestart: ACPI, the guest restarts itself.
    Reboot,
    /// GracefulShutdown: ACPI, the guest shuts itself down.
    Shutdown,
    /// ForceOff.
    Off,
    /// ForceOn.
    On,
    /// PowerCycle: off at once, then on.
    Cycle,
}

#[derive(Clone, Debug)]
pub struct ImageWant {
    pub url: String,
    pub checksum: Option<String>,
    pub checksum_type: String,
    /// The class's image URL prefixes: redirects are followed only to URLs they allow.
    pub allowed_prefixes: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct ConfigDrive {
    pub meta_data: serde_json::Value,
    pub user_data: Option<String>,
    pub network_data: Option<serde_json::Value>,
}

/// What a pass found.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The libvirt host did not answer.
    Unreachable,
    /// The domain's power after the pass (`None`: no domain); `acted` when the one-shot
    /// action was done; its NICs' MACs.
    Seen {
        power: Option<Power>,
        acted: bool,
        macs: Vec<String>,
    },
    /// A step failed: a message for the tenant (no infrastructure names), and the power seen.
    Failed {
        tenant: String,
        power: Option<Power>,
    },
}

/// Claims with a libvirt call that outlived its limit and still runs on its thread. No pass
/// for such a claim starts until that call ends, so an abandoned upload never races a later
/// pass (or the removal once the claim is deleted): at most one call per claim at any time.
/// Process-wide, as the threads are.
static LINGERING: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

fn lingering(claim: &str) -> bool {
    LINGERING.lock().unwrap().contains(claim)
}

/// Claims whose running pass has reached their libvirt host, so a claim retrying an
/// unreachable host is reported as being made only once the host answers.
static REACHED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// Whether the claim's running pass has reached its libvirt host.
pub fn reached(claim: &str) -> bool {
    REACHED.lock().unwrap().contains(claim)
}

/// Marks a claim's pass as having reached its host, until the pass ends.
struct Reached(String);

impl Reached {
    fn mark(claim: &str) -> Reached {
        REACHED.lock().unwrap().insert(claim.to_string());
        Reached(claim.to_string())
    }
}

impl Drop for Reached {
    fn drop(&mut self) {
        REACHED.lock().unwrap().remove(&self.0);
    }
}

/// Runs a blocking libvirt call on a blocking thread, bounded: a libvirt host that hangs
/// leaves the thread behind, never the claim (which is held back while it runs, see
/// [`LINGERING`]).
async fn libvirt<T: Send + 'static>(
    claim: &str,
    uri: &str,
    limit: Duration,
    f: impl FnOnce(&Hypervisor) -> Result<T, ferrometal_libvirt::Error> + Send + 'static,
) -> Result<T, ferrometal_libvirt::Error> {
    let uri = uri.to_string();
    let mut call = tokio::task::spawn_blocking(move || {
        let hv = Hypervisor::connect(&uri)?;
        f(&hv)
    });
    match tokio::time::timeout(limit, &mut call).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(ferrometal_libvirt::Error::Io(format!(
            "libvirt call ended: {e}"
        ))),
        Err(_) => {
            LINGERING.lock().unwrap().insert(claim.to_string());
            let claim = claim.to_string();
            tokio::spawn(async move {
                let _ = call.await;
                LINGERING.lock().unwrap().remove(&claim);
            });
            Err(ferrometal_libvirt::Error::Unreachable(format!(
                "no answer in {} s",
                limit.as_secs()
            )))
        }
    }
}

const CALL: Duration = Duration::from_secs(30);
/// A checksum file is a few lines; more is refused.
const CHECKSUM_FILE_MAX: usize = 1 << 20;
/// Uploading a disk image through libvirt's stream.
const UPLOAD: Duration = Duration::from_secs(1800);

/// `reached` is called once the pass has reached the libvirt host (the claim is woken, so a
/// retry of an unreachable host shows it got through).
pub async fn converge(
    want: Want,
    claim: String,
    reached: impl FnOnce() + Send + 'static,
) -> Outcome {
    if lingering(&claim) {
        tracing::warn!(claim, "an earlier libvirt call for this claim still runs");
        return Outcome::Unreachable;
    }
    let name = want.names.domain.clone();
    let seen = {
        let name = name.clone();
        libvirt(&claim, &want.uri, CALL, move |hv| hv.power(&name)).await
    };
    let seen = match seen {
        Ok(p) => p,
        Err(e) => return failed(&claim, "observing the virtual machine", e, None),
    };
    let _reached = Reached::mark(&claim);
    reached();
    if want.remove {
        // A staging directory a killed serve left behind goes with the VM.
        let _ = tokio::fs::remove_dir_all(&want.work).await;
        let (names, pool) = (want.names.clone(), want.pool.clone());
        return match libvirt(&claim, &want.uri, CALL, move |hv| {
            hv.remove(&names, &pool)?;
            hv.anything_left(&names, &pool)
        })
        .await
        {
            Ok(false) => Outcome::Seen {
                power: None,
                acted: false,
                macs: Vec::new(),
            },
            Ok(true) => Outcome::Failed {
                tenant: "the virtual machine could not be removed completely; retrying".into(),
                power: seen,
            },
            Err(e) => failed(&claim, "removing the virtual machine", e, seen),
        };
    }
    if seen.is_none() {
        let Some(image) = want.image.clone() else {
            return Outcome::Seen {
                power: None,
                acted: false,
                macs: Vec::new(),
            };
        };
        if let Err(o) = create(&want, &image, &claim).await {
            return o;
        }
    }
    let action = want.action;
    let acted = {
        let name = name.clone();
        let on = want.power_on;
        libvirt(&claim, &want.uri, CALL, move |hv| match action {
            Some(OneShot::Reset) => hv.reset(&name),
            Some(OneShot::Reboot) => hv.reboot(&name),
            Some(OneShot::Shutdown) => hv.shutdown(&name),
            Some(OneShot::Off) => hv.power_off(&name),
            Some(OneShot::On) => hv.power_on(&name),
            Some(OneShot::Cycle) => {
                hv.power_off(&name)?;
                hv.power_on(&name)
            }
            None if on => hv.power_on(&name),
            None => hv.power_off(&name),
        })
        .await
    };
    if let Err(e) = acted {
        return failed(&claim, "powering the virtual machine", e, seen);
    }
    let acted = action.is_some();
    // Observed apart from the action: an action that was done is reported done even when the
    // look after it fails, so it is never repeated.
    let observed = {
        let name = name.clone();
        libvirt(&claim, &want.uri, CALL, move |hv| {
            Ok((hv.power(&name)?, hv.macs(&name)?))
        })
        .await
    };
    match observed {
        Ok((power, macs)) => Outcome::Seen { power, acted, macs },
        Err(e) if acted => {
            tracing::warn!(claim, error = %e, "observing the virtual machine after an action failed");
            Outcome::Seen {
                power: seen,
                acted,
                macs: Vec::new(),
            }
        }
        Err(e) => failed(&claim, "observing the virtual machine", e, seen),
    }
}

/// The tenant reads only that a step failed; the log says why, for the infrastructure team.
fn failed(claim: &str, what: &str, e: ferrometal_libvirt::Error, power: Option<Power>) -> Outcome {
    tracing::warn!(claim, error = %e, "{what} failed");
    match e {
        ferrometal_libvirt::Error::Unreachable(_) => Outcome::Unreachable,
        _ => Outcome::Failed {
            tenant: format!("{what} failed; retrying (the controller's log says why)"),
            power,
        },
    }
}

/// VMs made at once by this process: each holds a download, a staged image and an upload, so
/// a burst of claims queues here rather than filling the disk and the network at once.
static CREATING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

async fn create(want: &Want, image: &ImageWant, claim: &str) -> Result<(), Outcome> {
    let fail = |tenant: String| Outcome::Failed {
        tenant,
        power: None,
    };
    let _turn = CREATING
        .acquire()
        .await
        .map_err(|_| fail("the controller is shutting down".into()))?;
    let _ = tokio::fs::remove_dir_all(&want.work).await;
    tokio::fs::create_dir_all(&want.work)
        .await
        .map_err(|e| fail(format!("staging the image failed: {e}")))?;
    let result = async {
        let disk = want.work.join("disk");
        download(image, &disk, want.disk_bytes)
            .await
            .map_err(fail)?;
        if want.domain.disk_format == "qcow2" {
            qcow2_alone(&disk).await.map_err(fail)?;
        }
        let config = match &want.config_drive {
            Some(cd) => {
                let bytes = ferrometal_provisioner::agent::media::config_drive(
                    &want.work,
                    &cd.meta_data,
                    cd.user_data.as_deref(),
                    cd.network_data.as_ref(),
                )
                .await
                .map_err(|e| {
                    tracing::warn!(claim, error = %e, "writing the config drive failed");
                    fail("writing the config drive failed; retrying".into())
                })?;
                let path = want.work.join("config-2.iso");
                tokio::fs::write(&path, bytes)
                    .await
                    .map_err(|e| fail(format!("staging the config drive failed: {e}")))?;
                Some(path)
            }
            None => None,
        };
        let (names, pool, domain, size) = (
            want.names.clone(),
            want.pool.clone(),
            want.domain.clone(),
            want.disk_bytes,
        );
        let format = domain.disk_format.clone();
        libvirt(claim, &want.uri, UPLOAD, move |hv| {
            hv.upload_volume(&pool, &names.disk, &format, &disk, size)?;
            if let Some(cfg) = &config {
                hv.upload_volume(&pool, &names.config, "raw", cfg, 0)?;
            }
            // Last: a defined domain means its volumes are complete.
            hv.define(&domain)
        })
        .await
        .map_err(|e| failed(claim, "creating the virtual machine", e, None))
    }
    .await;
    let _ = tokio::fs::remove_dir_all(&want.work).await;
    result
}

/// A tenant's qcow2 must stand alone: a backing file or an external data file in its header
/// would have QEMU open a path on the libvirt host (another VM's disk, a host file).
async fn qcow2_alone(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 104];
    let mut f = tokio::fs::File::open(path)
        .await
        .map_err(|e| format!("reading the image: {e}"))?;
    use tokio::io::AsyncReadExt;
    f.read_exact(&mut header)
        .await
        .map_err(|_| "the image is not a qcow2 file (too short)".to_string())?;
    qcow2_header_alone(&header)
}

fn qcow2_header_alone(h: &[u8; 104]) -> Result<(), String> {
    if &h[0..4] != b"QFI\xfb" {
        return Err("spec.image.format is qcow2 but the image is not a qcow2 file".into());
    }
    let be64 = |at: usize| u64::from_be_bytes(h[at..at + 8].try_into().unwrap_or([0; 8]));
    let version = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    if be64(8) != 0 {
        return Err(
            "the qcow2 image names a backing file; a claim's image must stand alone".into(),
        );
    }
    // Version 3's incompatible features, bit 2: an external data file.
    if version >= 3 && be64(72) & 0b100 != 0 {
        return Err(
            "the qcow2 image keeps its data in an external file; a claim's image must stand alone"
                .into(),
        );
    }
    Ok(())
}

/// An HTTP error with its causes (reqwest's own message leaves out why a redirect was refused
/// or a connection failed).
fn why(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// At most 10 redirects, each to a URL the class allows (a tenant's image server must not
/// bounce the controller onto its own network).
fn redirects(prefixes: Vec<String>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 10 {
            attempt.error("more than 10 redirects")
        } else if url_allowed(&prefixes, attempt.url().as_str()) {
            attempt.follow()
        } else {
            let to = attempt.url().to_string();
            attempt.error(format!(
                "a redirect to {to}, which the claim's HostClass does not allow"
            ))
        }
    })
}

/// Downloads the image to `to`, checking its checksum as it streams. Errors are for the
/// tenant: they name only the claim's own image URL.
async fn download(image: &ImageWant, to: &Path, max_bytes: u64) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        // A server that stops sending ends the pass (and so never holds up a deletion).
        .read_timeout(Duration::from_secs(60))
        .redirect(redirects(image.allowed_prefixes.clone()))
        .build()
        .map_err(|e| format!("downloading the image: {e}"))?;
    let expected = match image.checksum.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(c) if c.starts_with("http://") || c.starts_with("https://") => {
            let mut resp = client
                .get(c)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| format!("downloading the image's checksum file {c}: {}", why(&e)))?;
            let mut text = Vec::new();
            while let Some(chunk) = resp
                .chunk()
                .await
                .map_err(|e| format!("downloading the image's checksum file {c}: {}", why(&e)))?
            {
                text.extend_from_slice(&chunk);
                if text.len() > CHECKSUM_FILE_MAX {
                    return Err(format!(
                        "the image's checksum file {c} is larger than {CHECKSUM_FILE_MAX} bytes"
                    ));
                }
            }
            Some(digest_from_file(
                &String::from_utf8_lossy(&text),
                &image.url,
            )?)
        }
        Some(c) => Some(c.to_ascii_lowercase()),
    };
    let algorithm = match &expected {
        Some(d) => Some(Algorithm::parse(&image.checksum_type, d)?),
        None => None,
    };
    let mut resp = client
        .get(&image.url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("downloading the image {}: {}", image.url, why(&e)))?;
    let mut file = tokio::fs::File::create(to)
        .await
        .map_err(|e| format!("staging the image: {e}"))?;
    let mut hasher = algorithm.map(Algorithm::hasher);
    let mut bytes: u64 = 0;
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("downloading the image {}: {}", image.url, why(&e)))?
    {
        bytes += chunk.len() as u64;
        if bytes > max_bytes {
            return Err(format!(
                "the image {} is larger than the virtual machine's disk ({max_bytes} bytes)",
                image.url
            ));
        }
        if let Some(h) = hasher.as_mut() {
            h.update(&chunk);
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| format!("staging the image: {e}"))?;
    }
    file.flush()
        .await
        .map_err(|e| format!("staging the image: {e}"))?;
    if let (Some(h), Some(want)) = (hasher, expected) {
        let got = h.finish();
        if got != want {
            return Err(format!(
                "the image {} has checksum {got}, not {want} as spec.image.checksum says",
                image.url
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qcow2_with_a_backing_or_data_file_is_refused() {
        let mut h = [0u8; 104];
        h[0..4].copy_from_slice(b"QFI\xfb");
        h[7] = 3;
        assert!(qcow2_header_alone(&h).is_ok());
        let mut backed = h;
        backed[15] = 0x68;
        assert!(
            qcow2_header_alone(&backed)
                .unwrap_err()
                .contains("backing file")
        );
        let mut external = h;
        external[79] = 0b100;
        assert!(
            qcow2_header_alone(&external)
                .unwrap_err()
                .contains("external")
        );
        let mut raw = h;
        raw[0] = 0;
        assert!(
            qcow2_header_alone(&raw)
                .unwrap_err()
                .contains("not a qcow2")
        );
    }

    /// A call that outlives its limit is reported as no answer, and its claim is held back
    /// (no pass for it starts another call) until the call has ended on its thread.
    #[tokio::test]
    async fn a_call_past_its_limit_holds_its_claim_back_until_it_ends() {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        // libvirt's own in-process test driver: no daemon needed.
        let r = libvirt(
            "ns/c/uid-1",
            "test:///default",
            Duration::from_millis(50),
            move |_| {
                let _ = wait.recv();
                Ok(())
            },
        )
        .await;
        assert!(
            matches!(r, Err(ferrometal_libvirt::Error::Unreachable(_))),
            "{r:?}"
        );
        assert!(lingering("ns/c/uid-1"));
        assert!(!lingering("ns/c/uid-2"));
        release.send(()).unwrap();
        for _ in 0..1000 {
            if !lingering("ns/c/uid-1") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the claim is still held back after its call ended");
    }

    /// An image server allowed by the class that redirects elsewhere: not followed.
    #[tokio::test]
    async fn a_redirect_out_of_the_class_prefixes_is_not_followed() {
        use std::io::{Read, Write};
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = server.accept() {
                let mut request = [0u8; 1024];
                let _ = conn.read(&mut request);
                let _ = conn.write_all(
                    b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data\r\nContent-Length: 0\r\n\r\n",
                );
            }
        });
        let work = tempfile::tempdir().unwrap();
        let image = ImageWant {
            url: format!("http://127.0.0.1:{port}/os.raw"),
            checksum: None,
            checksum_type: String::new(),
            allowed_prefixes: vec![format!("http://127.0.0.1:{port}/")],
        };
        let e = download(&image, &work.path().join("disk"), 1 << 20)
            .await
            .unwrap_err();
        assert!(
            e.contains("169.254.169.254") && e.contains("does not allow"),
            "{e}"
        );
    }
}
