//! What a HostClaim passes on to whatever serves it (a host bound here, or its mirror in another
//! cluster): its data Secrets, its pause, and its reboot and operation annotations, forwarded
//! once per claim version. Shared by the claim and remote claim controllers; pure.

use std::collections::BTreeSet;

use ferrometal_api::HostClaim;
use ferrometal_api::annotations as ann;
use ferrometal_api::claim::conditions as c;
use kube::ResourceExt;
use serde_json::{Map, Value};

/// Annotations acted on once and then removed from the claim.
const ONE_SHOT: [&str; 2] = [ann::REBOOT, ann::OPERATION];

/// The three data Secrets a claim can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    UserData,
    NetworkData,
    MetaData,
}

impl DataKind {
    pub const ALL: [DataKind; 3] = [
        DataKind::UserData,
        DataKind::NetworkData,
        DataKind::MetaData,
    ];

    pub fn field(self) -> &'static str {
        match self {
            DataKind::UserData => "userData",
            DataKind::NetworkData => "networkData",
            DataKind::MetaData => "metaData",
        }
    }

    /// The copy's name in the host's namespace.
    pub fn copy_name(self, host: &str) -> String {
        let suffix = match self {
            DataKind::UserData => "userdata",
            DataKind::NetworkData => "networkdata",
            DataKind::MetaData => "metadata",
        };
        format!("{host}-{suffix}")
    }

    pub fn failure_reason(self) -> &'static str {
        match self {
            DataKind::UserData => c::USER_DATA_SYNC_FAILURE,
            DataKind::NetworkData => c::NETWORK_DATA_SYNC_FAILURE,
            DataKind::MetaData => c::META_DATA_SYNC_FAILURE,
        }
    }

    /// The Secret the claim names for this kind (its namespace defaults to the claim's).
    pub fn source(self, claim: &HostClaim) -> Option<(String, String)> {
        let r = match self {
            DataKind::UserData => claim.spec.user_data.as_ref(),
            DataKind::NetworkData => claim.spec.network_data.as_ref(),
            DataKind::MetaData => claim.spec.meta_data.as_ref(),
        }?;
        let name = r.name.clone().filter(|n| !n.is_empty())?;
        let ns = r
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| claim.namespace().unwrap_or_default());
        Some((ns, name))
    }
}

pub fn is_paused(claim: &HostClaim) -> bool {
    claim.annotations().contains_key(ann::PAUSED)
}

/// The claim's token for forwarded one-shot annotations.
pub fn forward_token(claim: &HostClaim) -> String {
    format!(
        "{}/{}",
        claim.uid().unwrap_or_default(),
        claim.resource_version().unwrap_or_default()
    )
}

fn keyed_reboots(map: &std::collections::BTreeMap<String, String>) -> BTreeSet<String> {
    map.keys()
        .filter(|k| k.starts_with(ann::REBOOT_PREFIX))
        .cloned()
        .collect()
}

/// The annotations a follower (a claimed host, a remote mirror) keeps to remember what it was
/// given.
#[derive(Clone, Copy)]
pub struct Markers {
    /// The token of the last one-shot annotations forwarded.
    pub forwarded: &'static str,
    /// The keyed reboot annotations mirrored (comma-separated).
    pub mirrored_reboots: &'static str,
}

/// Adds to `patch` what passes a claim's reboot and operation annotations on to its follower:
/// the one-shot ones (bare reboot, operation) once per `token` (`already`: known forwarded
/// though the follower may not show it yet), keyed reboots as long as the claim holds them, and
/// removes the keyed ones the claim dropped (never anybody else's). Returns the one-shot keys
/// that can now be removed from the claim.
pub fn forward_annotations(
    claim_ann: &std::collections::BTreeMap<String, String>,
    follower_ann: &std::collections::BTreeMap<String, String>,
    token: &str,
    already: bool,
    markers: Markers,
    patch: &mut Map<String, Value>,
) -> Vec<String> {
    let already = already || follower_ann.get(markers.forwarded).map(String::as_str) == Some(token);
    let mut passed = Vec::new();
    for key in ONE_SHOT {
        if let Some(value) = claim_ann.get(key) {
            if !already {
                patch.insert(key.into(), value.clone().into());
            }
            passed.push(key.to_string());
        }
    }
    if !passed.is_empty() && !already {
        patch.insert(markers.forwarded.into(), token.into());
    }
    let want = keyed_reboots(claim_ann);
    let mirrored: BTreeSet<String> = follower_ann
        .get(markers.mirrored_reboots)
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    for key in &want {
        if follower_ann.get(key) != claim_ann.get(key) {
            patch.insert(key.clone(), claim_ann[key].clone().into());
        }
    }
    for key in mirrored.difference(&want) {
        if follower_ann.contains_key(key) {
            patch.insert(key.clone(), Value::Null);
        }
    }
    if want != mirrored {
        let list: Vec<_> = want.iter().map(String::as_str).collect();
        patch.insert(
            markers.mirrored_reboots.into(),
            if list.is_empty() {
                Value::Null
            } else {
                list.join(",").into()
            },
        );
    }
    passed
}
