//! The part of libvirt's C API this crate calls, loaded with `dlopen` on first use: a process
//! that never manages a libvirt HostClass maps neither libvirt nor the ~50 libraries it pulls
//! in (~9 MiB of resident pages), and the binary builds and starts on a machine without them.
//! Signatures as in libvirt's headers; every function used exists since libvirt 4.5.

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::OnceLock;

/// An opaque libvirt object (`virConnectPtr`, `virDomainPtr`, ...).
pub type Ptr = *mut c_void;

/// `virStorageVolInfo`.
#[repr(C)]
#[derive(Default)]
pub struct VolInfo {
    pub kind: c_int,
    pub capacity: c_ulonglong,
    pub allocation: c_ulonglong,
}

pub const ERR_NO_DOMAIN: c_int = 42;
pub const ERR_NO_STORAGE_VOL: c_int = 50;
pub const DOMAIN_RUNNING: c_int = 1;
pub const DOMAIN_BLOCKED: c_int = 2;
pub const DOMAIN_PAUSED: c_int = 3;
pub const DOMAIN_UNDEFINE_NVRAM: c_uint = 1 << 2;

/// The library's soname on every distribution that ships it.
const LIBRARY: &CStr = c"libvirt.so.0";

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// libvirt's functions, resolved once.
        #[allow(non_snake_case)]
        pub struct Api {
            $(pub $name: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl Api {
            fn resolve(lib: *mut c_void) -> Result<Api, String> {
                Ok(Api {
                    $($name: {
                        let f = symbol(lib, concat!(stringify!($name), "\0"))?;
                        // SAFETY: the symbol is libvirt's function of that name, whose C
                        // signature the field's type spells.
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(f)
                        }
                    },)*
                })
            }
        }
    };
}

api! {
    virConnectOpen: fn(*const c_char) -> Ptr;
    virConnectClose: fn(Ptr) -> c_int;
    virGetLastErrorCode: fn() -> c_int;
    virGetLastErrorMessage: fn() -> *const c_char;
    virSetErrorFunc: fn(*mut c_void, Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>) -> ();
    virDomainLookupByName: fn(Ptr, *const c_char) -> Ptr;
    virDomainDefineXML: fn(Ptr, *const c_char) -> Ptr;
    virDomainFree: fn(Ptr) -> c_int;
    virDomainGetState: fn(Ptr, *mut c_int, *mut c_int, c_uint) -> c_int;
    virDomainGetXMLDesc: fn(Ptr, c_uint) -> *mut c_char;
    virDomainIsActive: fn(Ptr) -> c_int;
    virDomainCreate: fn(Ptr) -> c_int;
    virDomainDestroy: fn(Ptr) -> c_int;
    virDomainReset: fn(Ptr, c_uint) -> c_int;
    virDomainReboot: fn(Ptr, c_uint) -> c_int;
    virDomainShutdown: fn(Ptr) -> c_int;
    virDomainUndefineFlags: fn(Ptr, c_uint) -> c_int;
    virDomainUndefine: fn(Ptr) -> c_int;
    virStoragePoolLookupByName: fn(Ptr, *const c_char) -> Ptr;
    virStoragePoolRefresh: fn(Ptr, c_uint) -> c_int;
    virStoragePoolFree: fn(Ptr) -> c_int;
    virStorageVolLookupByName: fn(Ptr, *const c_char) -> Ptr;
    virStorageVolCreateXML: fn(Ptr, *const c_char, c_uint) -> Ptr;
    virStorageVolDelete: fn(Ptr, c_uint) -> c_int;
    virStorageVolUpload: fn(Ptr, Ptr, c_ulonglong, c_ulonglong, c_uint) -> c_int;
    virStorageVolGetInfo: fn(Ptr, *mut VolInfo) -> c_int;
    virStorageVolResize: fn(Ptr, c_ulonglong, c_uint) -> c_int;
    virStorageVolFree: fn(Ptr) -> c_int;
    virStreamNew: fn(Ptr, c_uint) -> Ptr;
    virStreamSend: fn(Ptr, *const c_char, usize) -> c_int;
    virStreamFinish: fn(Ptr) -> c_int;
    virStreamAbort: fn(Ptr) -> c_int;
    virStreamFree: fn(Ptr) -> c_int;
}

fn symbol(lib: *mut c_void, name: &str) -> Result<*mut c_void, String> {
    // SAFETY: `lib` is a live handle from dlopen and `name` ends in a NUL (the macro adds it).
    let f = unsafe { libc::dlsym(lib, name.as_ptr().cast()) };
    if f.is_null() {
        Err(format!(
            "{} has no {} (libvirt older than 4.5?)",
            LIBRARY.to_string_lossy(),
            name.trim_end_matches('\0')
        ))
    } else {
        Ok(f)
    }
}

/// libvirt prints every error to stderr unless a handler is set; ours are returned and logged.
unsafe extern "C" fn quiet(_: *mut c_void, _: *mut c_void) {}

/// libvirt's API, loaded and kept for the life of the process on first use. The error names
/// the library and what the dynamic loader said (typically: not installed).
pub fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        // SAFETY: loading a shared library runs its constructors; libvirt's are safe to run
        // in a multithreaded process (it initializes itself lazily, thread-safely, since 1.0).
        let lib = unsafe { libc::dlopen(LIBRARY.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            // SAFETY: dlerror returns the loader's message for the failed dlopen, or null.
            let why = unsafe { libc::dlerror() };
            let why = if why.is_null() {
                "unknown error".to_string()
            } else {
                // SAFETY: a NUL-terminated string owned by the loader, copied at once.
                unsafe { CStr::from_ptr(why) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(format!(
                "loading libvirt's client library ({}; Debian package libvirt0): {why}",
                LIBRARY.to_string_lossy()
            ));
        }
        let api = Api::resolve(lib)?;
        // SAFETY: a global handler that does nothing, set before any other call.
        unsafe { (api.virSetErrorFunc)(std::ptr::null_mut(), Some(quiet)) };
        Ok(api)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// An owned libvirt object, released with its kind's free function when dropped.
pub struct Handle {
    pub ptr: Ptr,
    free: unsafe extern "C" fn(Ptr) -> c_int,
}

impl Handle {
    /// `None` when libvirt returned null (the call failed; its error is the thread's last).
    pub fn new(ptr: Ptr, free: unsafe extern "C" fn(Ptr) -> c_int) -> Option<Handle> {
        // Built only when non-null: a Handle dropped frees what it holds.
        (!ptr.is_null()).then(|| Handle { ptr, free })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: `ptr` is a live object of the kind `free` releases, released once.
        unsafe { (self.free)(self.ptr) };
    }
}

/// The calling thread's last libvirt error: its code and message.
pub fn last_error(api: &Api) -> (c_int, String) {
    // SAFETY: both read the calling thread's last error; the message is copied at once.
    unsafe {
        let code = (api.virGetLastErrorCode)();
        let message = (api.virGetLastErrorMessage)();
        let message = if message.is_null() {
            "unknown libvirt error".to_string()
        } else {
            CStr::from_ptr(message).to_string_lossy().into_owned()
        };
        (code, message)
    }
}

/// Takes a string libvirt allocated (and the caller must free).
pub fn take_string(s: *mut c_char) -> Option<String> {
    if s.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string malloc'ed by libvirt, copied, then freed once.
    unsafe {
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        libc::free(s.cast());
        Some(out)
    }
}
