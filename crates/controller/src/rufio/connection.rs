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
/// default https).
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
    let bracketed = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.clone()
    };
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
        let default = if c.port > 0 && c.port != 623 {
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
    let port = port(ipmi.port, if c.port > 0 { c.port } else { 623 })?;
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
}
