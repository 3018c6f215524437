//! Redfish routing and handlers.

// Error responses travel by value once per request; boxing them buys nothing.
#![allow(clippy::result_large_err)]

use std::time::Instant;

use bytes::Bytes;
use http::header::{ETAG, HeaderValue, IF_MATCH, LOCATION};
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;

use crate::app::{App, ResetConnection};
use crate::bios;
use crate::chassis;
use crate::event_service;
use crate::fault::Fault;
use crate::hostile;
use crate::inventory::{self, Expand};
use crate::raid;
use crate::resp::{
    Resp, bad_request, empty, error, json, json_bytes, method_not_allowed, not_found, read_json,
    unauthorized,
};
use crate::state::{BOOT_ENABLED, BOOT_MODES, BOOT_TARGETS, parse_index, parse_system_id};
use crate::update;

/// Request bodies are tiny JSON documents; refuse anything large.

#[derive(Clone, Copy)]
enum Route {
    VersionDoc,
    Root,
    SessionService,
    Sessions,
    Session(u64),
    Systems,
    Managers,
    Chassis,
    Registries,
    RegistryFile,
    Registry,
    UpdateService,
    SimpleUpdate,
    EventService,
    Subscriptions,
    Subscription(u64),
    TaskService,
    Tasks,
    Task(u64),
    /// A resource belonging to system `.0`.
    Sys(usize, SysRoute),
    NotFound,
}

#[derive(Clone, Copy)]
enum SysRoute {
    System,
    Reset,
    Processors,
    Processor(usize),
    Memory,
    Dimm(usize),
    Nics,
    Nic(usize),
    StorageCollection,
    Storage,
    Drive(usize),
    Manager,
    VirtualMedia,
    Cd,
    InsertMedia,
    EjectMedia,
    Bios,
    BiosSettings,
    Volumes,
    Volume(u64),
    Chassis(chassis::ChassisRoute),
}

/// The volume a volumes route names (`None`: the collection).
fn route_volume(route: SysRoute) -> Option<u64> {
    match route {
        SysRoute::Volume(id) => Some(id),
        _ => None,
    }
}

fn numbered(segment: &str, prefix: &str) -> Option<usize> {
    parse_index(segment.strip_prefix(prefix)?, usize::MAX)
}

fn parse_route(path: &str, count: usize) -> Route {
    let Some(rest) = path.strip_prefix("/redfish") else {
        return Route::NotFound;
    };
    if rest.is_empty() || rest == "/" {
        return Route::VersionDoc;
    }
    let Some(rest) = rest.strip_prefix("/v1") else {
        return Route::NotFound;
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Route::NotFound;
    }
    // A fixed array keeps routing allocation-free; no valid path is deeper.
    let mut segs = [""; 8];
    let mut n = 0;
    for seg in rest.split('/').filter(|s| !s.is_empty()) {
        if n == segs.len() {
            return Route::NotFound;
        }
        segs[n] = seg;
        n += 1;
    }
    match &segs[..n] {
        [] => Route::Root,
        ["SessionService"] => Route::SessionService,
        ["SessionService", "Sessions"] => Route::Sessions,
        ["SessionService", "Sessions", id] => match parse_index(id, usize::MAX) {
            Some(id) => Route::Session(id as u64),
            None => Route::NotFound,
        },
        ["Systems"] => Route::Systems,
        ["Managers"] => Route::Managers,
        ["Chassis"] => Route::Chassis,
        ["UpdateService"] => Route::UpdateService,
        ["EventService"] => Route::EventService,
        ["EventService", "Subscriptions"] => Route::Subscriptions,
        ["EventService", "Subscriptions", id] => match parse_index(id, usize::MAX) {
            Some(id) => Route::Subscription(id as u64),
            None => Route::NotFound,
        },
        ["UpdateService", "Actions", "UpdateService.SimpleUpdate"] => Route::SimpleUpdate,
        ["TaskService"] => Route::TaskService,
        ["TaskService", "Tasks"] => Route::Tasks,
        ["TaskService", "Tasks", id] => match parse_index(id, usize::MAX) {
            Some(id) => Route::Task(id as u64),
            None => Route::NotFound,
        },
        ["Registries"] => Route::Registries,
        ["Registries", bios::REGISTRY_FILE] => Route::RegistryFile,
        ["Registries", bios::REGISTRY_FILE, file]
            if file.strip_suffix(".json") == Some(bios::REGISTRY_FILE) =>
        {
            Route::Registry
        }
        ["Systems", id, tail @ ..] => match parse_system_id(id, count) {
            Some(index) => system_route(tail).map_or(Route::NotFound, |r| Route::Sys(index, r)),
            None => Route::NotFound,
        },
        ["Chassis", id, tail @ ..] => match id
            .strip_prefix("chassis-")
            .and_then(|id| parse_system_id(id, count))
            .zip(chassis::route(tail))
        {
            Some((index, r)) => Route::Sys(index, SysRoute::Chassis(r)),
            None => Route::NotFound,
        },
        ["Managers", id, tail @ ..] => {
            match id
                .strip_prefix("bmc-")
                .and_then(|id| parse_system_id(id, count))
            {
                Some(index) => {
                    manager_route(tail).map_or(Route::NotFound, |r| Route::Sys(index, r))
                }
                None => Route::NotFound,
            }
        }
        _ => Route::NotFound,
    }
}

fn system_route(tail: &[&str]) -> Option<SysRoute> {
    Some(match tail {
        [] => SysRoute::System,
        ["Actions", "ComputerSystem.Reset"] => SysRoute::Reset,
        ["Processors"] => SysRoute::Processors,
        ["Processors", p] => SysRoute::Processor(numbered(p, "CPU")?),
        ["Memory"] => SysRoute::Memory,
        ["Memory", m] => SysRoute::Dimm(numbered(m, "DIMM")?),
        ["EthernetInterfaces"] => SysRoute::Nics,
        ["EthernetInterfaces", e] => SysRoute::Nic(numbered(e, "NIC")?),
        ["Storage"] => SysRoute::StorageCollection,
        ["Storage", "1"] => SysRoute::Storage,
        ["Storage", "1", "Drives", d] => SysRoute::Drive(numbered(d, "Disk")?),
        ["Storage", "1", "Volumes"] => SysRoute::Volumes,
        ["Storage", "1", "Volumes", v] => SysRoute::Volume(parse_index(v, usize::MAX)? as u64),
        ["Bios"] => SysRoute::Bios,
        ["Bios", "Settings"] => SysRoute::BiosSettings,
        _ => return None,
    })
}

fn manager_route(tail: &[&str]) -> Option<SysRoute> {
    Some(match tail {
        [] => SysRoute::Manager,
        ["VirtualMedia"] => SysRoute::VirtualMedia,
        ["VirtualMedia", "Cd"] => SysRoute::Cd,
        ["VirtualMedia", "Cd", "Actions", "VirtualMedia.InsertMedia"] => SysRoute::InsertMedia,
        ["VirtualMedia", "Cd", "Actions", "VirtualMedia.EjectMedia"] => SysRoute::EjectMedia,
        _ => return None,
    })
}

/// Serves one request. `Err` asks the connection to be dropped unanswered.
pub async fn handle(app: &App, req: Request<Incoming>) -> Result<Resp, ResetConnection> {
    let path = req.uri().path();
    app.by_method.count(req.method());
    let route = parse_route(path, app.systems.len());

    let mut rewrite = None;
    if let Route::Sys(index, _) = route {
        let cell = &app.systems[index];
        cell.counts.count(req.method());
        match cell.fault() {
            None | Some(Fault::DropBiosSettings) => {}
            Some(Fault::Http500) => {
                return Ok(error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Base.1.8.InternalError",
                    "The request failed due to an internal service error.",
                ));
            }
            // Parked until the client hangs up or the emulator shuts down; this
            // holds no lock, so other requests are unaffected.
            Some(Fault::Hang) => std::future::pending::<()>().await,
            Some(Fault::Unauthorized) => return Ok(unauthorized()),
            Some(Fault::ConnectionReset) => return Err(ResetConnection),
            Some(Fault::Latency(d)) => tokio::time::sleep(d).await,
            Some(Fault::Redirect(origin)) => return Ok(hostile::redirect(&origin, req.uri())),
            Some(Fault::HugeBody(n)) => return Ok(hostile::huge_body(n)),
            Some(Fault::LongError(n)) => return Ok(hostile::long_error(n)),
            Some(fault @ (Fault::ForeignLinks(_) | Fault::ManyMembers(_))) => rewrite = Some(fault),
        }
    }

    let public = matches!(route, Route::VersionDoc | Route::Root)
        || (matches!(route, Route::Sessions) && req.method() == Method::POST);
    if !public && !app.authorized(req.headers()) {
        return Ok(unauthorized());
    }

    let resp = match route {
        Route::NotFound => not_found(path),
        Route::VersionDoc => only_get(&req, || {
            json_bytes(
                StatusCode::OK,
                Bytes::from(inventory::redfish_version_doc()),
            )
        }),
        Route::Root => only_get(&req, || {
            json_bytes(StatusCode::OK, app.service_root.clone())
        }),
        Route::Systems => only_get(&req, || {
            json_bytes(StatusCode::OK, app.systems_collection.clone())
        }),
        Route::Managers => only_get(&req, || {
            json_bytes(StatusCode::OK, app.managers_collection.clone())
        }),
        Route::Chassis => only_get(&req, || {
            json(StatusCode::OK, &chassis::collection(app.systems.len()))
        }),
        Route::SessionService => {
            only_get(&req, || json(StatusCode::OK, &inventory::session_service()))
        }
        Route::Sessions => match *req.method() {
            Method::GET => json(
                StatusCode::OK,
                &inventory::sessions_collection(&app.sessions().ids()),
            ),
            Method::POST => create_session(app, req).await,
            _ => method_not_allowed("GET, POST"),
        },
        Route::Session(id) => match *req.method() {
            Method::GET if app.sessions().exists(id) => {
                json(StatusCode::OK, &inventory::session(id, &app.username))
            }
            Method::DELETE if app.sessions().remove(id) => empty(StatusCode::NO_CONTENT),
            Method::GET | Method::DELETE => not_found(path),
            _ => method_not_allowed("GET, DELETE"),
        },
        Route::Registries => only_get(&req, || json(StatusCode::OK, &bios::registries_doc())),
        Route::RegistryFile => only_get(&req, || json(StatusCode::OK, &bios::registry_file_doc())),
        Route::Registry => only_get(&req, || json(StatusCode::OK, &bios::registry_doc())),
        Route::UpdateService => {
            only_get(&req, || json(StatusCode::OK, &update::update_service_doc()))
        }
        Route::EventService => only_get(&req, || {
            json(StatusCode::OK, &crate::subscriptions::event_service_doc())
        }),
        Route::Subscriptions => event_service::subscriptions(app, None, req).await,
        Route::Subscription(id) => event_service::subscriptions(app, Some(id), req).await,
        Route::SimpleUpdate if req.method() == Method::POST => simple_update(app, req).await,
        Route::SimpleUpdate => method_not_allowed("POST"),
        Route::TaskService => only_get(&req, || json(StatusCode::OK, &update::task_service_doc())),
        Route::Tasks => only_get(&req, || {
            json(
                StatusCode::OK,
                &update::tasks_collection(&app.tasks().ids()),
            )
        }),
        Route::Task(id) => only_get(&req, || {
            let settled = app.tasks().settle(id, Instant::now());
            match settled {
                Some((doc, flash)) => {
                    if let Some(flash) = flash {
                        let index = flash.system;
                        flash.apply(&mut app.systems[index].lock(Instant::now()));
                    }
                    json(StatusCode::OK, &doc)
                }
                None => not_found(path),
            }
        }),
        Route::Sys(index, r) => system_request(app, index, r, req).await,
    };
    Ok(match rewrite {
        Some(fault) => hostile::rewrite(resp, &fault).await,
        None => resp,
    })
}

fn only_get(req: &Request<Incoming>, f: impl FnOnce() -> Resp) -> Resp {
    if req.method() == Method::GET {
        f()
    } else {
        method_not_allowed("GET")
    }
}

async fn create_session(app: &App, req: Request<Incoming>) -> Resp {
    let body = match read_json(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let user = body.get("UserName").and_then(Value::as_str);
    let pass = body.get("Password").and_then(Value::as_str);
    let (Some(user), Some(pass)) = (user, pass) else {
        return bad_request(
            "Base.1.8.PropertyMissing",
            "UserName and Password are required.",
        );
    };
    if !app.check_password(user, pass) {
        return unauthorized();
    }
    let (id, token) = app.sessions().create();
    let location = format!("/redfish/v1/SessionService/Sessions/{id}");
    let mut resp = json(StatusCode::CREATED, &inventory::session(id, user));
    let headers = resp.headers_mut();
    if let Ok(token) = HeaderValue::from_str(&token) {
        headers.insert("x-auth-token", token);
    }
    if let Ok(location) = HeaderValue::from_str(&location) {
        headers.insert(LOCATION, location);
    }
    resp
}

async fn system_request(app: &App, index: usize, route: SysRoute, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let get = method == Method::GET;
    let post = method == Method::POST;
    let found = |doc: Option<Value>| match doc {
        Some(doc) => json(StatusCode::OK, &doc),
        None => not_found(req.uri().path()),
    };
    match route {
        SysRoute::Volumes | SysRoute::Volume(_) => {
            raid::request(app, index, route_volume(route), req).await
        }
        SysRoute::System if get => match parse_expand(req.uri().query()) {
            Ok(expand) => get_system(app, index, expand),
            Err(resp) => resp,
        },
        SysRoute::System if method == Method::PATCH => patch_system(app, index, req).await,
        SysRoute::System => method_not_allowed("GET, PATCH"),
        SysRoute::Reset if post => reset(app, index, req).await,
        SysRoute::InsertMedia if post => insert_media(app, index, req).await,
        SysRoute::EjectMedia if post => eject_media(app, index, req).await,
        SysRoute::Reset | SysRoute::InsertMedia | SysRoute::EjectMedia => {
            method_not_allowed("POST")
        }
        SysRoute::BiosSettings if method == Method::PATCH => patch_bios(app, index, req).await,
        SysRoute::BiosSettings if get => {
            let base = inventory::SystemBase(index).to_string();
            let s = app.systems[index].lock(Instant::now());
            json(StatusCode::OK, &bios::settings_doc(&base, &s.bios))
        }
        SysRoute::BiosSettings => method_not_allowed("GET, PATCH"),
        _ if !get => method_not_allowed("GET"),
        SysRoute::Processors => found(Some(inventory::processors(index))),
        SysRoute::Processor(n) => found(inventory::processor(index, n)),
        SysRoute::Memory => found(Some(inventory::memory(index))),
        SysRoute::Dimm(n) => found(inventory::dimm(index, n)),
        SysRoute::Nics => found(Some(inventory::ethernet_interfaces(index))),
        SysRoute::Nic(n) => found(inventory::ethernet_interface(index, n)),
        SysRoute::StorageCollection => found(Some(inventory::storage_collection(index))),
        SysRoute::Storage => found(Some(inventory::storage(index))),
        SysRoute::Drive(n) => found(inventory::drive(index, n)),
        SysRoute::Bios => {
            let base = inventory::SystemBase(index).to_string();
            let s = app.systems[index].lock(Instant::now());
            found(Some(bios::bios_doc(&base, index, &s.bios)))
        }
        SysRoute::Manager => {
            let s = app.systems[index].lock(Instant::now());
            found(Some(inventory::manager(index, &s)))
        }
        SysRoute::VirtualMedia => found(Some(inventory::virtual_media_collection(index))),
        SysRoute::Chassis(chassis::ChassisRoute::Chassis) => found(Some(chassis::chassis(index))),
        SysRoute::Chassis(chassis::ChassisRoute::Adapters) => found(Some(chassis::adapters(index))),
        SysRoute::Chassis(chassis::ChassisRoute::Adapter) => {
            let s = app.systems[index].lock(Instant::now());
            found(Some(chassis::adapter(index, &s)))
        }
        SysRoute::Cd => {
            let doc = inventory::virtual_cd(index, &app.systems[index].lock(Instant::now()));
            found(Some(doc))
        }
    }
}

fn with_etag(mut resp: Resp, etag: &str) -> Resp {
    if let Ok(value) = HeaderValue::from_str(etag) {
        resp.headers_mut().insert(ETAG, value);
    }
    resp
}

fn get_system(app: &App, index: usize, expand: Option<Expand>) -> Resp {
    let s = app.systems[index].lock(Instant::now());
    let etag = s.etag();
    let resp = match expand {
        // The plain GET is the hot path: rendered straight to bytes.
        None => {
            let body = inventory::system_json(index, &s, &app.reset_types_json);
            drop(s);
            json_bytes(StatusCode::OK, body)
        }
        Some(expand) => {
            let doc = inventory::system_expanded(index, &s, &app.reset_types, expand);
            drop(s);
            json(StatusCode::OK, &doc)
        }
    };
    with_etag(resp, &etag)
}

/// Decodes `%XX` escapes; clients differ in which of `$().=` they escape.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads `$expand` (`.`, `*`, optionally `($levels=N)`) from a query string; other query
/// parameters are ignored, as before `$expand` existed.
fn parse_expand(query: Option<&str>) -> Result<Option<Expand>, Resp> {
    let Some(value) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key) == "$expand").then(|| percent_decode(value))
        })
    else {
        return Ok(None);
    };
    let bad = |message: String| {
        Err(bad_request(
            "Base.1.8.QueryParameterValueFormatError",
            &message,
        ))
    };
    let (kind, options) = match value.split_once('(') {
        Some((kind, rest)) => match rest.strip_suffix(')') {
            Some(options) => (kind, Some(options)),
            None => return bad(format!("The $expand value {value} has an unclosed '('.")),
        },
        None => (value.as_str(), None),
    };
    let links = match kind {
        "." => false,
        "*" => true,
        "~" => {
            return Err(error(
                StatusCode::NOT_IMPLEMENTED,
                "Base.1.8.QueryNotSupportedOnResource",
                "$expand=~ (links only) is not supported; use . or *.",
            ));
        }
        _ => return bad(format!("The $expand value {value} is not ., * or ~.")),
    };
    let levels = match options {
        None => 1,
        Some(options) => match options.strip_prefix("$levels=").map(str::parse::<usize>) {
            Some(Ok(n)) if n >= 1 => n,
            _ => {
                return bad(format!(
                    "The $expand option {options} is not $levels=N (N >= 1)."
                ));
            }
        },
    };
    if levels > inventory::MAX_EXPAND_LEVELS {
        return Err(bad_request(
            "Base.1.8.QueryParameterOutOfRange",
            &format!(
                "$levels={levels} is beyond the supported maximum of {}.",
                inventory::MAX_EXPAND_LEVELS
            ),
        ));
    }
    Ok(Some(Expand { links, levels }))
}

/// `If-Match` holds a list of entity tags or `*`; weak tags compare by value.
fn etag_matches(if_match: &str, current: &str) -> bool {
    let current = current.trim_start_matches("W/");
    if_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == current)
}

fn pick(
    boot: &serde_json::Map<String, Value>,
    key: &str,
    allowed: &[&'static str],
) -> Result<Option<&'static str>, Resp> {
    let Some(value) = boot.get(key) else {
        return Ok(None);
    };
    let Some(value) = value.as_str() else {
        return Err(bad_request(
            "Base.1.8.PropertyValueTypeError",
            &format!("{key} must be a string."),
        ));
    };
    match allowed.iter().find(|a| **a == value) {
        Some(v) => Ok(Some(*v)),
        None => Err(bad_request(
            "Base.1.8.PropertyValueNotInList",
            &format!(
                "The value {value} for the property {key} is not in the list of acceptable values: {allowed:?}."
            ),
        )),
    }
}

type BootPatch = (
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);

fn parse_boot_patch(body: &Value) -> Result<BootPatch, Resp> {
    let Some(obj) = body.as_object() else {
        return Err(bad_request(
            "Base.1.8.MalformedJSON",
            "The request body must be a JSON object.",
        ));
    };
    if let Some(key) = obj.keys().find(|k| *k != "Boot") {
        return Err(bad_request(
            "Base.1.8.PropertyUnknown",
            &format!("The property {key} is not known or not writable here."),
        ));
    }
    let Some(boot) = obj.get("Boot") else {
        return Ok((None, None, None));
    };
    let Some(boot) = boot.as_object() else {
        return Err(bad_request(
            "Base.1.8.PropertyValueTypeError",
            "Boot must be an object.",
        ));
    };
    const KNOWN: [&str; 3] = [
        "BootSourceOverrideTarget",
        "BootSourceOverrideEnabled",
        "BootSourceOverrideMode",
    ];
    if let Some(key) = boot.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(bad_request(
            "Base.1.8.PropertyUnknown",
            &format!("The property Boot/{key} is not known or not writable."),
        ));
    }
    Ok((
        pick(boot, KNOWN[0], BOOT_TARGETS)?,
        pick(boot, KNOWN[1], BOOT_ENABLED)?,
        pick(boot, KNOWN[2], BOOT_MODES)?,
    ))
}

async fn patch_system(app: &App, index: usize, req: Request<Incoming>) -> Resp {
    let if_match = req
        .headers()
        .get(IF_MATCH)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let body = match read_json(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let (target, enabled, mode) = match parse_boot_patch(&body) {
        Ok(patch) => patch,
        Err(resp) => return resp,
    };
    let (doc, etag) = {
        let mut s = app.systems[index].lock(Instant::now());
        if let Some(if_match) = if_match
            && !etag_matches(&if_match, &s.etag())
        {
            return error(
                StatusCode::PRECONDITION_FAILED,
                "Base.1.8.PreconditionFailed",
                "The ETag supplied did not match the ETag required to change this resource.",
            );
        }
        if let Some(t) = target {
            s.boot_target = t;
        }
        if let Some(e) = enabled {
            s.boot_enabled = e;
        }
        if let Some(m) = mode {
            s.boot_mode = m;
        }
        s.record("PatchBoot");
        s.touch();
        (inventory::system(index, &s, &app.reset_types), s.etag())
    };
    with_etag(json(StatusCode::OK, &doc), &etag)
}

/// `PATCH Bios/Settings {"Attributes": {...}}`: checked against the registry, then pending
/// until the next boot.
async fn patch_bios(app: &App, index: usize, req: Request<Incoming>) -> Resp {
    let body = match read_json(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let Some(attributes) = body.get("Attributes").and_then(Value::as_object) else {
        return bad_request(
            "Base.1.8.PropertyMissing",
            "The property Attributes is a required property and must be included in the request.",
        );
    };
    let mut s = app.systems[index].lock(Instant::now());
    if let Err((id, message)) = s.bios.stage(attributes) {
        return bad_request(id, &message);
    }
    let names: Vec<&str> = attributes.keys().map(String::as_str).collect();
    s.record(format!("PatchBios:{}", names.join(",")));
    empty(StatusCode::NO_CONTENT)
}

/// `UpdateService.SimpleUpdate`: one task per target, recorded on the target's system as
/// `SimpleUpdate:<Bios|Bmc|Nic>:<image>`; answered 202 with the (first) task's location.
async fn simple_update(app: &App, req: Request<Incoming>) -> Resp {
    let body = match read_json(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let Some(image) = body.get("ImageURI").and_then(Value::as_str) else {
        return bad_request(
            "Base.1.8.ActionParameterMissing",
            "The action UpdateService.SimpleUpdate requires the parameter ImageURI.",
        );
    };
    let targets: Vec<&str> = body
        .get("Targets")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if targets.is_empty() {
        return bad_request(
            "Base.1.8.ActionParameterMissing",
            "The action UpdateService.SimpleUpdate requires the parameter Targets.",
        );
    }
    let mut resolved = Vec::new();
    for t in &targets {
        match update::target(t, app.systems.len()) {
            Some(r) => resolved.push(r),
            None => {
                return bad_request(
                    "Base.1.8.ActionParameterValueNotInList",
                    &format!(
                        "The target {t} is not a system, manager or network adapter of this service."
                    ),
                );
            }
        }
    }
    let mut first = None;
    for (index, component) in resolved {
        let task = app.tasks().start(index, component, image, app.update_delay);
        let file = image.rsplit('/').next().unwrap_or(image);
        app.systems[index]
            .lock(Instant::now())
            .record(format!("SimpleUpdate:{component:?}:{file}"));
        first.get_or_insert(task);
    }
    let Some((location, doc)) = first else {
        return empty(StatusCode::NO_CONTENT);
    };
    let mut resp = json(StatusCode::ACCEPTED, &doc);
    if let Ok(location) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(LOCATION, location);
    }
    resp
}

async fn reset(app: &App, index: usize, req: Request<Incoming>) -> Resp {
    let body = match read_json(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let Some(reset_type) = body.get("ResetType") else {
        return bad_request(
            "Base.1.8.ActionParameterMissing",
            "The action ComputerSystem.Reset requires the parameter ResetType.",
        );
    };
    let Some(reset_type) = reset_type.as_str() else {
        return bad_request(
            "Base.1.8.ActionParameterValueTypeError",
            "ResetType must be a string.",
        );
    };
    let Some(reset_type) = app.reset_types.iter().find(|t| **t == reset_type) else {
        return bad_request(
            "Base.1.8.ActionParameterValueNotInList",
            &format!(
                "The value {reset_type} for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values: {:?}.",
                app.reset_types
            ),
        );
    };
    let now = Instant::now();
    app.systems[index]
        .lock(now)
        .reset(reset_type, app.power_delay, now);
    empty(StatusCode::NO_CONTENT)
}

async fn insert_media(app: &App, index: usize, req: Request<Incoming>) -> Resp {
    let body = match read_json(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let Some(image) = body.get("Image").and_then(Value::as_str) else {
        return bad_request(
            "Base.1.8.ActionParameterMissing",
            "The action VirtualMedia.InsertMedia requires the parameter Image.",
        );
    };
    if !image.contains("://") {
        return bad_request(
            "Base.1.8.ActionParameterValueFormatError",
            "Image must be a URL.",
        );
    }
    let flag = |key: &str| body.get(key).and_then(Value::as_bool).unwrap_or(true);
    let (inserted, write_protected) = (flag("Inserted"), flag("WriteProtected"));
    if let Some(media) = &app.media
        && let Err(refusal) = media.check(image).await
    {
        // Nothing is recorded as inserted: the request is counted, the slot stays as it was.
        app.systems[index]
            .lock(Instant::now())
            .record("InsertMediaFailed");
        return error(refusal.status, "Base.1.8.GeneralError", &refusal.message);
    }
    let mut s = app.systems[index].lock(Instant::now());
    s.vm_image = Some(image.to_owned());
    s.vm_inserted = inserted;
    s.vm_write_protected = write_protected;
    s.record("InsertMedia");
    s.touch();
    empty(StatusCode::NO_CONTENT)
}

async fn eject_media(app: &App, index: usize, req: Request<Incoming>) -> Resp {
    if let Err(resp) = read_json(req).await {
        return resp;
    }
    let mut s = app.systems[index].lock(Instant::now());
    s.vm_image = None;
    s.vm_inserted = false;
    s.record("EjectMedia");
    s.touch();
    empty(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_list_and_star() {
        assert!(etag_matches("\"3\"", "\"3\""));
        assert!(etag_matches("W/\"3\"", "\"3\""));
        assert!(etag_matches("\"1\", \"3\"", "\"3\""));
        assert!(etag_matches("*", "\"3\""));
        assert!(!etag_matches("\"2\"", "\"3\""));
    }

    #[test]
    fn expand_queries() {
        let ok = |q: &str| parse_expand(Some(q)).ok().flatten();
        assert_eq!(parse_expand(None).ok().flatten(), None);
        assert_eq!(ok("only=x"), None);
        assert_eq!(
            ok("$expand=."),
            Some(Expand {
                links: false,
                levels: 1
            })
        );
        assert_eq!(
            ok("$expand=*"),
            Some(Expand {
                links: true,
                levels: 1
            })
        );
        assert_eq!(
            ok("$expand=.($levels=2)"),
            Some(Expand {
                links: false,
                levels: 2
            })
        );
        assert_eq!(
            ok("%24expand=.%28%24levels%3D3%29"),
            Some(Expand {
                links: false,
                levels: 3
            })
        );
        for bad in [
            "$expand=~",
            "$expand=x",
            "$expand=.($levels=4)",
            "$expand=.($levels=0)",
            "$expand=.($levels=2",
        ] {
            assert!(parse_expand(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn routes() {
        assert!(matches!(
            parse_route("/redfish/v1/Systems/sys-4/", 5),
            Route::Sys(4, SysRoute::System)
        ));
        assert!(matches!(
            parse_route("/redfish/v1/Systems/sys-5", 5),
            Route::NotFound
        ));
        assert!(matches!(
            parse_route("/redfish/v1/Managers/bmc-sys-1/VirtualMedia/Cd", 5),
            Route::Sys(1, SysRoute::Cd)
        ));
        assert!(matches!(
            parse_route("/redfish/v1/Systems/sys-0/Storage/1/Drives/Disk2", 5),
            Route::Sys(0, SysRoute::Drive(2))
        ));
        assert!(matches!(parse_route("/redfish/v1x", 5), Route::NotFound));
        assert!(matches!(parse_route("/redfish/v1/", 5), Route::Root));
    }
}
