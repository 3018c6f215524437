//! Faults a test injects into one system's resources, and their JSON form.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A fault injected into every request for one system's resources (system,
/// inventory, manager, virtual media).
///
/// JSON form (also the control endpoint's body):
/// `{"kind":"http500"|"hang"|"unauthorized"|"connection_reset"|"latency","latency_ms":N}`,
/// and the hostile BMCs: `{"kind":"foreign_links"|"redirect","origin":"http://host:port"}`,
/// `{"kind":"huge_body"|"long_error","bytes":N}`, `{"kind":"many_members","count":N}`, and
/// `{"kind":"drop_bios_settings"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FaultSpec", into = "FaultSpec")]
pub enum Fault {
    /// Answer 500 with a Redfish error body.
    Http500,
    /// Never answer; the request is held until the client gives up.
    Hang,
    /// Answer 401 whatever the credentials.
    Unauthorized,
    /// Close the TCP connection (with a reset) without any response.
    ConnectionReset,
    /// Answer normally after this delay.
    Latency(Duration),
    /// Every link and action target in the answers names this origin instead of ours.
    ForeignLinks(String),
    /// Answer every request with a 307 to the same path at this origin.
    Redirect(String),
    /// Answer 200 with a JSON body of this many bytes.
    HugeBody(u64),
    /// Answer 500 with a Redfish error whose message is this many bytes long.
    LongError(u64),
    /// Every collection in the answers lists its first member this many times.
    ManyMembers(u64),
    /// Requests are answered normally, but a boot drops the pending BIOS settings instead of
    /// applying them, saying nothing (a BMC that silently ignores a setting).
    DropBiosSettings,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FaultKind {
    #[default]
    Http500,
    Hang,
    Unauthorized,
    ConnectionReset,
    Latency,
    ForeignLinks,
    Redirect,
    HugeBody,
    LongError,
    ManyMembers,
    DropBiosSettings,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultSpec {
    kind: FaultKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
}

impl TryFrom<FaultSpec> for Fault {
    type Error = String;
    fn try_from(spec: FaultSpec) -> Result<Self, String> {
        Ok(match spec.kind {
            FaultKind::Http500 => Fault::Http500,
            FaultKind::Hang => Fault::Hang,
            FaultKind::Unauthorized => Fault::Unauthorized,
            FaultKind::ConnectionReset => Fault::ConnectionReset,
            FaultKind::Latency => match spec.latency_ms {
                Some(ms) => Fault::Latency(Duration::from_millis(ms)),
                None => return Err("fault kind \"latency\" needs \"latency_ms\"".into()),
            },
            FaultKind::ForeignLinks | FaultKind::Redirect => {
                let Some(origin) = spec.origin else {
                    return Err("this fault kind needs \"origin\"".into());
                };
                if matches!(spec.kind, FaultKind::Redirect) {
                    Fault::Redirect(origin)
                } else {
                    Fault::ForeignLinks(origin)
                }
            }
            FaultKind::HugeBody | FaultKind::LongError => match spec.bytes {
                // Bounded so a typo cannot make the emulator allocate the machine away.
                Some(n) if n <= 1 << 30 => {
                    if matches!(spec.kind, FaultKind::HugeBody) {
                        Fault::HugeBody(n)
                    } else {
                        Fault::LongError(n)
                    }
                }
                _ => return Err("this fault kind needs \"bytes\" (at most 1 GiB)".into()),
            },
            FaultKind::DropBiosSettings => Fault::DropBiosSettings,
            FaultKind::ManyMembers => match spec.count {
                Some(n) if n <= 1_000_000 => Fault::ManyMembers(n),
                _ => {
                    return Err(
                        "fault kind \"many_members\" needs \"count\" (at most 1,000,000)".into(),
                    );
                }
            },
        })
    }
}

impl From<Fault> for FaultSpec {
    fn from(fault: Fault) -> Self {
        let spec = |kind| FaultSpec {
            kind,
            ..FaultSpec::default()
        };
        match fault {
            Fault::Http500 => spec(FaultKind::Http500),
            Fault::Hang => spec(FaultKind::Hang),
            Fault::Unauthorized => spec(FaultKind::Unauthorized),
            Fault::ConnectionReset => spec(FaultKind::ConnectionReset),
            Fault::Latency(d) => FaultSpec {
                latency_ms: Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                ..spec(FaultKind::Latency)
            },
            Fault::ForeignLinks(origin) => FaultSpec {
                origin: Some(origin),
                ..spec(FaultKind::ForeignLinks)
            },
            Fault::Redirect(origin) => FaultSpec {
                origin: Some(origin),
                ..spec(FaultKind::Redirect)
            },
            Fault::HugeBody(n) => FaultSpec {
                bytes: Some(n),
                ..spec(FaultKind::HugeBody)
            },
            Fault::LongError(n) => FaultSpec {
                bytes: Some(n),
                ..spec(FaultKind::LongError)
            },
            Fault::ManyMembers(n) => FaultSpec {
                count: Some(n),
                ..spec(FaultKind::ManyMembers)
            },
            Fault::DropBiosSettings => spec(FaultKind::DropBiosSettings),
        }
    }
}
