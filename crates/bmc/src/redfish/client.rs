//! The Redfish client and what the BMC told it that saves requests later: the system's path,
//! reset target and allowed values, ETag, virtual-media slot, SecureBoot resource and `$expand`
//! support. Each is found once, so steady-state calls cost one request; the ETag goes with each
//! PATCH of the system as `If-Match`.

use std::sync::Mutex;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::parse::{link, member_links, string_list};
use super::transport::{SERVICE_ROOT, Transport};
use crate::{BmcAddress, BmcError, BmcOptions, Credentials};

/// Most members of one collection fetched or read (CPUs, DIMMs, NICs, drives, media devices).
pub(super) const MAX_MEMBERS: usize = 256;

/// What the BMC told us that saves requests later.
#[derive(Debug, Default, Clone)]
pub(super) struct Learned {
    system_path: Option<String>,
    reset_target: Option<String>,
    reset_allowed: Option<Vec<String>>,
    pub(super) boot_targets_allowed: Option<Vec<String>>,
    pub(super) etag: Option<String>,
    virtual_media: Option<VirtualMediaSlot>,
    expand: Option<bool>,
    /// The system's SecureBoot resource, when it links one.
    secure_boot: Option<String>,
    /// The system's Bios resource, when it links one.
    pub(super) bios: Option<String>,
    /// The system was read at least once, so the fields above reflect it.
    pub(super) system_read: bool,
    /// `Boot.BootSourceOverrideMode` as the system last reported it; `None` when it reports
    /// none (sushy-tools' legacy-BIOS domains), and then the mode is never sent.
    pub(super) boot_mode: Option<String>,
    /// The image of an InsertMedia the BMC refused. Some BMCs keep such an image recorded as
    /// inserted; it must not be taken for a mounted one.
    pub(super) failed_insert: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct VirtualMediaSlot {
    pub(super) path: String,
    pub(super) insert_target: String,
    pub(super) eject_target: String,
}

pub struct RedfishBmc {
    /// HTTP, authentication and the session.
    pub(super) transport: Transport,
    learned: Mutex<Learned>,
}

impl RedfishBmc {
    pub fn new(
        address: &BmcAddress,
        credentials: Credentials,
        options: BmcOptions,
    ) -> Result<RedfishBmc, BmcError> {
        Ok(RedfishBmc {
            transport: Transport::new(address, credentials, options)?,
            learned: Mutex::new(Learned {
                system_path: address.system_path.clone(),
                ..Learned::default()
            }),
        })
    }

    pub(super) fn learned(&self) -> std::sync::MutexGuard<'_, Learned> {
        self.learned.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) async fn system_path(&self) -> Result<String, BmcError> {
        if let Some(p) = self.learned().system_path.clone() {
            return Ok(p);
        }
        // The address named no system: use the only one the BMC has.
        let collection = self.transport.get("/redfish/v1/Systems").await?;
        let members = member_links(&collection);
        match members.as_slice() {
            [only] => {
                self.learned().system_path = Some(only.clone());
                Ok(only.clone())
            }
            _ => Err(BmcError::Protocol {
                bmc: self.transport.endpoint.clone(),
                operation: "GET /redfish/v1/Systems".into(),
                reason: format!(
                    "the address names no system and the BMC has {}; add /redfish/v1/Systems/<id> to the address",
                    members.len()
                ),
            }),
        }
    }

    /// Reads the system and remembers what later calls need from it.
    pub(super) async fn get_system(&self) -> Result<Value, BmcError> {
        let path = self.system_path().await?;
        let answer = self
            .transport
            .request(Method::GET, &path, None, None)
            .await?;
        self.learn_system(&answer.body, &answer.headers);
        Ok(answer.body)
    }

    pub(super) fn learn_system(&self, system: &Value, headers: &HeaderMap) {
        let mut learned = self.learned();
        learned.system_read = true;
        let reset = &system["Actions"]["#ComputerSystem.Reset"];
        if let Some(target) = reset["target"].as_str() {
            learned.reset_target = Some(target.to_string());
        }
        learned.reset_allowed = string_list(&reset["ResetType@Redfish.AllowableValues"]);
        learned.boot_targets_allowed =
            string_list(&system["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"]);
        learned.secure_boot = link(&system["SecureBoot"]);
        learned.bios = link(&system["Bios"]);
        learned.boot_mode = system["Boot"]["BootSourceOverrideMode"]
            .as_str()
            .map(String::from);
        learned.etag = headers
            .get("ETag")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .or_else(|| system["@odata.etag"].as_str().map(String::from));
    }

    /// PATCHes the system with `If-Match` set to the ETag it was last read with; on 412 the
    /// system is read again and the PATCH sent once more.
    pub(super) async fn patch_system(&self, path: &str, body: &Value) -> Result<(), BmcError> {
        let etag = self.learned().etag.clone();
        match self
            .transport
            .request(Method::PATCH, path, Some(body), etag.as_deref())
            .await
        {
            Err(BmcError::Http { status: 412, .. }) => {
                // Someone changed the system since we read it: re-read and try once more.
                self.get_system().await?;
                let etag = self.learned().etag.clone();
                self.transport
                    .request(Method::PATCH, path, Some(body), etag.as_deref())
                    .await?;
            }
            other => {
                other?;
            }
        }
        // The ETag changes with the PATCH; forget it rather than send a stale one.
        self.learned().etag = None;
        Ok(())
    }

    pub(super) async fn reset_info(&self) -> Result<(String, Option<Vec<String>>), BmcError> {
        let known = {
            let l = self.learned();
            l.reset_target.clone().map(|t| (t, l.reset_allowed.clone()))
        };
        if let Some(info) = known {
            return Ok(info);
        }
        let system = self.get_system().await?;
        let l = self.learned();
        let target = match &l.reset_target {
            Some(t) => t.clone(),
            None => {
                let base = system["@odata.id"].as_str().unwrap_or_default();
                format!("{base}/Actions/ComputerSystem.Reset")
            }
        };
        Ok((target, l.reset_allowed.clone()))
    }

    pub(super) async fn virtual_media_slot(&self) -> Result<VirtualMediaSlot, BmcError> {
        if let Some(slot) = self.learned().virtual_media.clone() {
            return Ok(slot);
        }
        let system = self.get_system().await?;
        // sushy-tools and some vendors hang VirtualMedia off the system; most real BMCs
        // put it on the manager that manages the system.
        let collection_path = match link(&system["VirtualMedia"]) {
            Some(p) => p,
            None => {
                let manager = system["Links"]["ManagedBy"]
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(link)
                    .ok_or_else(|| {
                        self.unsupported("virtual media (no VirtualMedia or ManagedBy link)")
                    })?;
                let manager = self.transport.get(&manager).await?;
                link(&manager["VirtualMedia"]).ok_or_else(|| {
                    self.unsupported("virtual media (manager has no VirtualMedia)")
                })?
            }
        };
        let collection = self.transport.get(&collection_path).await?;
        // A BMC has a handful of media devices; more is not a BMC to follow further.
        for member in member_links(&collection).into_iter().take(16) {
            let device = self.transport.get(&member).await?;
            let types = string_list(&device["MediaTypes"]).unwrap_or_default();
            let is_cd = types.iter().any(|t| t == "CD" || t == "DVD")
                || device["Id"]
                    .as_str()
                    .is_some_and(|id| id.eq_ignore_ascii_case("cd"));
            if !is_cd {
                continue;
            }
            let action = |name: &str| {
                device["Actions"][format!("#VirtualMedia.{name}")]["target"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| format!("{member}/Actions/VirtualMedia.{name}"))
            };
            let slot = VirtualMediaSlot {
                insert_target: action("InsertMedia"),
                eject_target: action("EjectMedia"),
                path: member.clone(),
            };
            self.learned().virtual_media = Some(slot.clone());
            return Ok(slot);
        }
        Err(self.unsupported("virtual media (no CD/DVD device)"))
    }

    pub(super) fn unsupported(&self, what: &str) -> BmcError {
        BmcError::Unsupported {
            bmc: self.transport.endpoint.clone(),
            what: what.to_string(),
        }
    }

    /// The SecureBoot resource the system links; Unsupported when it links none.
    pub(super) async fn secure_boot_path(&self) -> Result<String, BmcError> {
        if !self.learned().system_read {
            self.get_system().await?;
        }
        let path = self.learned().secure_boot.clone();
        path.ok_or_else(|| {
            self.unsupported("UEFI Secure Boot (the system links no SecureBoot resource)")
        })
    }

    pub(super) async fn expand_supported(&self) -> bool {
        if let Some(known) = self.learned().expand {
            return known;
        }
        let supported = match self.transport.get(SERVICE_ROOT).await {
            Ok(root) => {
                let expand = &root["ProtocolFeaturesSupported"]["ExpandQuery"];
                expand["Levels"].as_bool() == Some(true)
                    && expand["NoLinks"].as_bool() == Some(true)
                    || expand["ExpandAll"].as_bool() == Some(true)
            }
            Err(_) => false,
        };
        self.learned().expand = Some(supported);
        supported
    }

    /// Members of a collection, fetching each one unless the BMC already expanded them.
    pub(super) async fn members(
        &self,
        collection: &Value,
        warnings: &mut Vec<String>,
        what: &str,
    ) -> Vec<Value> {
        let collection = match link(collection) {
            // A bare link: the collection itself must be fetched.
            Some(path) if collection.get("Members").is_none() => {
                match self.transport.get(&path).await {
                    Ok(c) => c,
                    Err(e) => {
                        warnings.push(format!("{what}: {e}"));
                        return Vec::new();
                    }
                }
            }
            _ => collection.clone(),
        };
        let mut out = Vec::new();
        let members = collection["Members"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        if members.len() > MAX_MEMBERS {
            warnings.push(format!(
                "{what}: the BMC lists {} members; the first {MAX_MEMBERS} were read",
                members.len()
            ));
        }
        for member in members.iter().take(MAX_MEMBERS) {
            if member.as_object().is_some_and(|m| m.len() > 1) {
                out.push(member.clone());
                continue;
            }
            let Some(path) = link(member) else { continue };
            match self.transport.get(&path).await {
                Ok(m) => out.push(m),
                Err(e) => warnings.push(format!("{what} {path}: {e}")),
            }
        }
        out
    }
}
