//! A Rufio `Connection` to the BMC address and options ferrometal's BMC layer speaks: bmclib's
//! `gofish` provider is Redfish, `ipmitool` is IPMI; the others are refused by name.

use ferrometal_api::rufio::Connection;
use ferrometal_bmc::BmcAddress;

/// Which protocol, where, and the IPMI cipher suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub address: BmcAddress,
    pub cipher_suite: Option<u8>,
    pub insecure_tls: bool,
}

/// Resolves the connection. Rufio's default provider order starts with ipmitool, so a
/// connection that names no provider is IPMI; `providerOptions.redfish` or a preferred order
/// starting with gofish picks Redfish. `host` may carry `http://` or `https://` (Redfish only;
/// default https) and a `:port`, which the provider options' port overrides; IPv6 goes in
/// brackets when it carries a port (`[::1]:8000`), bare otherwise.
pub fn target(c: &Connection) -> Result<Target, String> {
    let opts = c.provider_options.clone().unwrap_or_default();
    let first = opts.preferred_order.first().map(|p| p.to_ascii_lowercase());
    let redfish = match first.as_deref() {
        Some("gofish") => true,
        Some("ipmitool") => false,
        Some(other) => {
            return Err(format!(
                "provider {other} is not supported (ferrometal speaks ipmitool and gofish/Redfish)"
            ));
        }
        None => opts.redfish.is_some(),
    };
    let (scheme, host) = match c.host.split_once("://") {
        Some((s, h)) => (s.to_ascii_lowercase(), h.trim_end_matches('/').to_string()),
        None => (String::new(), c.host.clone()),
    };
    if host.is_empty() || host.contains('/') {
        return Err(format!(
            "connection.host {:?} is not a host name or address",
            c.host
        ));
    }
    let (bracketed, host_port) = split_host(&c.host, &host)?;
    let port = |p: Option<i64>, default: i64| {
        let p = p.filter(|p| *p > 0).unwrap_or(default);
        u16::try_from(p).map_err(|_| format!("port {p} is out of range"))
    };
    if redfish {
        let r = opts.redfish.clone().unwrap_or_default();
        let transport = match scheme.as_str() {
            "" | "https" => "https",
            "http" => "http",
            other => {
                return Err(format!(
                    "connection.host scheme {other} is not http or https"
                ));
            }
        };
        // Rufio's connection.port defaults to IPMI's 623; Redfish listens on 443 unless told.
        let default = if let Some(p) = host_port {
            i64::from(p)
        } else if c.port > 0 && c.port != 623 {
            c.port
        } else if transport == "http" {
            80
        } else {
            443
        };
        let port = port(r.port, default)?;
        let mut address = format!("redfish+{transport}://{bracketed}:{port}");
        if !r.system_name.is_empty() {
            address.push_str(&format!("/redfish/v1/Systems/{}", r.system_name));
        }
        let address = BmcAddress::parse(&address).map_err(|e| e.to_string())?;
        return Ok(Target {
            address,
            cipher_suite: None,
            insecure_tls: c.insecure_tls,
        });
    }
    if !scheme.is_empty() {
        return Err(format!(
            "connection.host {:?}: IPMI takes a bare host",
            c.host
        ));
    }
    let ipmi = opts.ipmitool.clone().unwrap_or_default();
    let default = match host_port {
        Some(p) => i64::from(p),
        None if c.port > 0 => c.port,
        None => 623,
    };
    let port = port(ipmi.port, default)?;
    let cipher_suite =
        match ipmi.cipher_suite.trim() {
            "" => None,
            s => Some(s.parse::<u8>().map_err(|_| {
                format!("providerOptions.ipmitool.cipherSuite {s:?} is not a number")
            })?),
        };
    let address =
        BmcAddress::parse(&format!("ipmi://{bracketed}:{port}")).map_err(|e| e.to_string())?;
    Ok(Target {
        address,
        cipher_suite,
        insecure_tls: c.insecure_tls,
    })
}

/// A BMC error in a Rufio user's words: the fix for a plain-HTTP BMC is in
/// `connection.host`, not in a BareMetalHost address scheme.
pub fn rufio_words(message: String) -> String {
    message.replace(
        ferrometal_bmc::PLAIN_HTTP_TO_HTTPS,
        "the BMC answered plain HTTP to HTTPS; write connection.host as http://HOST",
    )
}

/// Splits `host` (connection.host without its scheme; `whole` is all of it, for errors) into
/// the host as it goes into an address, IPv6 bracketed, and the port it carries, if any:
/// `name`, `name:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address (several colons: no port).
fn split_host(whole: &str, host: &str) -> Result<(String, Option<u16>), String> {
    let bad = |why: String| format!("connection.host {whole:?}: {why}");
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("unterminated IPv6 address (missing \"]\")".into()))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| bad(format!("unexpected {p:?} after the IPv6 address")))?,
            ),
        };
        (v6, port)
    } else if host.matches(':').count() > 1 {
        (host, None)
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return Err(bad("no host name or address".into()));
    }
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad(format!("port {p:?} is not a number from 1 to 65535")))
        })
        .transpose()?;
    let v6 = host.starts_with('[') || name.contains(':');
    if v6 && name.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(bad(format!("{name:?} is not an IPv6 address")));
    }
    let name = if v6 {
        format!("[{name}]")
    } else {
        name.to_string()
    };
    Ok((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::rufio::{IpmitoolOptions, ProviderOptions, RedfishOptions};
    use ferrometal_bmc::Protocol;

    fn conn(host: &str, port: i64, opts: Option<ProviderOptions>) -> Connection {
        Connection {
            host: host.into(),
            port,
            provider_options: opts,
            ..Connection::default()
        }
    }

    #[test]
    fn providers_to_addresses() {
        let t = target(&conn("10.0.0.5", 623, None)).unwrap();
        assert_eq!(t.address.protocol(), Protocol::Ipmi);
        assert_eq!((t.address.host.as_str(), t.address.port), ("10.0.0.5", 623));

        let ipmi = ProviderOptions {
            ipmitool: Some(IpmitoolOptions {
                port: Some(6230),
                cipher_suite: "17".into(),
            }),
            ..ProviderOptions::default()
        };
        let t = target(&conn("bmc.example", 623, Some(ipmi))).unwrap();
        assert_eq!((t.address.port, t.cipher_suite), (6230, Some(17)));

        let redfish = ProviderOptions {
            redfish: Some(RedfishOptions {
                system_name: "1".into(),
                ..RedfishOptions::default()
            }),
            ..ProviderOptions::default()
        };
        let t = target(&conn("10.0.0.5", 623, Some(redfish.clone()))).unwrap();
        assert_eq!(t.address.protocol(), Protocol::Redfish);
        assert_eq!(t.address.port, 443);
        assert_eq!(
            t.address.system_path.as_deref(),
            Some("/redfish/v1/Systems/1")
        );
        let t = target(&conn("http://127.0.0.1", 8000, Some(redfish))).unwrap();
        assert_eq!(t.address.base_url(), "http://127.0.0.1:8000");

        let gofish = ProviderOptions {
            preferred_order: vec!["Gofish".into(), "ipmitool".into()],
            ..ProviderOptions::default()
        };
        assert_eq!(
            target(&conn("h", 623, Some(gofish)))
                .unwrap()
                .address
                .protocol(),
            Protocol::Redfish
        );
        let amt = ProviderOptions {
            preferred_order: vec!["IntelAMT".into()],
            ..ProviderOptions::default()
        };
        assert!(
            target(&conn("h", 623, Some(amt)))
                .unwrap_err()
                .contains("intelamt")
        );
        assert!(target(&conn("h/x", 623, None)).is_err());
    }

    #[test]
    fn host_may_carry_a_port() {
        let redfish = |port: Option<i64>| {
            Some(ProviderOptions {
                redfish: Some(RedfishOptions {
                    port,
                    ..RedfishOptions::default()
                }),
                ..ProviderOptions::default()
            })
        };
        let ipmi = |port: Option<i64>| {
            Some(ProviderOptions {
                ipmitool: Some(IpmitoolOptions {
                    port,
                    ..IpmitoolOptions::default()
                }),
                ..ProviderOptions::default()
            })
        };
        // (connection.host, connection.port, options, the address or a piece of the error)
        let cases = [
            (
                "http://127.0.0.1:33655",
                623,
                redfish(None),
                Ok("redfish+http://127.0.0.1:33655"),
            ),
            (
                "https://bmc.example:8443/",
                0,
                redfish(None),
                Ok("redfish://bmc.example:8443"),
            ),
            // The provider options' port wins over the host's, the host's over connection.port.
            (
                "http://127.0.0.1:33655",
                623,
                redfish(Some(9000)),
                Ok("redfish+http://127.0.0.1:9000"),
            ),
            (
                "http://127.0.0.1:33655",
                8000,
                redfish(None),
                Ok("redfish+http://127.0.0.1:33655"),
            ),
            (
                "http://127.0.0.1",
                8000,
                redfish(None),
                Ok("redfish+http://127.0.0.1:8000"),
            ),
            (
                "http://[::1]:8000",
                623,
                redfish(None),
                Ok("redfish+http://[::1]:8000"),
            ),
            (
                "https://[::1]",
                623,
                redfish(None),
                Ok("redfish://[::1]:443"),
            ),
            (
                "[fd00::5]:8443",
                623,
                redfish(None),
                Ok("redfish://[fd00::5]:8443"),
            ),
            ("fe80::1", 623, redfish(None), Ok("redfish://[fe80::1]:443")),
            ("::1", 623, None, Ok("ipmi://[::1]:623")),
            ("[::1]:6230", 623, None, Ok("ipmi://[::1]:6230")),
            ("10.0.0.5:6230", 623, None, Ok("ipmi://10.0.0.5:6230")),
            (
                "10.0.0.5:6230",
                623,
                ipmi(Some(7000)),
                Ok("ipmi://10.0.0.5:7000"),
            ),
            (
                "http://h:abc",
                623,
                redfish(None),
                Err(r#"connection.host "http://h:abc": port "abc" is not a number"#),
            ),
            (
                "http://h:70000",
                623,
                redfish(None),
                Err(r#"connection.host "http://h:70000": port "70000""#),
            ),
            ("http://h:0", 623, redfish(None), Err(r#"port "0""#)),
            ("http://h:", 623, redfish(None), Err(r#"port """#)),
            (
                "h:-1",
                623,
                None,
                Err(r#"connection.host "h:-1": port "-1""#),
            ),
            (
                "http://:80",
                623,
                redfish(None),
                Err("no host name or address"),
            ),
            (
                "http://[::1",
                623,
                redfish(None),
                Err("unterminated IPv6 address"),
            ),
            (
                "http://[::1]8000",
                623,
                redfish(None),
                Err(r#"unexpected "8000" after the IPv6 address"#),
            ),
            (
                "http://[nope]:80",
                623,
                redfish(None),
                Err("not an IPv6 address"),
            ),
        ];
        for (host, port, opts, want) in cases {
            let got = target(&conn(host, port, opts)).map(|t| t.address.to_string());
            match want {
                Ok(address) => assert_eq!(got.as_deref(), Ok(address), "{host}"),
                Err(piece) => {
                    let e = got.expect_err(host);
                    assert!(e.contains(piece), "{host}: {e}");
                }
            }
        }
    }
}
