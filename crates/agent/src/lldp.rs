//! LLDP: what the switch port a NIC is cabled to says about itself, heard during inspection.
//! metal3 reports a NIC's `vlans` and `vlanId` from it (as Ironic's inspector's
//! `switch_port_vlans` and `switch_port_untagged_vlan_id`), so that is what is kept: the IEEE
//! 802.1 Port VLAN ID and VLAN Name TLVs, beside the switch's chassis and port IDs for the log.
//!
//! [`parse`] is pure; [`listen`] opens one raw socket per NIC (the only unsafe code in the
//! agent, for `socket`, `bind` and the multicast membership) and waits for a frame on each.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::protocol::Vlan;

/// LLDP's Ethernet type.
pub const ETH_P_LLDP: u16 = 0x88cc;
/// The nearest-bridge group address LLDP frames go to.
pub const LLDP_MULTICAST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
/// IEEE 802.1's organizationally unique identifier.
const OUI_8021: [u8; 3] = [0x00, 0x80, 0xc2];
/// Most VLAN names kept from one frame (a frame is at most 1500 bytes anyway).
const MAX_VLANS: usize = 512;

/// What one LLDP frame said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Neighbor {
    pub chassis_id: Option<String>,
    pub port_id: Option<String>,
    pub system_name: Option<String>,
    /// The port's untagged VLAN (802.1 Port VLAN ID).
    pub port_vlan_id: Option<i32>,
    /// The VLANs the port carries (802.1 VLAN Name), by id.
    pub vlans: Vec<Vlan>,
}

/// An ID TLV's value: a MAC address (subtype 4 for chassis, 3 for port) as `aa:bb:..`, text
/// otherwise.
fn id_text(subtype: u8, value: &[u8], mac_subtype: u8) -> String {
    if subtype == mac_subtype && value.len() == 6 {
        value
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    } else {
        String::from_utf8_lossy(value).trim().to_string()
    }
}

/// Parses a whole Ethernet frame; `None` when it is no LLDP frame or is malformed.
pub fn parse(frame: &[u8]) -> Option<Neighbor> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let mut at = 14;
    // A frame tagged on its way (802.1Q) carries its type four bytes later.
    let ethertype = if ethertype == 0x8100 {
        at = 18;
        u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?])
    } else {
        ethertype
    };
    if ethertype != ETH_P_LLDP {
        return None;
    }
    let mut n = Neighbor::default();
    let mut seen_chassis = false;
    while at + 2 <= frame.len() {
        let header = u16::from_be_bytes([frame[at], frame[at + 1]]);
        let (kind, len) = (header >> 9, usize::from(header & 0x1ff));
        let value = frame.get(at + 2..at + 2 + len)?;
        at += 2 + len;
        match (kind, value) {
            (0, _) => break,
            (1, [sub, rest @ ..]) => {
                seen_chassis = true;
                n.chassis_id = Some(id_text(*sub, rest, 4));
            }
            (2, [sub, rest @ ..]) => n.port_id = Some(id_text(*sub, rest, 3)),
            (5, _) => n.system_name = Some(String::from_utf8_lossy(value).trim().to_string()),
            (127, [a, b, c, sub, rest @ ..]) if [*a, *b, *c] == OUI_8021 => match (sub, rest) {
                (1, [hi, lo, ..]) => {
                    let vid = i32::from(u16::from_be_bytes([*hi, *lo]));
                    n.port_vlan_id = (vid != 0).then_some(vid);
                }
                (3, [hi, lo, name_len, name @ ..]) if n.vlans.len() < MAX_VLANS => {
                    let name = &name[..usize::from(*name_len).min(name.len())];
                    n.vlans.push(Vlan {
                        id: Some(i32::from(u16::from_be_bytes([*hi, *lo]))),
                        name: Some(String::from_utf8_lossy(name).to_string()),
                    });
                }
                _ => {}
            },
            _ => {}
        }
    }
    // The chassis ID is mandatory and first; without it this is no LLDPDU.
    seen_chassis.then(|| {
        n.vlans.sort_by_key(|v| v.id);
        n.vlans.dedup_by_key(|v| v.id);
        n
    })
}

/// Listens on each named interface (name, ifindex) until every one heard a frame or `wait`
/// passed; the first frame heard on each is kept. Interfaces whose socket cannot be opened are
/// skipped (and named in the error list).
pub fn listen(
    interfaces: &[(String, i32)],
    wait: Duration,
) -> (BTreeMap<String, Neighbor>, Vec<String>) {
    let mut heard = BTreeMap::new();
    let mut errors = Vec::new();
    let mut sockets = Vec::new();
    for (name, index) in interfaces {
        match socket::open(*index, ETH_P_LLDP, LLDP_MULTICAST) {
            Ok(s) => sockets.push((name.clone(), s)),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    let deadline = Instant::now() + wait;
    let mut buf = vec![0u8; 9216];
    while !sockets.is_empty() && Instant::now() < deadline {
        sockets.retain_mut(|(name, s)| {
            loop {
                match std::io::Read::read(s, &mut buf) {
                    Ok(n) => {
                        if let Some(neighbor) = parse(&buf[..n]) {
                            heard.insert(name.clone(), neighbor);
                            return false;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                    Err(e) => {
                        errors.push(format!("{name}: {e}"));
                        return false;
                    }
                }
            }
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    (heard, errors)
}

mod socket {
    use std::fs::File;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// A non-blocking raw socket that receives frames of `ethertype` on one interface only,
    /// with the `group` multicast address added to the NIC's filter.
    #[allow(
        unsafe_code,
        reason = "AF_PACKET sockets have no safe std or small-crate API; the calls below pass \
                  plain structs of the sizes they declare"
    )]
    pub fn open(ifindex: i32, ethertype: u16, group: [u8; 6]) -> std::io::Result<File> {
        let err = std::io::Error::last_os_error;
        let protocol = i32::from(ethertype.to_be());
        // SAFETY: socket(2) takes no pointers; the fd is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                protocol,
            )
        };
        if fd < 0 {
            return Err(err());
        }
        // SAFETY: fd is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ethertype.to_be();
        addr.sll_ifindex = ifindex;
        // SAFETY: addr lives across the call and its size is passed.
        let rc = unsafe {
            libc::bind(
                raw,
                (&raw const addr).cast::<libc::sockaddr>(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(err());
        }
        let mut address = [0u8; 8];
        address[..6].copy_from_slice(&group);
        let membership = libc::packet_mreq {
            mr_ifindex: ifindex,
            mr_type: libc::PACKET_MR_MULTICAST as u16,
            mr_alen: 6,
            mr_address: address,
        };
        // SAFETY: membership lives across the call and its size is passed.
        let rc = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&raw const membership).cast::<libc::c_void>(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(err());
        }
        Ok(File::from(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut t = ((kind << 9) | value.len() as u16).to_be_bytes().to_vec();
        t.extend_from_slice(value);
        t
    }

    /// A frame as a switch sends it: chassis (MAC), port (interface name), TTL, system name,
    /// port VLAN 100, VLANs 100 and 200 by name, end.
    pub fn switch_frame() -> Vec<u8> {
        let mut f = LLDP_MULTICAST.to_vec();
        f.extend_from_slice(&[0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        f.extend_from_slice(&ETH_P_LLDP.to_be_bytes());
        f.extend(tlv(1, &[4, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55]));
        f.extend(tlv(2, b"\x05Ethernet1/7"));
        f.extend(tlv(3, &[0, 120]));
        f.extend(tlv(5, b"leaf-3"));
        f.extend(tlv(127, &[0x00, 0x80, 0xc2, 1, 0, 100]));
        f.extend(tlv(
            127,
            &[
                0x00, 0x80, 0xc2, 3, 0, 200, 7, b'p', b'r', b'o', b'v', b'-', b'2', b'0',
            ],
        ));
        f.extend(tlv(
            127,
            &[0x00, 0x80, 0xc2, 3, 0, 100, 4, b'm', b'g', b'm', b't'],
        ));
        f.extend(tlv(0, &[]));
        f
    }

    #[test]
    fn a_switch_frame_reads_as_its_port_and_vlans() {
        assert_eq!(
            parse(&switch_frame()).unwrap(),
            Neighbor {
                chassis_id: Some("02:11:22:33:44:55".into()),
                port_id: Some("Ethernet1/7".into()),
                system_name: Some("leaf-3".into()),
                port_vlan_id: Some(100),
                vlans: vec![
                    Vlan {
                        id: Some(100),
                        name: Some("mgmt".into())
                    },
                    Vlan {
                        id: Some(200),
                        name: Some("prov-20".into())
                    },
                ],
            }
        );
    }

    #[test]
    fn other_and_broken_frames_are_ignored() {
        let frame = switch_frame();
        let mut ipv4 = frame.clone();
        ipv4[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(parse(&ipv4), None);
        // Cut inside a TLV.
        assert_eq!(parse(&frame[..20]), None);
        assert_eq!(parse(&frame[..5]), None);
        // No chassis ID.
        let mut f = frame[..14].to_vec();
        f.extend(tlv(5, b"x"));
        assert_eq!(parse(&f), None);
        // A tagged frame still reads.
        let mut tagged = frame[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        tagged.extend_from_slice(&frame[12..]);
        assert_eq!(parse(&tagged), parse(&frame));
    }
}
