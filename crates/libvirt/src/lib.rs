//! Virtual machines on a libvirt host for HostClaims of a libvirt HostClass: one domain per
//! claim, its disk and config-drive volumes in a storage pool, its power.
//!
//! Everything here speaks libvirt's API (through the `virt` bindings), never `virsh`, so the
//! libvirt host may be remote (`qemu+ssh://`, `qemu+tls://`). The calls block: callers run
//! them on a blocking thread. Names are derived from the claim ([`names`]), so a claim never
//! gets two domains, and a step interrupted half-way is simply done again.

mod xml;

use std::io::Read;

use virt::connect::Connect;
use virt::domain::{Domain, DomainState};
use virt::enumutil::Enum;
use virt::error::ErrorNumber;
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;
use virt::stream::Stream;

pub use xml::{DomainSpec, domain_xml};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The libvirt host could not be reached (its daemon down, a network between).
    #[error("connecting to libvirt: {0}")]
    Unreachable(String),
    #[error("{what}: {message}")]
    Call { what: String, message: String },
    #[error("{0}")]
    Io(String),
}

fn call(what: impl Into<String>) -> impl FnOnce(virt::error::Error) -> Error {
    let what = what.into();
    move |e| Error::Call {
        what,
        message: e.message().to_string(),
    }
}

/// The names one claim's VM lives under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub domain: String,
    pub disk: String,
    pub config: String,
}

/// `prefix` + the claim's uid: the domain; its volumes add `-disk` and `-config`.
pub fn names(prefix: &str, claim_uid: &str) -> Names {
    let domain = format!("{prefix}{claim_uid}");
    Names {
        disk: format!("{domain}-disk"),
        config: format!("{domain}-config"),
        domain,
    }
}

/// What libvirt says of a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    On,
    Off,
}

/// One connection to a libvirt host.
pub struct Hypervisor {
    conn: Connect,
}

impl Hypervisor {
    pub fn connect(uri: &str) -> Result<Hypervisor, Error> {
        // libvirt prints every error to stderr by default; ours are returned and logged.
        virt::error::clear_error_callback();
        Connect::open(Some(uri))
            .map(|conn| Hypervisor { conn })
            .map_err(|e| Error::Unreachable(e.message().to_string()))
    }

    fn domain(&self, name: &str) -> Result<Option<Domain>, Error> {
        match self.conn.lookup_domain_by_name(name) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.code() == Enum::Known(ErrorNumber::NoDomain) => Ok(None),
            Err(e) => Err(call(format!("looking up domain {name}"))(e)),
        }
    }

    /// The domain's power, or `None` when there is no such domain.
    pub fn power(&self, name: &str) -> Result<Option<Power>, Error> {
        let Some(d) = self.domain(name)? else {
            return Ok(None);
        };
        let (state, _) = d
            .state()
            .map_err(call(format!("reading the state of {name}")))?;
        Ok(Some(match state {
            Enum::Known(DomainState::Running | DomainState::Blocked | DomainState::Paused) => {
                Power::On
            }
            _ => Power::Off,
        }))
    }

    /// The MAC addresses of the domain's NICs (libvirt chooses them when it defines it).
    pub fn macs(&self, name: &str) -> Result<Vec<String>, Error> {
        let Some(d) = self.domain(name)? else {
            return Ok(Vec::new());
        };
        let xml = d
            .xml_desc(0)
            .map_err(call(format!("reading the definition of {name}")))?;
        Ok(xml::mac_addresses(&xml))
    }

    /// Defines the domain (a domain of that name already defined is left as it is).
    pub fn define(&self, spec: &DomainSpec) -> Result<(), Error> {
        if self.domain(&spec.name)?.is_some() {
            return Ok(());
        }
        self.conn
            .define_domain_xml(&domain_xml(spec))
            .map(drop)
            .map_err(call(format!("defining domain {}", spec.name)))
    }

    pub fn power_on(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if !d.is_active().unwrap_or(false) => {
                d.create().map_err(call(format!("starting {name}")))
            }
            _ => Ok(()),
        }
    }

    /// Off at once, as a BMC's ForceOff: the claim's owner asked for it.
    pub fn power_off(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if d.is_active().unwrap_or(false) => {
                d.destroy().map_err(call(format!("stopping {name}")))
            }
            _ => Ok(()),
        }
    }

    /// A hard reset, as a BMC's ForceRestart.
    pub fn reset(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if d.is_active().unwrap_or(false) => {
                d.reset().map_err(call(format!("resetting {name}")))
            }
            Some(d) => d.create().map_err(call(format!("starting {name}"))),
            None => Ok(()),
        }
    }

    /// An ACPI restart request: the guest restarts itself (as a BMC's GracefulRestart).
    pub fn reboot(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if d.is_active().unwrap_or(false) => {
                d.reboot(0).map_err(call(format!("rebooting {name}")))
            }
            _ => Ok(()),
        }
    }

    /// An ACPI power-button press: the guest shuts itself down (GracefulShutdown).
    pub fn shutdown(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if d.is_active().unwrap_or(false) => {
                d.shutdown().map_err(call(format!("shutting {name} down")))
            }
            _ => Ok(()),
        }
    }

    fn pool(&self, pool: &str) -> Result<StoragePool, Error> {
        self.conn
            .lookup_storage_pool_by_name(pool)
            .map_err(call(format!("looking up storage pool {pool}")))
    }

    /// Makes volume `name` in `pool` hold `content` (`format`: `raw` or `qcow2`), then grows
    /// it to `capacity` bytes when it is smaller. A volume of that name left by an interrupted
    /// attempt is replaced.
    pub fn upload_volume(
        &self,
        pool: &str,
        name: &str,
        format: &str,
        content: &std::path::Path,
        capacity: u64,
    ) -> Result<(), Error> {
        let p = self.pool(pool)?;
        // A volume added outside libvirt's view (or removed) would confuse the lookups below.
        let _ = p.refresh(0);
        if let Ok(old) = p.lookup_storage_vol_by_name(name) {
            old.delete(0)
                .map_err(call(format!("deleting the old volume {name}")))?;
        }
        let mut file = std::fs::File::open(content)
            .map_err(|e| Error::Io(format!("reading {}: {e}", content.display())))?;
        let length = file
            .metadata()
            .map_err(|e| Error::Io(format!("reading {}: {e}", content.display())))?
            .len();
        let vol_xml = xml::volume_xml(name, format, length);
        let vol = StorageVol::create_xml(&p, &vol_xml, 0)
            .map_err(call(format!("creating volume {name}")))?;
        let stream =
            Stream::new(&self.conn, 0).map_err(call(format!("opening a stream for {name}")))?;
        vol.upload(&stream, 0, length, 0)
            .map_err(call(format!("uploading to {name}")))?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match file.read(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    // libvirt wants a stream that will not finish aborted, not dropped.
                    let _ = stream.abort();
                    return Err(Error::Io(format!("reading {}: {e}", content.display())));
                }
            };
            if n == 0 {
                break;
            }
            let mut sent = 0;
            while sent < n {
                match stream.send(&buf[sent..n]) {
                    Ok(k) if k > 0 => sent += k as usize,
                    // A blocking stream sends something or fails; nothing sent is a failure,
                    // not a reason to spin.
                    Ok(_) => {
                        let _ = stream.abort();
                        return Err(Error::Io(format!(
                            "uploading to {name}: the stream took nothing"
                        )));
                    }
                    Err(e) => {
                        let _ = stream.abort();
                        return Err(call(format!("uploading to {name}"))(e));
                    }
                }
            }
        }
        stream
            .finish()
            .map_err(call(format!("finishing the upload to {name}")))?;
        // The pool learns the uploaded file's size (a qcow2's virtual size) on a refresh.
        let _ = p.refresh(0);
        let vol = p
            .lookup_storage_vol_by_name(name)
            .map_err(call(format!("looking up volume {name}")))?;
        let have = vol
            .info()
            .map_err(call(format!("reading volume {name}")))?
            .capacity;
        if capacity > have {
            vol.resize(capacity, 0)
                .map_err(call(format!("growing volume {name}")))?;
        }
        Ok(())
    }

    /// Destroys and undefines the domain (with its NVRAM) and deletes its volumes. Whatever is
    /// already gone is skipped, so a removal interrupted half-way is done again.
    pub fn remove(&self, names: &Names, pool: &str) -> Result<(), Error> {
        if let Some(d) = self.domain(&names.domain)? {
            if d.is_active().unwrap_or(false) {
                d.destroy()
                    .map_err(call(format!("stopping {}", names.domain)))?;
            }
            // With its NVRAM (UEFI); a domain that has none is undefined plainly.
            if let Err(e) = d.undefine_flags(virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM) {
                d.undefine().map_err(|plain| Error::Call {
                    what: format!("undefining {}", names.domain),
                    message: format!("{} (with its NVRAM: {})", plain.message(), e.message()),
                })?;
            }
        }
        let p = self.pool(pool)?;
        let _ = p.refresh(0);
        for vol in [&names.disk, &names.config] {
            match p.lookup_storage_vol_by_name(vol) {
                Ok(v) => v
                    .delete(0)
                    .map_err(call(format!("deleting volume {vol}")))?,
                Err(e) if e.code() == Enum::Known(ErrorNumber::NoStorageVolume) => {}
                Err(e) => return Err(call(format!("looking up volume {vol}"))(e)),
            }
        }
        Ok(())
    }

    /// Whether anything of the claim's VM is left (the domain or a volume).
    pub fn anything_left(&self, names: &Names, pool: &str) -> Result<bool, Error> {
        if self.domain(&names.domain)?.is_some() {
            return Ok(true);
        }
        let p = self.pool(pool)?;
        let _ = p.refresh(0);
        Ok([&names.disk, &names.config]
            .iter()
            .any(|v| p.lookup_storage_vol_by_name(v).is_ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claims_names_come_from_its_uid() {
        let n = names("fm-", "1234");
        assert_eq!(n.domain, "fm-1234");
        assert_eq!(n.disk, "fm-1234-disk");
        assert_eq!(n.config, "fm-1234-config");
    }
}
