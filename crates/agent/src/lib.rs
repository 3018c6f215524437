//! ferrometal's deploy agent, the program a host runs from the ramdisk ferrometal boots it into
//! (virtual media). It reports the host's hardware as the host itself sees it (in-band
//! inspection), wipes disk metadata (cleaning) and writes disk images with their config drive,
//! taking its instructions from the agent API that `serve` (or `controller`) offers.
//!
//! This crate knows nothing of Kubernetes. `protocol` is the wire format both sides share;
//! `inspect` reads the hardware from /proc and /sys; `hints` picks the root disk by metal3's
//! `rootDeviceHints`; `clean` wipes metadata; `checksum`, `image` and `partition` turn a
//! download into disk contents and a config drive partition; `raid` builds software RAID; `lldp` hears what the switch
//! port says; `network` turns the host's network data into the ramdisk's addressing; `api`
//! and `deploy` are the network side the `ferrometal-agent` binary drives.

pub mod api;
pub mod checksum;
pub mod clean;
pub mod deploy;
pub mod hints;
pub mod image;
pub mod inspect;
pub mod lldp;
pub mod network;
pub mod partition;
pub mod protocol;
pub mod raid;
