//! Which API servers a remote claim's kubeconfig may point this process at. The kubeconfig is a
//! tenant's, the requests are this process's: without a bound a tenant could make it send
//! requests to any address it can reach (plain HTTP, loopback services, a cloud's metadata
//! address) and read the outcome from the claim's status.
//!
//! Always: `https://` only, no user info, query or fragment in the URL. By default any host
//! except loopback, link-local and unspecified addresses and `localhost`; with an allow-list
//! (`--remote-claim-servers`), only the hosts (or `host:port`s) on it.

use std::net::IpAddr;

/// The remote API servers this process may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerPolicy {
    /// `host` or `host:port` entries (`[v6]:port` for IPv6 with a port); empty: the default.
    pub allow: Vec<String>,
}

impl ServerPolicy {
    /// Why `server` (a kubeconfig's cluster URL) may not be used, if it may not.
    pub fn check(&self, server: &str) -> Result<(), String> {
        let url = url::Url::parse(server).map_err(|e| format!("server {server:?}: {e}"))?;
        if url.scheme() != "https" {
            return Err(format!(
                "server {server:?}: only https:// API servers are used (credentials never cross in clear)"
            ));
        }
        if !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(format!(
                "server {server:?}: user info, query and fragment are not allowed in a server URL"
            ));
        }
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => format!("[{ip}]"),
            None => return Err(format!("server {server:?} has no host")),
        };
        let port = url.port_or_known_default().unwrap_or(443);
        if !self.allow.is_empty() {
            let with_port = format!("{host}:{port}");
            let listed = self
                .allow
                .iter()
                .map(|a| a.trim().to_ascii_lowercase())
                .any(|a| a == host || a == with_port);
            return if listed {
                Ok(())
            } else {
                Err(format!(
                    "server {server:?} is not among the remote API servers this installation allows"
                ))
            };
        }
        let ip = host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<IpAddr>()
            .ok();
        let internal = host == "localhost"
            || host.ends_with(".localhost")
            || ip.is_some_and(|ip| match ip {
                IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
                IpAddr::V6(v6) => {
                    v6.is_loopback()
                        || v6.is_unspecified()
                        || v6.is_unicast_link_local()
                        || v6.to_ipv4_mapped().is_some_and(|v4| {
                            v4.is_loopback() || v4.is_link_local() || v4.is_unspecified()
                        })
                }
            });
        if internal {
            return Err(format!(
                "server {server:?}: loopback and link-local addresses are not used unless the installation allows them (--remote-claim-servers)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_default_https_to_any_host_but_this_machine_and_link_local() {
        let p = ServerPolicy::default();
        for ok in [
            "https://api.example.com:6443",
            "https://10.0.0.5:6443/",
            "https://rancher.example.com/k8s/clusters/c-1",
            "https://[2001:db8::1]:6443",
        ] {
            assert_eq!(p.check(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://api.example.com:6443",
            "https://127.0.0.1:6443",
            "https://127.8.9.1",
            "https://localhost:6443",
            "https://[::1]:6443",
            "https://[::ffff:127.0.0.1]:6443",
            "https://169.254.169.254/latest/meta-data",
            "https://0.0.0.0:443",
            "https://user:pw@api.example.com",
            "https://api.example.com/?x=1",
            "https://api.example.com/#f",
            "ftp://api.example.com",
            "not a url",
        ] {
            assert!(p.check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_allow_list_admits_only_its_hosts_and_ports() {
        let p = ServerPolicy {
            allow: vec!["127.0.0.1".into(), "api.example.com:6443".into()],
        };
        assert_eq!(p.check("https://127.0.0.1:34567"), Ok(()));
        assert_eq!(p.check("https://API.example.com:6443"), Ok(()));
        assert!(p.check("https://api.example.com:443").is_err());
        assert!(p.check("https://10.0.0.5:6443").is_err());
        // Never plain HTTP, even when listed.
        assert!(p.check("http://127.0.0.1:34567").is_err());
    }
}
