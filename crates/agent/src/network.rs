//! The ramdisk's own addressing from OpenStack `network_data.json`, the format of metal3's
//! `preprovisioningNetworkDataName` Secret (key `networkData`) that Ironic hands its ramdisk:
//! static IPv4/IPv6 addresses, routes, VLANs, MTU and DNS for provisioning networks without
//! DHCP; `ipv4_dhcp` networks still lease by DHCP.
//!
//! [`plan`] is pure (the data and the NICs seen in, the steps out) so every shape is tested
//! here; the binary runs the steps with busybox `ip` and `udhcpc`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

/// Bounds on what a network description may hold (it comes from a Secret a user wrote).
const MAX_LINKS: usize = 64;
const MAX_NETWORKS: usize = 128;
const MAX_ROUTES: usize = 64;

/// A NIC the kernel shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Nic {
    pub name: String,
    pub mac: String,
}

/// One thing to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Arguments to `ip`.
    Ip(Vec<String>),
    /// Lease an IPv4 address on this interface.
    Dhcp(String),
    /// `/etc/resolv.conf`'s name servers.
    Resolv(Vec<String>),
}

fn ip(args: &[&str]) -> Step {
    Step::Ip(args.iter().map(|s| s.to_string()).collect())
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn list<'a>(v: &'a Value, key: &str, max: usize, what: &str) -> Result<&'a [Value], String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) if a.len() <= max => Ok(a),
        Some(Value::Array(a)) => Err(format!("{what}: {} entries, at most {max}", a.len())),
        Some(other) => Err(format!("{what}: not a list: {other}")),
    }
}

/// A prefix length from `ip_address` ("10.0.0.5/24") or `netmask` (dotted, or a length).
fn prefix(
    address: &str,
    netmask: Option<&str>,
    v6: bool,
    at: &str,
) -> Result<(String, u8), String> {
    let max = if v6 { 128 } else { 32 };
    let (addr, given) = match address.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (address, None),
    };
    let parsed: IpAddr = addr
        .parse()
        .map_err(|_| format!("{at}.ip_address {address:?}: not an IP address"))?;
    if parsed.is_ipv6() != v6 {
        return Err(format!(
            "{at}.ip_address {address:?}: not an {} address",
            if v6 { "IPv6" } else { "IPv4" }
        ));
    }
    let len = match (given, netmask) {
        (Some(p), _) => p.parse::<u8>().ok().filter(|p| *p <= max),
        (None, Some(mask)) => mask_len(mask, v6),
        (None, None) => Some(max),
    };
    let len = len.ok_or_else(|| {
        format!(
            "{at}.netmask {:?}: not a netmask",
            netmask.or(given).unwrap_or_default()
        )
    })?;
    Ok((addr.to_string(), len))
}

/// "255.255.255.0" -> 24, "ffff:ffff:ffff:ffff::" -> 64, "24" -> 24; holes are refused.
fn mask_len(mask: &str, v6: bool) -> Option<u8> {
    let max = if v6 { 128 } else { 32 };
    if let Ok(n) = mask.trim_start_matches('/').parse::<u8>() {
        return (n <= max).then_some(n);
    }
    let bits: u128 = if v6 {
        u128::from(mask.parse::<Ipv6Addr>().ok()?)
    } else {
        u128::from(u32::from(mask.parse::<Ipv4Addr>().ok()?)) << 96
    };
    let len = bits.leading_ones();
    (bits.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
}

/// The `ip` steps for `network_data` on these NICs. Links are matched by MAC address
/// (`ethernet_mac_address`); a VLAN link becomes `PARENT.VID`; a link no network uses is still
/// brought up.
pub fn plan(data: &Value, nics: &[Nic]) -> Result<Vec<Step>, String> {
    if !data.is_object() {
        return Err(format!("network data is not an object: {data}"));
    }
    let links = list(data, "links", MAX_LINKS, "links")?;
    let networks = list(data, "networks", MAX_NETWORKS, "networks")?;
    let mut steps = Vec::new();
    // Link id -> interface name, physical links first (VLANs name their parent).
    let mut names: Vec<(String, String)> = Vec::new();
    for (i, link) in links.iter().enumerate() {
        let at = format!("links[{i}]");
        let id = text(link, "id").ok_or_else(|| format!("{at}.id is missing"))?;
        match text(link, "type").unwrap_or("phy") {
            "vlan" => continue,
            "bond" => {
                return Err(format!(
                    "{at} ({id}): bond links are not supported in the ramdisk; give the \
                     provisioning network on one NIC"
                ));
            }
            _ => {}
        }
        let mac = text(link, "ethernet_mac_address")
            .ok_or_else(|| format!("{at} ({id}): ethernet_mac_address is missing"))?;
        let nic = nics
            .iter()
            .find(|n| n.mac.eq_ignore_ascii_case(mac))
            .ok_or_else(|| {
                let seen: Vec<String> = nics
                    .iter()
                    .map(|n| format!("{} {}", n.name, n.mac))
                    .collect();
                format!(
                    "{at} ({id}): no NIC has MAC {mac} (seen: {})",
                    seen.join(", ")
                )
            })?;
        steps.push(ip(&["link", "set", &nic.name, "up"]));
        if let Some(mtu) = link.get("mtu").and_then(Value::as_u64) {
            steps.push(ip(&["link", "set", &nic.name, "mtu", &mtu.to_string()]));
        }
        names.push((id.to_string(), nic.name.clone()));
    }
    for (i, link) in links.iter().enumerate() {
        if text(link, "type") != Some("vlan") {
            continue;
        }
        let at = format!("links[{i}]");
        let id = text(link, "id").unwrap_or_default();
        let parent_id =
            text(link, "vlan_link").ok_or_else(|| format!("{at} ({id}): vlan_link is missing"))?;
        let parent = names
            .iter()
            .find(|(k, _)| k == parent_id)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("{at} ({id}): vlan_link {parent_id:?} is no physical link"))?;
        let vid = link
            .get("vlan_id")
            .and_then(Value::as_u64)
            .filter(|v| (1..4095).contains(v))
            .ok_or_else(|| format!("{at} ({id}): vlan_id must be 1..4094"))?;
        let name = format!("{parent}.{vid}");
        let vid = vid.to_string();
        steps.push(ip(&[
            "link", "add", "link", &parent, "name", &name, "type", "vlan", "id", &vid,
        ]));
        if let Some(mac) = text(link, "vlan_mac_address") {
            steps.push(ip(&["link", "set", &name, "address", mac]));
        }
        steps.push(ip(&["link", "set", &name, "up"]));
        names.push((id.to_string(), name));
    }
    let mut dns: Vec<String> = Vec::new();
    for (i, net) in networks.iter().enumerate() {
        let at = format!("networks[{i}]");
        let link = text(net, "link").ok_or_else(|| format!("{at}.link is missing"))?;
        let dev = names
            .iter()
            .find(|(k, _)| k == link)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("{at}.link {link:?} names no link"))?;
        let kind = text(net, "type").unwrap_or("ipv4");
        let v6 = match kind {
            "ipv4" => false,
            "ipv6" => true,
            "ipv4_dhcp" | "dhcp4" => {
                steps.push(Step::Dhcp(dev));
                continue;
            }
            // Router advertisements configure these; the link is up already.
            k if k.starts_with("ipv6_") || k == "dhcp6" => continue,
            other => return Err(format!("{at}.type {other:?}: not ipv4, ipv6 or ipv4_dhcp")),
        };
        let family = if v6 { "-6" } else { "-4" };
        let address =
            text(net, "ip_address").ok_or_else(|| format!("{at}.ip_address is missing"))?;
        let (addr, len) = prefix(address, text(net, "netmask"), v6, &at)?;
        steps.push(ip(&[
            family,
            "addr",
            "add",
            &format!("{addr}/{len}"),
            "dev",
            &dev,
        ]));
        for (j, route) in list(net, "routes", MAX_ROUTES, &format!("{at}.routes"))?
            .iter()
            .enumerate()
        {
            let rat = format!("{at}.routes[{j}]");
            let gateway =
                text(route, "gateway").ok_or_else(|| format!("{rat}.gateway is missing"))?;
            if gateway.parse::<IpAddr>().map(|g| g.is_ipv6()) != Ok(v6) {
                return Err(format!(
                    "{rat}.gateway {gateway:?}: not an address of the network's family"
                ));
            }
            let network = text(route, "network").unwrap_or(if v6 { "::" } else { "0.0.0.0" });
            let (dest, dlen) = prefix(network, text(route, "netmask"), v6, &rat)?;
            let dest = if dlen == 0 {
                "default".to_string()
            } else {
                format!("{dest}/{dlen}")
            };
            steps.push(ip(&[
                family, "route", "add", &dest, "via", gateway, "dev", &dev,
            ]));
        }
        // Not in OpenStack's schema, but written by some tools (and nmstate converters).
        if let Some(gateway) = text(net, "gateway") {
            steps.push(ip(&[
                family, "route", "add", "default", "via", gateway, "dev", &dev,
            ]));
        }
        for server in list(net, "dns_nameservers", 16, &format!("{at}.dns_nameservers"))? {
            if let Some(s) = server.as_str() {
                dns.push(s.to_string());
            }
        }
    }
    for (i, service) in list(data, "services", 16, "services")?.iter().enumerate() {
        if text(service, "type") == Some("dns") {
            let address = text(service, "address")
                .ok_or_else(|| format!("services[{i}].address is missing"))?;
            dns.push(address.to_string());
        }
    }
    for server in &dns {
        server
            .parse::<IpAddr>()
            .map_err(|_| format!("DNS server {server:?}: not an IP address"))?;
    }
    dns.dedup();
    if !dns.is_empty() {
        steps.push(Step::Resolv(dns));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nics() -> Vec<Nic> {
        vec![
            Nic {
                name: "eth0".into(),
                mac: "52:54:00:aa:bb:01".into(),
            },
            Nic {
                name: "eth1".into(),
                mac: "52:54:00:aa:bb:02".into(),
            },
        ]
    }

    fn ips(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Step::Ip(a) => format!("ip {}", a.join(" ")),
                Step::Dhcp(i) => format!("dhcp {i}"),
                Step::Resolv(d) => format!("resolv {}", d.join(" ")),
            })
            .collect()
    }

    #[test]
    fn static_ipv4_with_a_default_route_and_dns() {
        let data = json!({
            "links": [{"id": "prov", "type": "phy", "ethernet_mac_address": "52:54:00:AA:BB:02", "mtu": 9000}],
            "networks": [{"id": "n0", "type": "ipv4", "link": "prov", "ip_address": "10.0.2.50",
                "netmask": "255.255.255.0",
                "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.2.2"},
                           {"network": "192.168.10.0", "netmask": "255.255.255.0", "gateway": "10.0.2.1"}]}],
            "services": [{"type": "dns", "address": "10.0.2.3"}]
        });
        assert_eq!(
            ips(&plan(&data, &nics()).unwrap()),
            [
                "ip link set eth1 up",
                "ip link set eth1 mtu 9000",
                "ip -4 addr add 10.0.2.50/24 dev eth1",
                "ip -4 route add default via 10.0.2.2 dev eth1",
                "ip -4 route add 192.168.10.0/24 via 10.0.2.1 dev eth1",
                "resolv 10.0.2.3",
            ]
        );
    }

    #[test]
    fn vlans_ipv6_dhcp_and_prefix_forms() {
        let data = json!({
            "links": [
                {"id": "v", "type": "vlan", "vlan_link": "p", "vlan_id": 42, "vlan_mac_address": "52:54:00:aa:bb:09"},
                {"id": "p", "ethernet_mac_address": "52:54:00:aa:bb:01"},
                {"id": "q", "type": "phy", "ethernet_mac_address": "52:54:00:aa:bb:02"}
            ],
            "networks": [
                {"link": "v", "type": "ipv4", "ip_address": "172.16.0.9/20", "dns_nameservers": ["172.16.0.1"]},
                {"link": "v", "type": "ipv6", "ip_address": "fd00::9", "netmask": "ffff:ffff:ffff:ffff::",
                 "routes": [{"network": "::", "netmask": "::", "gateway": "fd00::1"}]},
                {"link": "q", "type": "ipv4_dhcp"},
                {"link": "q", "type": "ipv6_slaac"}
            ]
        });
        assert_eq!(
            ips(&plan(&data, &nics()).unwrap()),
            [
                "ip link set eth0 up",
                "ip link set eth1 up",
                "ip link add link eth0 name eth0.42 type vlan id 42",
                "ip link set eth0.42 address 52:54:00:aa:bb:09",
                "ip link set eth0.42 up",
                "ip -4 addr add 172.16.0.9/20 dev eth0.42",
                "ip -6 addr add fd00::9/64 dev eth0.42",
                "ip -6 route add default via fd00::1 dev eth0.42",
                "dhcp eth1",
                "resolv 172.16.0.1",
            ]
        );
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            (json!([]), "not an object"),
            (
                json!({"links": [{"id": "x", "ethernet_mac_address": "00:11:22:33:44:55"}]}),
                "links[0] (x): no NIC has MAC 00:11:22:33:44:55 (seen: eth0 52:54:00:aa:bb:01, eth1 52:54:00:aa:bb:02)",
            ),
            (
                json!({"links": [{"id": "b", "type": "bond", "bond_links": ["p"]}]}),
                "links[0] (b): bond links are not supported",
            ),
            (
                json!({"links": [{"id": "v", "type": "vlan", "vlan_link": "p", "vlan_id": 5000}]}),
                "links[0] (v): vlan_link \"p\" is no physical link",
            ),
            (
                json!({"links": [{"id": "p", "ethernet_mac_address": "52:54:00:aa:bb:01"}],
                       "networks": [{"link": "p", "type": "ipv4", "ip_address": "10.0.0.1", "netmask": "255.0.255.0"}]}),
                "networks[0].netmask \"255.0.255.0\": not a netmask",
            ),
            (
                json!({"links": [{"id": "p", "ethernet_mac_address": "52:54:00:aa:bb:01"}],
                       "networks": [{"link": "p", "type": "ipv4", "ip_address": "fd00::1"}]}),
                "networks[0].ip_address \"fd00::1\": not an IPv4 address",
            ),
            (
                json!({"links": [{"id": "p", "ethernet_mac_address": "52:54:00:aa:bb:01"}],
                       "networks": [{"link": "nope", "type": "ipv4", "ip_address": "10.0.0.1"}]}),
                "networks[0].link \"nope\" names no link",
            ),
            (
                json!({"links": [{"id": "p", "ethernet_mac_address": "52:54:00:aa:bb:01"}],
                       "networks": [{"link": "p", "type": "ipv4", "ip_address": "10.0.0.1",
                                     "routes": [{"gateway": "fd00::1"}]}]}),
                "networks[0].routes[0].gateway \"fd00::1\": not an address of the network's family",
            ),
            (
                json!({"links": (0..65).map(|i| json!({"id": i.to_string()})).collect::<Vec<_>>()}),
                "links: 65 entries, at most 64",
            ),
        ];
        for (data, want) in cases {
            let err = plan(&data, &nics()).unwrap_err();
            assert!(err.contains(want), "{data}: {err}");
        }
    }

    #[test]
    fn masks() {
        assert_eq!(mask_len("255.255.255.0", false), Some(24));
        assert_eq!(mask_len("0.0.0.0", false), Some(0));
        assert_eq!(mask_len("255.255.255.255", false), Some(32));
        assert_eq!(mask_len("255.255.0.255", false), None);
        assert_eq!(mask_len("ffff:ffff:ffff:ffff::", true), Some(64));
        assert_eq!(mask_len("64", true), Some(64));
        assert_eq!(mask_len("33", false), None);
    }
}
