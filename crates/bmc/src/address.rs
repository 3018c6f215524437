//! BMC addresses as metal3 writes them (`ipmi://…`, `libvirt://…`,
//! `redfish+http://…/redfish/v1/Systems/1`, `idrac-virtualmedia://…`, bare `host:port`), parsed
//! into a typed value.

use std::fmt;

/// The wire protocol spoken to the BMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Ipmi,
    Redfish,
}

/// How Redfish is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Http,
    Https,
}

/// The vendor or boot flavour a scheme selects; it decides how images are booted
/// (PXE, virtual media, UEFI HTTP) and which Ironic driver fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// `ipmi://` or a bare host.
    Ipmi,
    /// `libvirt://`: IPMI to a VirtualBMC in front of a libvirt VM (metal3's development
    /// hosts). Spoken to as IPMI; the host must name its boot MAC, as metal3 requires, since
    /// VirtualBMC addresses are not unique to a machine.
    Libvirt,
    /// `redfish://`: network (PXE/iPXE) boot.
    Redfish,
    /// `redfish-virtualmedia://`: boot from virtual media.
    RedfishVirtualMedia,
    /// `redfish-uefihttp://`: UEFI HTTP boot.
    RedfishUefiHttp,
    /// `idrac-redfish://`.
    IdracRedfish,
    /// `idrac-virtualmedia://`.
    IdracVirtualMedia,
    /// `ilo5-redfish://`.
    Ilo5Redfish,
    /// `ilo5-virtualmedia://`.
    Ilo5VirtualMedia,
}

impl Flavour {
    pub fn protocol(self) -> Protocol {
        match self {
            Flavour::Ipmi | Flavour::Libvirt => Protocol::Ipmi,
            _ => Protocol::Redfish,
        }
    }

    /// Whether images are delivered through the BMC's virtual media.
    pub fn uses_virtual_media(self) -> bool {
        matches!(
            self,
            Flavour::RedfishVirtualMedia | Flavour::IdracVirtualMedia | Flavour::Ilo5VirtualMedia
        )
    }

    /// The scheme without any `+http`/`+https` suffix.
    pub fn scheme(self) -> &'static str {
        match self {
            Flavour::Ipmi => "ipmi",
            Flavour::Libvirt => "libvirt",
            Flavour::Redfish => "redfish",
            Flavour::RedfishVirtualMedia => "redfish-virtualmedia",
            Flavour::RedfishUefiHttp => "redfish-uefihttp",
            Flavour::IdracRedfish => "idrac-redfish",
            Flavour::IdracVirtualMedia => "idrac-virtualmedia",
            Flavour::Ilo5Redfish => "ilo5-redfish",
            Flavour::Ilo5VirtualMedia => "ilo5-virtualmedia",
        }
    }

    const REDFISH: [Flavour; 7] = [
        Flavour::Redfish,
        Flavour::RedfishVirtualMedia,
        Flavour::RedfishUefiHttp,
        Flavour::IdracRedfish,
        Flavour::IdracVirtualMedia,
        Flavour::Ilo5Redfish,
        Flavour::Ilo5VirtualMedia,
    ];
}

/// A parsed BMC address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BmcAddress {
    pub flavour: Flavour,
    /// Only meaningful for Redfish; IPMI is always UDP.
    pub transport: Transport,
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    pub port: u16,
    /// The Redfish system path (e.g. `/redfish/v1/Systems/1`); `None` means "the only system".
    pub system_path: Option<String>,
    /// IPMI only: the session's privilege level from metal3's `?privilegelevel=` query;
    /// `None` is metal3's default, `ADMINISTRATOR`.
    pub privilege_level: Option<&'static str>,
}

/// The privilege levels an IPMI session can ask for (ipmitool's `-L`, Ironic's
/// `ipmi_priv_level`).
pub const IPMI_PRIVILEGE_LEVELS: [&str; 4] = ["ADMINISTRATOR", "OPERATOR", "USER", "CALLBACK"];

/// Why an address could not be parsed. Each message names the offending input, quoted and cut
/// to 200 characters (an address is user input and messages end up in status).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("BMC address is empty")]
    Empty,
    #[error("BMC address {} has unknown scheme {}; supported: {supported}", shown(.address), shown(.scheme))]
    UnknownScheme {
        address: String,
        scheme: String,
        supported: String,
    },
    #[error("BMC address {} has no host", shown(.address))]
    MissingHost { address: String },
    #[error("BMC address {} has an invalid port {}", shown(.address), shown(.port))]
    InvalidPort { address: String, port: String },
    #[error("BMC address {} is not a valid URL: {}", shown(.address), cut(.reason))]
    Invalid { address: String, reason: String },
}

/// `text` quoted, at most 200 characters of it.
fn shown(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// A reason (which may quote parts of the input) cut to 400 characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(400) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

pub const IPMI_DEFAULT_PORT: u16 = 623;

impl BmcAddress {
    pub fn parse(input: &str) -> Result<BmcAddress, AddressError> {
        let parsed = Self::parse_parts(input)?;
        // As Go's url.Parse (metal3) refuses control characters; whitespace inside a host or
        // path is never meant, and trimming it in one place but not another made a printed
        // address parse differently (found by fuzz/ bmc_address). Checked after parsing, so
        // an address with credentials in it was already refused without echoing them.
        let path = parsed.system_path.as_deref().unwrap_or_default();
        if let Some(c) = parsed
            .host
            .chars()
            .chain(path.chars())
            .find(|c| c.is_control() || c.is_whitespace())
        {
            return Err(AddressError::Invalid {
                address: input.trim().to_string(),
                reason: format!("it holds {c:?}: no whitespace or control characters"),
            });
        }
        Ok(parsed)
    }

    fn parse_parts(input: &str) -> Result<BmcAddress, AddressError> {
        let address = input.trim();
        if address.is_empty() {
            return Err(AddressError::Empty);
        }
        let Some((scheme, rest)) = address.split_once("://") else {
            // metal3 treats a scheme-less address as IPMI.
            return parse_bare_ipmi(address);
        };
        let scheme_lc = scheme.to_ascii_lowercase();
        if scheme_lc == "ipmi" || scheme_lc == "libvirt" {
            let (host, port, path) = split_authority(address, rest)?;
            if !path.is_empty() && path != "/" {
                return Err(AddressError::Invalid {
                    address: address.to_string(),
                    reason: format!("IPMI addresses take no path, got {path:?}"),
                });
            }
            return Ok(BmcAddress {
                flavour: if scheme_lc == "ipmi" {
                    Flavour::Ipmi
                } else {
                    Flavour::Libvirt
                },
                transport: Transport::Https,
                host,
                port: port.unwrap_or(IPMI_DEFAULT_PORT),
                system_path: None,
                privilege_level: privilege_level(address, rest)?,
            });
        }
        let (base, transport) = match scheme_lc.split_once('+') {
            Some((base, "http")) => (base.to_string(), Transport::Http),
            Some((base, "https")) => (base.to_string(), Transport::Https),
            Some(_) => return Err(unknown_scheme(address, scheme)),
            None => (scheme_lc.clone(), Transport::Https),
        };
        let flavour = Flavour::REDFISH
            .into_iter()
            .find(|f| f.scheme() == base)
            .ok_or_else(|| unknown_scheme(address, scheme))?;
        let (host, port, path) = split_authority(address, rest)?;
        let port = port.unwrap_or(match transport {
            Transport::Http => 80,
            Transport::Https => 443,
        });
        let path = path.trim_end_matches('/');
        let system_path = if path.is_empty() {
            None
        } else {
            Some(path.to_string())
        };
        Ok(BmcAddress {
            flavour,
            transport,
            host,
            port,
            system_path,
            privilege_level: None,
        })
    }

    pub fn protocol(&self) -> Protocol {
        self.flavour.protocol()
    }

    /// `host:port`, with IPv6 literals bracketed; safe for logs (no credentials).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The Redfish base URL, e.g. `https://10.0.0.1:443`.
    pub fn base_url(&self) -> String {
        let scheme = match self.transport {
            Transport::Http => "http",
            Transport::Https => "https",
        };
        format!("{scheme}://{}", self.authority())
    }
}

impl fmt::Display for BmcAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.flavour {
            Flavour::Ipmi | Flavour::Libvirt => {
                write!(f, "{}://{}", self.flavour.scheme(), self.authority())?;
                match self.privilege_level {
                    Some(level) => write!(f, "/?privilegelevel={level}"),
                    None => Ok(()),
                }
            }
            flavour => {
                let suffix = match self.transport {
                    Transport::Http => "+http",
                    Transport::Https => "",
                };
                write!(
                    f,
                    "{}{suffix}://{}{}",
                    flavour.scheme(),
                    self.authority(),
                    self.system_path.as_deref().unwrap_or("")
                )
            }
        }
    }
}

fn unknown_scheme(address: &str, scheme: &str) -> AddressError {
    let mut supported = vec!["ipmi".to_string(), "libvirt".to_string()];
    supported.extend(
        Flavour::REDFISH
            .iter()
            .map(|f| format!("{}[+http|+https]", f.scheme())),
    );
    AddressError::UnknownScheme {
        address: address.to_string(),
        scheme: scheme.to_string(),
        supported: supported.join(", "),
    }
}

fn parse_bare_ipmi(address: &str) -> Result<BmcAddress, AddressError> {
    if address.contains('/') || address.contains('@') || address.contains(' ') {
        return Err(AddressError::Invalid {
            address: address.to_string(),
            reason: "expected scheme://host[:port] or a bare host[:port]".into(),
        });
    }
    // An unbracketed IPv6 literal has several colons and no port.
    if !address.starts_with('[') && address.matches(':').count() > 1 {
        let host = address.to_string();
        validate_host(address, &host)?;
        return Ok(BmcAddress {
            flavour: Flavour::Ipmi,
            transport: Transport::Https,
            host,
            port: IPMI_DEFAULT_PORT,
            system_path: None,
            privilege_level: None,
        });
    }
    let (host, port, _) = split_authority(address, address)?;
    Ok(BmcAddress {
        flavour: Flavour::Ipmi,
        transport: Transport::Https,
        host,
        port: port.unwrap_or(IPMI_DEFAULT_PORT),
        system_path: None,
        privilege_level: None,
    })
}

/// metal3's `?privilegelevel=` on an IPMI address (its other query keys are ignored, as
/// metal3 ignores them). A level IPMI does not have is refused here rather than by the BMC.
fn privilege_level(address: &str, rest: &str) -> Result<Option<&'static str>, AddressError> {
    let Some((_, query)) = rest.split_once('?') else {
        return Ok(None);
    };
    let query = query.split('#').next().unwrap_or_default();
    let Some(value) = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(k, v)| (k == "privilegelevel").then_some(v))
    else {
        return Ok(None);
    };
    IPMI_PRIVILEGE_LEVELS
        .into_iter()
        .find(|l| l.eq_ignore_ascii_case(value))
        .map(Some)
        .ok_or_else(|| AddressError::Invalid {
            address: address.to_string(),
            reason: format!(
                "privilegelevel {:?} is not one of {}",
                cut(value),
                IPMI_PRIVILEGE_LEVELS.join(", ")
            ),
        })
}

/// Splits `host[:port][/path]` into its parts; `address` is the whole input, for errors.
fn split_authority(
    address: &str,
    rest: &str,
) -> Result<(String, Option<u16>, String), AddressError> {
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if let Some((_, after)) = authority.rsplit_once('@') {
        // Echo the address without the user-info so an inline password stays out of errors.
        let redacted = address.replacen(authority, &format!("***@{after}"), 1);
        return Err(AddressError::Invalid {
            address: redacted,
            reason: "credentials belong in the credentials Secret, not in the address".into(),
        });
    }
    let (host, port) = if let Some(stripped) = authority.strip_prefix('[') {
        let Some(end) = stripped.find(']') else {
            return Err(AddressError::Invalid {
                address: address.to_string(),
                reason: "unterminated IPv6 literal".into(),
            });
        };
        let host = &stripped[..end];
        let after = &stripped[end + 1..];
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(AddressError::Invalid {
                address: address.to_string(),
                reason: format!("{host:?} is not an IPv6 address"),
            });
        }
        let port = match after {
            "" => None,
            p if p.starts_with(':') => Some(&p[1..]),
            other => {
                return Err(AddressError::Invalid {
                    address: address.to_string(),
                    reason: format!("unexpected {other:?} after the IPv6 literal"),
                });
            }
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(AddressError::MissingHost {
            address: address.to_string(),
        });
    }
    validate_host(address, &host)?;
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                return Err(AddressError::InvalidPort {
                    address: address.to_string(),
                    port: p.to_string(),
                });
            }
        },
    };
    Ok((
        host,
        port,
        path.split(['?', '#']).next().unwrap_or("").to_string(),
    ))
}

fn validate_host(address: &str, host: &str) -> Result<(), AddressError> {
    if host.contains(':') {
        return host
            .parse::<std::net::Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| AddressError::Invalid {
                address: address.to_string(),
                reason: format!("{host:?} is not a valid host"),
            });
    }
    let ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(AddressError::Invalid {
            address: address.to_string(),
            reason: format!("{host:?} is not a valid host"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzz/ (bmc_address): an address with control characters and inner spaces
    /// printed as one that parsed differently.
    #[test]
    fn control_characters_and_inner_whitespace_are_refused() {
        for input in [
            "idrac-virtualmedia://hosm/re\0\u{1}\u{12}\0\0\t\0\0@@@@.:/       / ",
            "redfish://10.0.0.1/redfish/v1/Systems/a b",
            "ipmi://10.0.0.1\n",
        ] {
            let trimmed = input.trim();
            if trimmed.chars().any(|c| c.is_control() || c.is_whitespace()) {
                let err = BmcAddress::parse(input).unwrap_err().to_string();
                assert!(err.contains("no whitespace or control characters"), "{err}");
            } else {
                BmcAddress::parse(input).unwrap();
            }
        }
    }

    /// Found by fuzz/ (bmc_address): the message quoted the whole address, escaped.
    #[test]
    fn errors_quote_a_bounded_part_of_the_address() {
        for input in [
            format!("{}A11111", "\u{13}".repeat(5000)),
            format!("redfish://[{}", "x".repeat(100_000)),
            format!("nope{}://host", "s".repeat(100_000)),
        ] {
            let err = BmcAddress::parse(&input).unwrap_err().to_string();
            assert!(err.len() < 5000, "{} bytes: {err:.200}", err.len());
        }
    }

    fn ok(
        input: &str,
        flavour: Flavour,
        transport: Transport,
        host: &str,
        port: u16,
        path: Option<&str>,
    ) {
        let parsed = BmcAddress::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(parsed.flavour, flavour, "{input}");
        assert_eq!(parsed.transport, transport, "{input}");
        assert_eq!(parsed.host, host, "{input}");
        assert_eq!(parsed.port, port, "{input}");
        assert_eq!(parsed.system_path.as_deref(), path, "{input}");
    }

    #[test]
    fn parses_every_scheme() {
        use Flavour::*;
        use Transport::*;
        let sys = Some("/redfish/v1/Systems/1");
        ok("ipmi://10.0.0.1", Ipmi, Https, "10.0.0.1", 623, None);
        ok("ipmi://10.0.0.1:6230", Ipmi, Https, "10.0.0.1", 6230, None);
        ok(
            "IPMI://bmc.example.com",
            Ipmi,
            Https,
            "bmc.example.com",
            623,
            None,
        );
        ok("ipmi://[fd00::1]:624", Ipmi, Https, "fd00::1", 624, None);
        ok("10.0.0.2", Ipmi, Https, "10.0.0.2", 623, None);
        ok("10.0.0.2:1623", Ipmi, Https, "10.0.0.2", 1623, None);
        ok("bmc-1.rack2", Ipmi, Https, "bmc-1.rack2", 623, None);
        ok("[fd00::2]:700", Ipmi, Https, "fd00::2", 700, None);
        ok("fd00::3", Ipmi, Https, "fd00::3", 623, None);
        ok(
            "libvirt://192.168.122.1:6233/?abc=def",
            Libvirt,
            Https,
            "192.168.122.1",
            6233,
            None,
        );
        ok("LIBVIRT://vbmc", Libvirt, Https, "vbmc", 623, None);
        ok(
            "redfish://10.0.0.1/redfish/v1/Systems/1",
            Redfish,
            Https,
            "10.0.0.1",
            443,
            sys,
        );
        ok(
            "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
            Redfish,
            Http,
            "127.0.0.1",
            8000,
            sys,
        );
        ok(
            "redfish+https://h:8443/redfish/v1/Systems/1/",
            Redfish,
            Https,
            "h",
            8443,
            sys,
        );
        ok(
            "redfish://[::1]:8000/redfish/v1/Systems/1",
            Redfish,
            Https,
            "::1",
            8000,
            sys,
        );
        ok("redfish://10.0.0.1", Redfish, Https, "10.0.0.1", 443, None);
        ok(
            "redfish-virtualmedia://h/redfish/v1/Systems/1",
            RedfishVirtualMedia,
            Https,
            "h",
            443,
            sys,
        );
        ok(
            "redfish-virtualmedia+http://h:80/redfish/v1/Systems/1",
            RedfishVirtualMedia,
            Http,
            "h",
            80,
            sys,
        );
        ok(
            "redfish-uefihttp+https://h/redfish/v1/Systems/1",
            RedfishUefiHttp,
            Https,
            "h",
            443,
            sys,
        );
        ok(
            "idrac-redfish://h/redfish/v1/Systems/System.Embedded.1",
            IdracRedfish,
            Https,
            "h",
            443,
            Some("/redfish/v1/Systems/System.Embedded.1"),
        );
        ok(
            "idrac-virtualmedia+http://h/redfish/v1/Systems/1",
            IdracVirtualMedia,
            Http,
            "h",
            80,
            sys,
        );
        ok(
            "ilo5-redfish://h/redfish/v1/Systems/1",
            Ilo5Redfish,
            Https,
            "h",
            443,
            sys,
        );
        ok(
            "ilo5-virtualmedia://h/redfish/v1/Systems/1",
            Ilo5VirtualMedia,
            Https,
            "h",
            443,
            sys,
        );
    }

    #[test]
    fn rejects_bad_input_naming_it() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("   ", "empty"),
            ("vbmc://h", "unknown scheme \"vbmc\""),
            (
                "ipmi://h/?privilegelevel=ROOT",
                "privilegelevel \"ROOT\" is not one of ADMINISTRATOR, OPERATOR, USER, CALLBACK",
            ),
            ("libvirt://h?privilegelevel=", "privilegelevel \"\""),
            ("redfish+ftp://h/x", "unknown scheme \"redfish+ftp\""),
            ("idrac://h", "unknown scheme \"idrac\""),
            ("ipmi://", "has no host"),
            ("redfish://:443/redfish/v1/Systems/1", "has no host"),
            ("ipmi://h:notaport", "invalid port \"notaport\""),
            ("ipmi://h:70000", "invalid port \"70000\""),
            ("ipmi://h:0", "invalid port \"0\""),
            ("redfish://[::1/redfish", "unterminated IPv6"),
            ("redfish://[zz::1]:1/x", "not an IPv6 address"),
            ("ipmi://h/some/path", "take no path"),
            (
                "redfish://admin:pw@h/x",
                "credentials belong in the credentials Secret",
            ),
            ("not a url at all", "expected scheme"),
            ("h%41st", "not a valid host"),
        ];
        for (input, expect) in cases {
            let err = BmcAddress::parse(input).expect_err(input).to_string();
            assert!(err.contains(expect), "{input:?}: {err:?} lacks {expect:?}");
            if !input.trim().is_empty() && !input.contains("pw@") {
                assert!(
                    err.contains(input.trim()),
                    "{input:?}: error {err:?} must name the input"
                );
            }
        }
        // The error must never echo a password embedded in the address.
        let err = BmcAddress::parse("redfish://admin:s3cret@h/x")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cret"), "{err}");
        assert!(err.contains("redfish://***@h/x"), "{err}");
    }

    /// metal3's `?privilegelevel=` (any case; other query keys ignored, as metal3 does).
    #[test]
    fn ipmi_privilege_levels() {
        for (input, level) in [
            ("ipmi://h", None),
            ("ipmi://h?privilegelevel=operator", Some("OPERATOR")),
            ("ipmi://h:6230/?abc=def&privilegelevel=USER", Some("USER")),
            ("libvirt://h/?privilegelevel=CALLBACK#x", Some("CALLBACK")),
            ("redfish://h/redfish/v1/Systems/1?privilegelevel=USER", None),
        ] {
            let parsed = BmcAddress::parse(input).unwrap();
            assert_eq!(parsed.privilege_level, level, "{input}");
        }
    }

    #[test]
    fn display_round_trips() {
        for input in [
            "ipmi://10.0.0.1:623",
            "ipmi://[fd00::1]:623",
            "ipmi://10.0.0.1:623/?privilegelevel=OPERATOR",
            "libvirt://192.168.122.1:6233",
            "libvirt://192.168.122.1:6233/?privilegelevel=USER",
            "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
            "idrac-virtualmedia://h:443/redfish/v1/Systems/1",
        ] {
            let parsed = BmcAddress::parse(input).unwrap();
            assert_eq!(parsed.to_string(), input);
            assert_eq!(BmcAddress::parse(&parsed.to_string()).unwrap(), parsed);
        }
        assert_eq!(
            BmcAddress::parse("redfish+http://h:81/redfish/v1/Systems/1")
                .unwrap()
                .base_url(),
            "http://h:81"
        );
    }
}
