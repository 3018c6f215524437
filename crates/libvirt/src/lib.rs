//! Virtual machines on a libvirt host for HostClaims of a libvirt HostClass: one domain per
//! claim, its disk and config-drive volumes in a storage pool, its power.
//!
//! Everything here speaks libvirt's C API (loaded on first use, see [`sys`]), never `virsh`, so the
//! libvirt host may be remote (`qemu+ssh://`, `qemu+tls://`). The calls block: callers run
//! them on a blocking thread. Names are derived from the claim ([`names`]), so a claim never
//! gets two domains, and a step interrupted half-way is simply done again.

#[allow(
    unsafe_code,
    reason = "libvirt is a C library loaded at run time; each call passes live handles and \
              NUL-terminated strings, as its headers declare"
)]
mod sys;
mod xml;

use std::ffi::{CString, c_int};
use std::io::Read;

use sys::{Api, Handle, Ptr};

pub use xml::{DomainSpec, domain_xml};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The libvirt host could not be reached (its daemon down, a network between).
    #[error("connecting to libvirt: {0}")]
    Unreachable(String),
    /// libvirt's client library is not installed here (or too old).
    #[error("{0}")]
    Library(String),
    #[error("{what}: {message}")]
    Call { what: String, message: String },
    #[error("{0}")]
    Io(String),
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

/// A string for libvirt: names and XML never hold a NUL, but a user's value is refused
/// rather than cut short.
fn c(what: &str, s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Call {
        what: what.to_string(),
        message: format!("{s:?} contains a NUL byte"),
    })
}

/// One connection to a libvirt host.
pub struct Hypervisor {
    api: &'static Api,
    conn: Handle,
}

#[allow(
    unsafe_code,
    reason = "calls into libvirt's C API (see `sys`) with handles this type owns"
)]
impl Hypervisor {
    pub fn connect(uri: &str) -> Result<Hypervisor, Error> {
        let api = sys::api().map_err(Error::Library)?;
        let curi = c("connecting to libvirt", uri)?;
        // SAFETY: a NUL-terminated URI; the connection is closed when the handle drops.
        let conn = unsafe { (api.virConnectOpen)(curi.as_ptr()) };
        match Handle::new(conn, api.virConnectClose) {
            Some(conn) => Ok(Hypervisor { api, conn }),
            None => Err(Error::Unreachable(sys::last_error(api).1)),
        }
    }

    /// The calling thread's last libvirt error, as the failure of `what`.
    fn failed(&self, what: String) -> Error {
        Error::Call {
            what,
            message: sys::last_error(self.api).1,
        }
    }

    /// A call returning libvirt's 0 / -1.
    fn check(&self, rc: c_int, what: impl FnOnce() -> String) -> Result<(), Error> {
        if rc < 0 {
            Err(self.failed(what()))
        } else {
            Ok(())
        }
    }

    /// Looks an object up by name: `None` when libvirt says it does not exist (`missing`).
    fn lookup(
        &self,
        find: unsafe extern "C" fn(Ptr, *const std::ffi::c_char) -> Ptr,
        free: unsafe extern "C" fn(Ptr) -> c_int,
        parent: Ptr,
        name: &str,
        missing: c_int,
        what: impl Fn() -> String,
    ) -> Result<Option<Handle>, Error> {
        let cname = c(&what(), name)?;
        // SAFETY: `parent` is live for the call and the name NUL-terminated.
        let ptr = unsafe { find(parent, cname.as_ptr()) };
        if let Some(h) = Handle::new(ptr, free) {
            return Ok(Some(h));
        }
        let (code, message) = sys::last_error(self.api);
        if code == missing {
            Ok(None)
        } else {
            Err(Error::Call {
                what: what(),
                message,
            })
        }
    }

    fn domain(&self, name: &str) -> Result<Option<Handle>, Error> {
        self.lookup(
            self.api.virDomainLookupByName,
            self.api.virDomainFree,
            self.conn.ptr,
            name,
            sys::ERR_NO_DOMAIN,
            || format!("looking up domain {name}"),
        )
    }

    fn volume(&self, pool: &Handle, name: &str) -> Result<Option<Handle>, Error> {
        self.lookup(
            self.api.virStorageVolLookupByName,
            self.api.virStorageVolFree,
            pool.ptr,
            name,
            sys::ERR_NO_STORAGE_VOL,
            || format!("looking up volume {name}"),
        )
    }

    fn is_active(&self, d: &Handle) -> bool {
        // SAFETY: a live domain. An error reads as inactive, as a domain libvirt cannot
        // report on cannot be stopped either.
        unsafe { (self.api.virDomainIsActive)(d.ptr) == 1 }
    }

    /// The domain's power, or `None` when there is no such domain.
    pub fn power(&self, name: &str) -> Result<Option<Power>, Error> {
        let Some(d) = self.domain(name)? else {
            return Ok(None);
        };
        let (mut state, mut reason) = (0, 0);
        // SAFETY: a live domain and two ints to write.
        let rc = unsafe { (self.api.virDomainGetState)(d.ptr, &mut state, &mut reason, 0) };
        self.check(rc, || format!("reading the state of {name}"))?;
        Ok(Some(match state {
            sys::DOMAIN_RUNNING | sys::DOMAIN_BLOCKED | sys::DOMAIN_PAUSED => Power::On,
            _ => Power::Off,
        }))
    }

    /// The MAC addresses of the domain's NICs (libvirt chooses them when it defines it).
    pub fn macs(&self, name: &str) -> Result<Vec<String>, Error> {
        let Some(d) = self.domain(name)? else {
            return Ok(Vec::new());
        };
        // SAFETY: a live domain; the string returned is ours to free (take_string does).
        let xml = sys::take_string(unsafe { (self.api.virDomainGetXMLDesc)(d.ptr, 0) })
            .ok_or_else(|| self.failed(format!("reading the definition of {name}")))?;
        Ok(xml::mac_addresses(&xml))
    }

    /// Defines the domain (a domain of that name already defined is left as it is).
    pub fn define(&self, spec: &DomainSpec) -> Result<(), Error> {
        if self.domain(&spec.name)?.is_some() {
            return Ok(());
        }
        let what = || format!("defining domain {}", spec.name);
        let xml = c(&what(), &domain_xml(spec))?;
        // SAFETY: a live connection and NUL-terminated XML; the domain returned is freed.
        let d = unsafe { (self.api.virDomainDefineXML)(self.conn.ptr, xml.as_ptr()) };
        match Handle::new(d, self.api.virDomainFree) {
            Some(_) => Ok(()),
            None => Err(self.failed(what())),
        }
    }

    pub fn power_on(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if !self.is_active(&d) => {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainCreate)(d.ptr) };
                self.check(rc, || format!("starting {name}"))
            }
            _ => Ok(()),
        }
    }

    /// Off at once, as a BMC's ForceOff: the claim's owner asked for it.
    pub fn power_off(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if self.is_active(&d) => {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainDestroy)(d.ptr) };
                self.check(rc, || format!("stopping {name}"))
            }
            _ => Ok(()),
        }
    }

    /// A hard reset, as a BMC's ForceRestart.
    pub fn reset(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if self.is_active(&d) => {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainReset)(d.ptr, 0) };
                self.check(rc, || format!("resetting {name}"))
            }
            Some(d) => {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainCreate)(d.ptr) };
                self.check(rc, || format!("starting {name}"))
            }
            None => Ok(()),
        }
    }

    /// An ACPI restart request: the guest restarts itself (as a BMC's GracefulRestart).
    pub fn reboot(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if self.is_active(&d) => {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainReboot)(d.ptr, 0) };
                self.check(rc, || format!("rebooting {name}"))
            }
            _ => Ok(()),
        }
    }

    /// An ACPI power-button press: the guest shuts itself down (GracefulShutdown).
    pub fn shutdown(&self, name: &str) -> Result<(), Error> {
        match self.domain(name)? {
            Some(d) if self.is_active(&d) => {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainShutdown)(d.ptr) };
                self.check(rc, || format!("shutting {name} down"))
            }
            _ => Ok(()),
        }
    }

    fn pool(&self, pool: &str) -> Result<Handle, Error> {
        let what = || format!("looking up storage pool {pool}");
        let name = c(&what(), pool)?;
        // SAFETY: a live connection and a NUL-terminated name.
        let p = unsafe { (self.api.virStoragePoolLookupByName)(self.conn.ptr, name.as_ptr()) };
        Handle::new(p, self.api.virStoragePoolFree).ok_or_else(|| self.failed(what()))
    }

    /// Rescans the pool's directory: a volume added outside libvirt's view (or removed) would
    /// confuse the lookups after it. A failed rescan leaves the pool as libvirt knew it.
    fn refresh(&self, pool: &Handle) {
        // SAFETY: a live pool.
        unsafe { (self.api.virStoragePoolRefresh)(pool.ptr, 0) };
    }

    fn delete_volume(&self, vol: &Handle, what: impl FnOnce() -> String) -> Result<(), Error> {
        // SAFETY: a live volume.
        let rc = unsafe { (self.api.virStorageVolDelete)(vol.ptr, 0) };
        self.check(rc, what)
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
        self.refresh(&p);
        if let Some(old) = self.volume(&p, name)? {
            self.delete_volume(&old, || format!("deleting the old volume {name}"))?;
        }
        let mut file = std::fs::File::open(content)
            .map_err(|e| Error::Io(format!("reading {}: {e}", content.display())))?;
        let length = file
            .metadata()
            .map_err(|e| Error::Io(format!("reading {}: {e}", content.display())))?
            .len();
        let what = || format!("creating volume {name}");
        let vol_xml = c(&what(), &xml::volume_xml(name, format, length))?;
        // SAFETY: a live pool and NUL-terminated XML.
        let vol = unsafe { (self.api.virStorageVolCreateXML)(p.ptr, vol_xml.as_ptr(), 0) };
        let vol =
            Handle::new(vol, self.api.virStorageVolFree).ok_or_else(|| self.failed(what()))?;
        // SAFETY: a live connection.
        let stream = unsafe { (self.api.virStreamNew)(self.conn.ptr, 0) };
        let stream = Handle::new(stream, self.api.virStreamFree)
            .ok_or_else(|| self.failed(format!("opening a stream for {name}")))?;
        // SAFETY: a live volume and stream.
        let rc = unsafe { (self.api.virStorageVolUpload)(vol.ptr, stream.ptr, 0, length, 0) };
        self.check(rc, || format!("uploading to {name}"))?;
        // libvirt wants a stream that will not finish aborted, not dropped.
        let abort = |e: Error| {
            // SAFETY: a live stream.
            unsafe { (self.api.virStreamAbort)(stream.ptr) };
            e
        };
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| abort(Error::Io(format!("reading {}: {e}", content.display()))))?;
            if n == 0 {
                break;
            }
            let mut sent = 0;
            while sent < n {
                let chunk = &buf[sent..n];
                // SAFETY: a live blocking stream and a buffer of that many bytes.
                let k = unsafe {
                    (self.api.virStreamSend)(stream.ptr, chunk.as_ptr().cast(), chunk.len())
                };
                match k {
                    k if k > 0 => sent += k as usize,
                    // A blocking stream sends something or fails; nothing sent is a failure,
                    // not a reason to spin.
                    0 => {
                        return Err(abort(Error::Io(format!(
                            "uploading to {name}: the stream took nothing"
                        ))));
                    }
                    _ => return Err(abort(self.failed(format!("uploading to {name}")))),
                }
            }
        }
        // SAFETY: a live stream, every byte sent.
        let rc = unsafe { (self.api.virStreamFinish)(stream.ptr) };
        self.check(rc, || format!("finishing the upload to {name}"))?;
        // The pool learns the uploaded file's size (a qcow2's virtual size) on a refresh.
        self.refresh(&p);
        let vol = self
            .volume(&p, name)?
            .ok_or_else(|| self.failed(format!("looking up volume {name}")))?;
        let mut info = sys::VolInfo::default();
        // SAFETY: a live volume and a struct of libvirt's layout to fill.
        let rc = unsafe { (self.api.virStorageVolGetInfo)(vol.ptr, &mut info) };
        self.check(rc, || format!("reading volume {name}"))?;
        if capacity > info.capacity {
            // SAFETY: a live volume.
            let rc = unsafe { (self.api.virStorageVolResize)(vol.ptr, capacity, 0) };
            self.check(rc, || format!("growing volume {name}"))?;
        }
        Ok(())
    }

    /// Destroys and undefines the domain (with its NVRAM) and deletes its volumes. Whatever is
    /// already gone is skipped, so a removal interrupted half-way is done again.
    pub fn remove(&self, names: &Names, pool: &str) -> Result<(), Error> {
        if let Some(d) = self.domain(&names.domain)? {
            if self.is_active(&d) {
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainDestroy)(d.ptr) };
                self.check(rc, || format!("stopping {}", names.domain))?;
            }
            // With its NVRAM (UEFI); a domain that has none is undefined plainly.
            // SAFETY: a live domain.
            let rc =
                unsafe { (self.api.virDomainUndefineFlags)(d.ptr, sys::DOMAIN_UNDEFINE_NVRAM) };
            if rc < 0 {
                let with_nvram = sys::last_error(self.api).1;
                // SAFETY: a live domain.
                let rc = unsafe { (self.api.virDomainUndefine)(d.ptr) };
                if rc < 0 {
                    return Err(Error::Call {
                        what: format!("undefining {}", names.domain),
                        message: format!(
                            "{} (with its NVRAM: {with_nvram})",
                            sys::last_error(self.api).1
                        ),
                    });
                }
            }
        }
        let p = self.pool(pool)?;
        self.refresh(&p);
        for vol in [&names.disk, &names.config] {
            if let Some(v) = self.volume(&p, vol)? {
                self.delete_volume(&v, || format!("deleting volume {vol}"))?;
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
        self.refresh(&p);
        for vol in [&names.disk, &names.config] {
            if self.volume(&p, vol)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
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
