//! Redfish client on reqwest + rustls.
//!
//! One process-wide HTTP client per TLS policy: reqwest pools connections per host, so each
//! BMC gets its own small connection set without building a TLS stack per BMC. What the BMC
//! told us once (reset target and allowed values, ETag, virtual-media location, `$expand`
//! support) is remembered so steady-state calls cost one request.

use std::sync::{Mutex, OnceLock};

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    AuthMode, Bmc, BmcAddress, BmcError, BmcOptions, BootDevice, BootMode, BootOverride, Cpu,
    Credentials, Disk, Inventory, MediaStatus, MemoryModule, Nic, PowerAction, PowerState,
    Protocol, SystemIdentity,
};

const SERVICE_ROOT: &str = "/redfish/v1";
/// Largest answer body read from a BMC; a `$expand`ed system of a big server is well under 1 MiB.
const MAX_BODY: usize = 8 << 20;
/// Most members of one collection fetched or read (CPUs, DIMMs, NICs, drives, media devices).
const MAX_MEMBERS: usize = 256;
/// Most inventory warnings kept, and the longest text of anything the BMC sent that we keep.
const MAX_WARNINGS: usize = 32;
const MAX_TEXT: usize = 300;

fn shared_client(verify: bool) -> Result<reqwest::Client, BmcError> {
    static VERIFYING: OnceLock<reqwest::Client> = OnceLock::new();
    static NON_VERIFYING: OnceLock<reqwest::Client> = OnceLock::new();
    let cell = if verify { &VERIFYING } else { &NON_VERIFYING };
    if let Some(client) = cell.get() {
        return Ok(client.clone());
    }
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(!verify)
        .pool_max_idle_per_host(2)
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        // A redirect could send the next request (and its credentials) to another host:
        // never followed, reported instead.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("ferrometal/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| BmcError::Unreachable {
            bmc: "-".into(),
            reason: format!("cannot build the HTTP client: {}", e.without_url()),
        })?;
    Ok(cell.get_or_init(|| client).clone())
}

/// What the BMC told us that saves requests later.
#[derive(Debug, Default, Clone)]
struct Learned {
    system_path: Option<String>,
    reset_target: Option<String>,
    reset_allowed: Option<Vec<String>>,
    boot_targets_allowed: Option<Vec<String>>,
    etag: Option<String>,
    virtual_media: Option<VirtualMediaSlot>,
    expand: Option<bool>,
    /// The system's SecureBoot resource, when it links one.
    secure_boot: Option<String>,
    /// The system was read at least once, so the fields above reflect it.
    system_read: bool,
}

#[derive(Debug, Clone)]
struct VirtualMediaSlot {
    path: String,
    insert_target: String,
    eject_target: String,
}

#[derive(Debug, Clone)]
struct Session {
    token: String,
    location: Option<String>,
}

pub struct RedfishBmc {
    http: reqwest::Client,
    /// The BMC's origin (scheme, host, port): every request goes there and nowhere else.
    base: reqwest::Url,
    endpoint: String,
    credentials: Credentials,
    options: BmcOptions,
    learned: Mutex<Learned>,
    session: tokio::sync::Mutex<Option<Session>>,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl RedfishBmc {
    pub fn new(
        address: &BmcAddress,
        credentials: Credentials,
        options: BmcOptions,
    ) -> Result<RedfishBmc, BmcError> {
        let http = shared_client(!options.disable_certificate_verification)?;
        let base = reqwest::Url::parse(&address.base_url()).map_err(|e| BmcError::Unreachable {
            bmc: address.authority(),
            reason: format!("the address does not make a URL: {e}"),
        })?;
        Ok(RedfishBmc {
            http,
            base,
            endpoint: address.authority(),
            credentials,
            learned: Mutex::new(Learned {
                system_path: address.system_path.clone(),
                ..Learned::default()
            }),
            options,
            session: tokio::sync::Mutex::new(None),
        })
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, Learned> {
        self.learned.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves a path, link, action target or Location the BMC gave against its own origin.
    /// One that names another scheme, host or port is refused: a hostile or misconfigured BMC
    /// must not be able to send our requests, and the credentials on them, anywhere else.
    fn url(&self, method: &Method, path: &str) -> Result<reqwest::Url, BmcError> {
        let refused = |reason: String| BmcError::Protocol {
            bmc: self.endpoint.clone(),
            operation: Self::operation(method, path),
            reason,
        };
        let url = self
            .base
            .join(path)
            .map_err(|e| refused(format!("the link is not a URL: {e}")))?;
        if url.origin() != self.base.origin() {
            return Err(refused(format!(
                "the link points at {}, outside the BMC's origin {}; refused",
                excerpt(&url.origin().ascii_serialization()),
                self.base.origin().ascii_serialization()
            )));
        }
        // reqwest would send a link's user:password in place of ours.
        let mut url = url;
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Ok(url)
    }

    fn operation(method: &Method, path: &str) -> String {
        format!("{method} {}", excerpt(path))
    }

    /// Sends one request with authentication, mapping every failure to a typed error.
    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, BmcError> {
        let mut retried_login = false;
        loop {
            let token = match self.options.auth {
                AuthMode::Session if path != SERVICE_ROOT => Some(self.session_token().await?),
                _ => None,
            };
            let answer = self
                .send_once(&method, path, body, if_match, token.as_deref())
                .await?;
            if answer.status == StatusCode::UNAUTHORIZED && token.is_some() && !retried_login {
                // The session expired or the BMC was reset: log in again once.
                *self.session.lock().await = None;
                retried_login = true;
                continue;
            }
            return self.check(answer, &method, path);
        }
    }

    async fn send_once(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        token: Option<&str>,
    ) -> Result<Answer, BmcError> {
        if let Some(observer) = &self.options.observer {
            observer.on_request(Protocol::Redfish, method_name(method));
        }
        let url = self.url(method, path)?;
        let mut req = self
            .http
            .request(method.clone(), url)
            .timeout(self.options.timeout)
            .header("Accept", "application/json");
        if path != SERVICE_ROOT || token.is_some() {
            req = match token {
                Some(t) => req.header("X-Auth-Token", t),
                None => req.basic_auth(
                    &self.credentials.username,
                    Some(self.credentials.password()),
                ),
            };
        }
        if let Some(etag) = if_match {
            req = req.header("If-Match", etag);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let response = req
            .send()
            .await
            .map_err(|e| self.transport_error(e, method, path))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = self.read_body(response, method, path).await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                // Error pages are often HTML; keep a short excerpt as a string.
                Err(_) if !status.is_success() => {
                    Value::String(String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into())
                }
                Err(e) => {
                    return Err(BmcError::Protocol {
                        bmc: self.endpoint.clone(),
                        operation: Self::operation(method, path),
                        reason: format!("body is not JSON: {e}"),
                    });
                }
            }
        };
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// The answer's body, refused past [`MAX_BODY`] before more than that is read.
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        method: &Method,
        path: &str,
    ) -> Result<Vec<u8>, BmcError> {
        let too_large = |size: String| BmcError::Protocol {
            bmc: self.endpoint.clone(),
            operation: Self::operation(method, path),
            reason: format!(
                "the answer body ({size}) is over the limit of {} MiB",
                MAX_BODY >> 20
            ),
        };
        if let Some(length) = response.content_length()
            && length > MAX_BODY as u64
        {
            return Err(too_large(format!("{length} bytes")));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(e, method, path))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(too_large("unbounded".into()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn check(&self, answer: Answer, method: &Method, path: &str) -> Result<Answer, BmcError> {
        if answer.status.is_success() {
            return Ok(answer);
        }
        if answer.status.is_redirection() {
            let location = answer
                .headers
                .get("Location")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("(no Location)");
            return Err(BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: Self::operation(method, path),
                reason: format!(
                    "it answered HTTP {} redirecting to {}; redirects are not followed (give the BMC's final address)",
                    answer.status.as_u16(),
                    excerpt(location)
                ),
            });
        }
        if answer.status == StatusCode::UNAUTHORIZED {
            return Err(BmcError::Unauthorized {
                bmc: self.endpoint.clone(),
            });
        }
        Err(BmcError::Http {
            bmc: self.endpoint.clone(),
            status: answer.status.as_u16(),
            operation: Self::operation(method, path),
            message: self.scrub(&redfish_message(&answer.body)),
        })
    }

    /// Belt and braces: a BMC could echo the password back in an error body.
    fn scrub(&self, text: &str) -> String {
        let password = self.credentials.password();
        if password.is_empty() {
            text.to_string()
        } else {
            text.replace(password, "<redacted>")
        }
    }

    fn transport_error(&self, e: reqwest::Error, method: &Method, path: &str) -> BmcError {
        let operation = Self::operation(method, path);
        if e.is_timeout() {
            BmcError::Timeout {
                bmc: self.endpoint.clone(),
                operation,
                timeout: self.options.timeout,
            }
        } else if e.is_connect() {
            let chain = self.scrub(&error_chain(&e));
            let reason = if chain.contains("certificate") {
                format!(
                    "its TLS certificate is not accepted ({chain}); give a certificate the system trusts or set disableCertificateVerification: true"
                )
            } else {
                chain
            };
            BmcError::Unreachable {
                bmc: self.endpoint.clone(),
                reason: excerpt(&reason),
            }
        } else {
            BmcError::Disconnected {
                bmc: self.endpoint.clone(),
                operation,
            }
        }
    }

    async fn session_token(&self) -> Result<String, BmcError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.token.clone());
        }
        let path = "/redfish/v1/SessionService/Sessions";
        let body =
            json!({"UserName": self.credentials.username, "Password": self.credentials.password()});
        let answer = self
            .send_once(&Method::POST, path, Some(&body), None, None)
            .await?;
        let answer = self.check(answer, &Method::POST, path)?;
        let token = answer
            .headers
            .get("X-Auth-Token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: format!("POST {path}"),
                reason: "no X-Auth-Token in the session answer".into(),
            })?
            .to_string();
        let location = answer
            .headers
            .get("Location")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .or_else(|| {
                answer
                    .body
                    .get("@odata.id")
                    .and_then(Value::as_str)
                    .map(String::from)
            });
        *guard = Some(Session {
            token: token.clone(),
            location,
        });
        Ok(token)
    }

    async fn get(&self, path: &str) -> Result<Value, BmcError> {
        Ok(self.request(Method::GET, path, None, None).await?.body)
    }

    async fn system_path(&self) -> Result<String, BmcError> {
        if let Some(p) = self.learned().system_path.clone() {
            return Ok(p);
        }
        // The address named no system: use the only one the BMC has.
        let collection = self.get("/redfish/v1/Systems").await?;
        let members = member_links(&collection);
        match members.as_slice() {
            [only] => {
                self.learned().system_path = Some(only.clone());
                Ok(only.clone())
            }
            _ => Err(BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: "GET /redfish/v1/Systems".into(),
                reason: format!(
                    "the address names no system and the BMC has {}; add /redfish/v1/Systems/<id> to the address",
                    members.len()
                ),
            }),
        }
    }

    /// Reads the system and remembers what later calls need from it.
    async fn get_system(&self) -> Result<Value, BmcError> {
        let path = self.system_path().await?;
        let answer = self.request(Method::GET, &path, None, None).await?;
        self.learn_system(&answer.body, &answer.headers);
        Ok(answer.body)
    }

    fn learn_system(&self, system: &Value, headers: &HeaderMap) {
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
        learned.etag = headers
            .get("ETag")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .or_else(|| system["@odata.etag"].as_str().map(String::from));
    }

    async fn reset_info(&self) -> Result<(String, Option<Vec<String>>), BmcError> {
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

    async fn virtual_media_slot(&self) -> Result<VirtualMediaSlot, BmcError> {
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
                let manager = self.get(&manager).await?;
                link(&manager["VirtualMedia"]).ok_or_else(|| {
                    self.unsupported("virtual media (manager has no VirtualMedia)")
                })?
            }
        };
        let collection = self.get(&collection_path).await?;
        // A BMC has a handful of media devices; more is not a BMC to follow further.
        for member in member_links(&collection).into_iter().take(16) {
            let device = self.get(&member).await?;
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

    fn unsupported(&self, what: &str) -> BmcError {
        BmcError::Unsupported {
            bmc: self.endpoint.clone(),
            what: what.to_string(),
        }
    }

    /// The SecureBoot resource the system links; Unsupported when it links none.
    async fn secure_boot_path(&self) -> Result<String, BmcError> {
        if !self.learned().system_read {
            self.get_system().await?;
        }
        let path = self.learned().secure_boot.clone();
        path.ok_or_else(|| {
            self.unsupported("UEFI Secure Boot (the system links no SecureBoot resource)")
        })
    }

    async fn expand_supported(&self) -> bool {
        if let Some(known) = self.learned().expand {
            return known;
        }
        let supported = match self.get(SERVICE_ROOT).await {
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
    async fn members(
        &self,
        collection: &Value,
        warnings: &mut Vec<String>,
        what: &str,
    ) -> Vec<Value> {
        let collection = match link(collection) {
            // A bare link: the collection itself must be fetched.
            Some(path) if collection.get("Members").is_none() => match self.get(&path).await {
                Ok(c) => c,
                Err(e) => {
                    warnings.push(format!("{what}: {e}"));
                    return Vec::new();
                }
            },
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
            match self.get(&path).await {
                Ok(m) => out.push(m),
                Err(e) => warnings.push(format!("{what} {path}: {e}")),
            }
        }
        out
    }
}

#[async_trait::async_trait]
impl Bmc for RedfishBmc {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn power_state(&self) -> Result<PowerState, BmcError> {
        let system = self.get_system().await?;
        Ok(PowerState::parse_lenient(
            system["PowerState"].as_str().unwrap_or_default(),
        ))
    }

    async fn power(&self, action: PowerAction) -> Result<(), BmcError> {
        let (target, allowed) = self.reset_info().await?;
        let reset_type = choose_reset_type(action, allowed.as_deref()).ok_or_else(|| {
            self.unsupported(&format!(
                "power action {} (allowed reset types: {})",
                action.as_str(),
                allowed.unwrap_or_default().join(", ")
            ))
        })?;
        self.request(
            Method::POST,
            &target,
            Some(&json!({"ResetType": reset_type})),
            None,
        )
        .await?;
        Ok(())
    }

    async fn set_boot(&self, boot: BootOverride) -> Result<(), BmcError> {
        let path = self.system_path().await?;
        if !self.learned().system_read {
            self.get_system().await?;
        }
        let target = boot.device.redfish_name();
        let allowed = self.learned().boot_targets_allowed.clone();
        if let Some(allowed) = allowed.filter(|a| !a.iter().any(|a| a == target)) {
            return Err(self.unsupported(&format!(
                "boot device {target} (allowed: {})",
                allowed.join(", ")
            )));
        }
        let mut settings = json!({
            "BootSourceOverrideTarget": target,
            "BootSourceOverrideEnabled": if boot.once { "Once" } else { "Continuous" },
        });
        if let Some(mode) = boot.mode {
            settings["BootSourceOverrideMode"] = json!(match mode {
                BootMode::Uefi => "UEFI",
                BootMode::Legacy => "Legacy",
            });
        }
        let body = json!({ "Boot": settings });
        let etag = self.learned().etag.clone();
        match self
            .request(Method::PATCH, &path, Some(&body), etag.as_deref())
            .await
        {
            Err(BmcError::Http { status: 412, .. }) => {
                // Someone changed the system since we read it: re-read and try once more.
                self.get_system().await?;
                let etag = self.learned().etag.clone();
                self.request(Method::PATCH, &path, Some(&body), etag.as_deref())
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

    async fn insert_media(&self, image_url: &str) -> Result<(), BmcError> {
        let slot = self.virtual_media_slot().await?;
        let current = self.get(&slot.path).await?;
        if current["Inserted"].as_bool() == Some(true) {
            if current["Image"].as_str() == Some(image_url) {
                return Ok(());
            }
            // Most BMCs refuse to insert over a mounted image.
            self.request(Method::POST, &slot.eject_target, Some(&json!({})), None)
                .await?;
        }
        let body = json!({"Image": image_url, "Inserted": true, "WriteProtected": true});
        self.request(Method::POST, &slot.insert_target, Some(&body), None)
            .await?;
        Ok(())
    }

    async fn eject_media(&self) -> Result<(), BmcError> {
        let slot = self.virtual_media_slot().await?;
        let current = self.get(&slot.path).await?;
        if current["Inserted"].as_bool() == Some(false) {
            return Ok(());
        }
        self.request(Method::POST, &slot.eject_target, Some(&json!({})), None)
            .await?;
        Ok(())
    }

    async fn media_status(&self) -> Result<MediaStatus, BmcError> {
        let slot = self.virtual_media_slot().await?;
        let current = self.get(&slot.path).await?;
        let image = current["Image"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from);
        Ok(MediaStatus {
            inserted: current["Inserted"].as_bool().unwrap_or(image.is_some()),
            image,
        })
    }

    async fn identity(&self) -> Result<SystemIdentity, BmcError> {
        Ok(identity_of(&self.get_system().await?))
    }

    async fn boot_override(&self) -> Result<Option<BootOverride>, BmcError> {
        let system = self.get_system().await?;
        let boot = &system["Boot"];
        let enabled = boot["BootSourceOverrideEnabled"]
            .as_str()
            .unwrap_or("Disabled");
        let target = boot["BootSourceOverrideTarget"].as_str().unwrap_or("None");
        if enabled == "Disabled" {
            return Ok(None);
        }
        let device = match target {
            "Pxe" => BootDevice::Pxe,
            "Hdd" => BootDevice::Hdd,
            "Cd" => BootDevice::Cd,
            "BiosSetup" => BootDevice::BiosSetup,
            "UefiHttp" => BootDevice::UefiHttp,
            // "None" and targets we never set: nothing of ours to put back.
            _ => return Ok(None),
        };
        let mode = match boot["BootSourceOverrideMode"].as_str() {
            Some("UEFI") => Some(BootMode::Uefi),
            Some("Legacy") => Some(BootMode::Legacy),
            _ => None,
        };
        Ok(Some(BootOverride {
            device,
            once: enabled == "Once",
            mode,
        }))
    }

    async fn clear_boot(&self) -> Result<(), BmcError> {
        let path = self.system_path().await?;
        let body = json!({"Boot": {"BootSourceOverrideEnabled": "Disabled"}});
        self.request(Method::PATCH, &path, Some(&body), None)
            .await?;
        self.learned().etag = None;
        Ok(())
    }

    async fn secure_boot(&self) -> Result<bool, BmcError> {
        let path = self.secure_boot_path().await?;
        let body = self.get(&path).await?;
        body["SecureBootEnable"]
            .as_bool()
            .ok_or_else(|| BmcError::Protocol {
                bmc: self.endpoint.clone(),
                operation: format!("GET {path}"),
                reason: "SecureBootEnable is missing or not a boolean".into(),
            })
    }

    async fn set_secure_boot(&self, enable: bool) -> Result<(), BmcError> {
        let path = self.secure_boot_path().await?;
        self.request(
            Method::PATCH,
            &path,
            Some(&json!({ "SecureBootEnable": enable })),
            None,
        )
        .await?;
        Ok(())
    }

    async fn inventory(&self) -> Result<Inventory, BmcError> {
        let system = if self.expand_supported().await {
            let path = self.system_path().await?;
            let answer = self
                .request(
                    Method::GET,
                    &format!("{path}?$expand=.($levels=2)"),
                    None,
                    None,
                )
                .await?;
            self.learn_system(&answer.body, &answer.headers);
            answer.body
        } else {
            self.get_system().await?
        };
        let mut inv = Inventory {
            identity: identity_of(&system),
            ..Inventory::default()
        };
        let mut warnings = Vec::new();
        if system.get("Processors").is_some() {
            for p in self
                .members(&system["Processors"], &mut warnings, "processors")
                .await
            {
                if p["Status"]["State"].as_str() == Some("Absent") {
                    continue;
                }
                inv.cpus.push(Cpu {
                    model: str_of(&p["Model"]),
                    architecture: p["ProcessorArchitecture"]
                        .as_str()
                        .or(p["InstructionSet"].as_str())
                        .unwrap_or_default()
                        .to_string(),
                    cores: u64_of(&p["TotalCores"]) as u32,
                    threads: u64_of(&p["TotalThreads"]) as u32,
                    speed_mhz: u64_of(&p["MaxSpeedMHz"]) as u32,
                });
            }
        } else {
            warnings.push("processors: the BMC reports none".into());
        }
        if system.get("Memory").is_some() {
            for m in self
                .members(&system["Memory"], &mut warnings, "memory")
                .await
            {
                if m["Status"]["State"].as_str() == Some("Absent") {
                    continue;
                }
                inv.memory.push(MemoryModule {
                    name: m["Id"]
                        .as_str()
                        .or(m["Name"].as_str())
                        .unwrap_or_default()
                        .into(),
                    capacity_mib: u64_of(&m["CapacityMiB"]),
                    kind: str_of(&m["MemoryDeviceType"]),
                    speed_mhz: u64_of(&m["OperatingSpeedMhz"]) as u32,
                });
            }
        }
        if system.get("EthernetInterfaces").is_some() {
            for n in self
                .members(
                    &system["EthernetInterfaces"],
                    &mut warnings,
                    "ethernet interfaces",
                )
                .await
            {
                let mac = n["MACAddress"]
                    .as_str()
                    .or(n["PermanentMACAddress"].as_str())
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                inv.nics.push(Nic {
                    name: n["Id"]
                        .as_str()
                        .or(n["Name"].as_str())
                        .unwrap_or_default()
                        .into(),
                    mac,
                    speed_mbps: u64_of(&n["SpeedMbps"]),
                    link_up: n["LinkStatus"].as_str().map(|s| s == "LinkUp"),
                });
            }
        } else {
            warnings.push("ethernet interfaces: the BMC reports none".into());
        }
        if system.get("Storage").is_some() {
            for s in self
                .members(&system["Storage"], &mut warnings, "storage")
                .await
            {
                let drives = s["Drives"].as_array().map_or(&[][..], Vec::as_slice);
                if drives.len() > MAX_MEMBERS {
                    warnings.push(format!(
                        "drives: the BMC lists {}; the first {MAX_MEMBERS} were read",
                        drives.len()
                    ));
                }
                for drive in drives.iter().take(MAX_MEMBERS) {
                    let d = if drive.as_object().is_some_and(|d| d.len() > 1) {
                        drive.clone()
                    } else if let Some(path) = link(drive) {
                        match self.get(&path).await {
                            Ok(d) => d,
                            Err(e) => {
                                warnings.push(format!("drive {path}: {e}"));
                                continue;
                            }
                        }
                    } else {
                        continue;
                    };
                    inv.disks.push(disk_of(&d));
                }
            }
        } else if system.get("SimpleStorage").is_some() {
            for s in self
                .members(&system["SimpleStorage"], &mut warnings, "simple storage")
                .await
            {
                for d in s["Devices"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(MAX_MEMBERS)
                {
                    inv.disks.push(disk_of(d));
                }
            }
        }
        let dropped = warnings.len().saturating_sub(MAX_WARNINGS);
        warnings.truncate(MAX_WARNINGS);
        if dropped > 0 {
            warnings.push(format!("{dropped} more warnings not kept"));
        }
        inv.warnings = warnings
            .into_iter()
            .map(|w| excerpt(&self.scrub(&w)))
            .collect();
        Ok(inv)
    }

    async fn logout(&self) -> Result<(), BmcError> {
        let session = self.session.lock().await.take();
        if let Some(Session {
            token,
            location: Some(location),
        }) = session
        {
            let answer = self
                .send_once(&Method::DELETE, &location, None, None, Some(&token))
                .await?;
            self.check(answer, &Method::DELETE, &location)?;
        }
        Ok(())
    }
}

/// Picks the reset type for an action among what the BMC allows. Fallbacks keep the intent:
/// PowerCycle and ForceRestart stand in for each other (both end On after an off moment),
/// On and ForceOn likewise; graceful actions never degrade into forced ones.
pub fn choose_reset_type(action: PowerAction, allowed: Option<&[String]>) -> Option<&'static str> {
    let candidates: &[&'static str] = match action {
        PowerAction::On => &["On", "ForceOn"],
        PowerAction::ForceOn => &["ForceOn", "On"],
        PowerAction::ForceOff => &["ForceOff"],
        PowerAction::GracefulShutdown => &["GracefulShutdown"],
        PowerAction::GracefulRestart => &["GracefulRestart"],
        PowerAction::ForceRestart => &["ForceRestart", "PowerCycle"],
        PowerAction::PowerCycle => &["PowerCycle", "ForceRestart"],
    };
    match allowed {
        None => candidates.first().copied(),
        Some(allowed) => candidates
            .iter()
            .copied()
            .find(|c| allowed.iter().any(|a| a == c)),
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        _ => "OTHER",
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    // reqwest's own Display includes the URL; the sources carry the cause.
    let mut parts = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    if parts.is_empty() {
        "connection failed".into()
    } else {
        parts.join(": ")
    }
}

/// At most [`MAX_TEXT`] characters of something a BMC sent, marked when cut.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A link as the BMC wrote it; absolute ones are checked against its origin when used.
fn link(v: &Value) -> Option<String> {
    v["@odata.id"].as_str().map(String::from)
}

fn member_links(collection: &Value) -> Vec<String> {
    collection["Members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(link)
        .collect()
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array().map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
    })
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_f64().map(|f| f as u64))
        .unwrap_or(0)
}

fn identity_of(system: &Value) -> SystemIdentity {
    let opt = |k: &str| {
        system[k]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    SystemIdentity {
        uuid: opt("UUID"),
        manufacturer: opt("Manufacturer"),
        model: opt("Model"),
        serial_number: opt("SerialNumber"),
    }
}

fn disk_of(d: &Value) -> Disk {
    Disk {
        name: d["Id"]
            .as_str()
            .or(d["Name"].as_str())
            .unwrap_or_default()
            .into(),
        size_bytes: u64_of(&d["CapacityBytes"]),
        media_type: str_of(&d["MediaType"]),
        model: str_of(&d["Model"]),
        serial_number: str_of(&d["SerialNumber"]),
        protocol: str_of(&d["Protocol"]),
    }
}

/// The human part of a Redfish error body.
fn redfish_message(body: &Value) -> String {
    let error = &body["error"];
    let extended = error["@Message.ExtendedInfo"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(|m| m["Message"].as_str());
    let text = extended
        .or(error["message"].as_str())
        .or(body.as_str())
        .unwrap_or("(no message)");
    let mut text: String = text.chars().take(300).collect();
    if text.is_empty() {
        text = "(no message)".into();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_type_fallbacks() {
        let all: Vec<String> = PowerAction::ALL
            .iter()
            .map(|a| a.as_str().to_string())
            .collect();
        let sushy: Vec<String> = [
            "On",
            "ForceOff",
            "GracefulShutdown",
            "GracefulRestart",
            "ForceRestart",
            "Nmi",
            "ForceOn",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let only_on_off: Vec<String> = vec!["On".into(), "ForceOff".into()];
        type Row<'a> = (PowerAction, Option<&'a [String]>, Option<&'a str>);
        let rows: &[Row] = &[
            (PowerAction::PowerCycle, None, Some("PowerCycle")),
            (PowerAction::PowerCycle, Some(&all), Some("PowerCycle")),
            (PowerAction::PowerCycle, Some(&sushy), Some("ForceRestart")),
            (
                PowerAction::ForceRestart,
                Some(&sushy),
                Some("ForceRestart"),
            ),
            (PowerAction::ForceOn, Some(&only_on_off), Some("On")),
            (PowerAction::On, Some(&sushy), Some("On")),
            (PowerAction::GracefulRestart, Some(&only_on_off), None),
            (PowerAction::PowerCycle, Some(&only_on_off), None),
            (
                PowerAction::GracefulShutdown,
                Some(&sushy),
                Some("GracefulShutdown"),
            ),
        ];
        for (action, allowed, expect) in rows {
            assert_eq!(
                choose_reset_type(*action, *allowed),
                *expect,
                "{action:?} {allowed:?}"
            );
        }
    }

    #[test]
    fn error_messages_from_bodies() {
        let body = json!({"error": {"code": "Base.1.8.GeneralError", "message": "boom",
            "@Message.ExtendedInfo": [{"Message": "The value 'X' is not allowed"}]}});
        assert_eq!(redfish_message(&body), "The value 'X' is not allowed");
        assert_eq!(redfish_message(&json!({"error": {"message": "m"}})), "m");
        assert_eq!(
            redfish_message(&json!("<html>oops</html>")),
            "<html>oops</html>"
        );
        assert_eq!(redfish_message(&Value::Null), "(no message)");
    }

    #[test]
    fn links_are_confined_to_the_bmc_origin() {
        let address = BmcAddress::parse("redfish+https://10.0.0.1/redfish/v1/Systems/1").unwrap();
        let bmc =
            RedfishBmc::new(&address, Credentials::new("u", "p"), BmcOptions::default()).unwrap();
        let url = |p: &str| bmc.url(&Method::GET, p).map(|u| u.to_string());
        for (link, resolved) in [
            (
                "/redfish/v1/Systems/1",
                "https://10.0.0.1/redfish/v1/Systems/1",
            ),
            (
                "https://10.0.0.1:443/redfish/v1",
                "https://10.0.0.1/redfish/v1",
            ),
            (
                "https://10.0.0.1/x?$expand=.",
                "https://10.0.0.1/x?$expand=.",
            ),
            ("redfish/v1/Systems", "https://10.0.0.1/redfish/v1/Systems"),
            // Credentials in a link are never sent in place of ours.
            ("https://evil:pw@10.0.0.1/x", "https://10.0.0.1/x"),
        ] {
            assert_eq!(url(link).unwrap(), resolved, "{link}");
        }
        for link in [
            "http://10.0.0.1/redfish/v1",
            "https://10.0.0.1:8443/redfish/v1",
            "https://10.0.0.2/redfish/v1",
            "//10.0.0.2/redfish/v1",
            "https://10.0.0.1@10.0.0.2/x",
            "file:///etc/passwd",
        ] {
            let err = url(link).unwrap_err().to_string();
            assert!(
                err.contains("outside the BMC's origin https://10.0.0.1"),
                "{link}: {err}"
            );
        }
        let long = format!("/{}", "a".repeat(5000));
        let err = bmc
            .url(&Method::GET, &format!("https://x{long}"))
            .unwrap_err();
        assert!(err.to_string().len() < 1000, "{err}");
    }
}
