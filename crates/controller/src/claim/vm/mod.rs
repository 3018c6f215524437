//! The libvirt provider: a claim of a libvirt HostClass gets a virtual machine of its own.
//!
//! Read: the class, its connection Secret, the claim's data Secrets. Decide: what the VM should
//! be ([`vm_pass::Want`]) and whether a pass is due. Apply: the pass runs off the workers
//! ([`vm_pass::converge`]); its end wakes the claim. Status: [`status::status`], shaped as a
//! bare-metal claim's. The VM is named after the claim's uid (the class's prefix first), so a
//! claim never gets two, whatever restarts come between.

mod one_shot;
pub mod status;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferrometal_api::annotations as ann;
use ferrometal_api::claim::conditions as c;
use ferrometal_api::host_class::{HostClass, LIBVIRT_URI_KEY, LibvirtClass, VM_CLASS, url_allowed};
use ferrometal_api::{
    CpuDetails, DiskType, HardwareDataSpec, HardwareDetails, HardwareSystemVendor, HostClaim,
    NamespacedRef, NicDetails, StorageDetails,
};
use ferrometal_libvirt::{DomainSpec, Power, names};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Map, Value, json};

use self::one_shot::{Request, one_shot};
use self::status::{Input, Phase};
use super::context::{ClaimContext, claims, key};
use super::status::write_new;
use crate::conditions::now;
use crate::detached::Found;
use crate::error::{Error, conflict, not_found};
use crate::events::{HostEvent, event};
use crate::forwarding::DataKind;
use crate::hardware_data::write_hardware_copy;
use crate::vm_pass::{self, ConfigDrive, ImageWant, Outcome, Want};
use ferrometal_provisioner::config_drive::structured;

/// A VM that is in line is looked at again this often (power changed inside the guest, a
/// domain removed by hand).
const OBSERVE_EVERY: Duration = Duration::from_secs(60);
/// After a failed pass.
const RETRY: Duration = Duration::from_secs(10);
/// After a failed creation (each try downloads the image again).
const RETRY_CREATE: Duration = Duration::from_secs(60);

/// What a reconcile of a VM claim does: bring the VM in line (`deleting`: take it down).
pub(super) async fn reconcile(
    claim: &HostClaim,
    class: &HostClass,
    ctx: &ClaimContext,
    deleting: bool,
) -> Result<Action, Error> {
    // By uid: a claim deleted and made again under its name is another VM.
    let k = format!("{}/{}", key(claim), claim.uid().unwrap_or_default());
    let Some(lv) = class.spec.libvirt.as_ref() else {
        return not_served(
            claim,
            ctx,
            c::HOST_CLASS_INVALID,
            "the claim's HostClass has no libvirt parameters".into(),
            deleting,
        )
        .await;
    };
    // A pass that ended: its outcome is what the claim's status says from now on.
    let mut busy = false;
    let fresh = match ctx.vms.take(&k) {
        Found::Running => {
            // A retry of an unreachable libvirt host that got through (it woke the claim):
            // the status now says the VM is being made. Otherwise nothing to do until the
            // pass ends.
            let retrying = matches!(
                ctx.vm_seen.lock().unwrap().get(&k),
                Some((Outcome::Unreachable, _))
            );
            if !(retrying && vm_pass::reached(&k)) {
                return Ok(Action::requeue(OBSERVE_EVERY));
            }
            busy = true;
            false
        }
        Found::Finished { state, .. } => {
            ctx.vm_seen
                .lock()
                .unwrap()
                .insert(k.clone(), (state, Instant::now()));
            true
        }
        Found::Idle => false,
    };
    let last = ctx.vm_seen.lock().unwrap().get(&k).cloned();
    // A one-shot request (reboot first, then an operation) is known by its annotation's value;
    // the token stays until the claim is seen without it, so a cache that still shows it never
    // acts twice.
    let request = match one_shot(claim) {
        Some(Request::Refused {
            annotation,
            reason,
            note,
        }) if !deleting => {
            consumed(claim, ctx, annotation, &event_warning(reason, note)).await?;
            return Ok(Action::requeue(RETRY));
        }
        Some(Request::Act(r)) => Some(r),
        _ => None,
    };
    let token = request.as_ref().map(|r| r.token.clone());
    if fresh
        && matches!(
            last,
            Some((Outcome::Failed { .. } | Outcome::Unreachable, _))
        )
    {
        // The action (if that pass did one) did not happen: it is tried again.
        ctx.set_forwarded(&k, None);
    }
    match &request {
        None => ctx.set_forwarded(&k, None),
        Some(r)
            if ctx.forwarded(&k).as_ref() == Some(&r.token)
                && matches!(last, Some((Outcome::Seen { .. }, _))) =>
        {
            // Done: it leaves the claim, and its removal wakes the claim again.
            consumed(claim, ctx, r.annotation, &event(r.reason, r.done)).await?;
            return Ok(Action::requeue(RETRY));
        }
        Some(_) => {}
    }
    let size = match lv.size_for(claim.annotations()) {
        Ok(s) => s,
        Err(msg) if !deleting => {
            return not_served(claim, ctx, c::INVALID_REQUEST, msg, deleting).await;
        }
        // Taking a VM down needs no size.
        Err(_) => lv
            .size_for(&BTreeMap::new())
            .unwrap_or(ferrometal_api::host_class::VmSize {
                cpus: 1,
                memory_mib: 1024,
                disk_gib: 1,
            }),
    };
    let namespace = claim.namespace().unwrap_or_default();
    if !deleting && !lv.serves_namespace(&namespace) {
        return not_served(
            claim,
            ctx,
            c::HOST_CLASS_NOT_ALLOWED,
            format!(
                "the HostClass {} does not serve claims of namespace {namespace}",
                class.name_any()
            ),
            deleting,
        )
        .await;
    }
    let Some(uri) = connection(lv, ctx).await? else {
        return not_served(
            claim,
            ctx,
            c::HOST_CLASS_INVALID,
            "the claim's HostClass cannot reach its virtual machine host (its connection \
             is not configured); the infrastructure team can see why"
                .into(),
            deleting,
        )
        .await;
    };
    let (config_drive, data_failed) = if deleting {
        (None, None)
    } else {
        data(claim, ctx).await?
    };
    let image = claim.spec.image.as_ref().filter(|_| !deleting);
    let format = image
        .and_then(|i| i.format)
        .map(|f| serde_json::to_value(f).ok())
        .and_then(|v| v?.as_str().map(str::to_string))
        .unwrap_or_else(|| {
            if image.is_some_and(|i| i.url.ends_with(".qcow2")) {
                "qcow2".into()
            } else {
                "raw".into()
            }
        });
    if image.is_some() && format != "raw" && format != "qcow2" {
        return not_served(
            claim,
            ctx,
            c::INVALID_REQUEST,
            format!("spec.image.format: {format:?}: a virtual machine is given raw or qcow2"),
            deleting,
        )
        .await;
    }
    if let Some(i) = image {
        let checksum_url = i
            .checksum
            .as_deref()
            .map(str::trim)
            .filter(|c| c.contains("://"));
        for (field, url) in [
            ("spec.image.url", Some(i.url.as_str())),
            ("spec.image.checksum", checksum_url),
        ] {
            let Some(url) = url else { continue };
            if !url_allowed(&lv.image_url_prefixes, url) {
                let from = if lv.image_url_prefixes.is_empty() {
                    "http:// or https:// URLs".to_string()
                } else {
                    lv.image_url_prefixes.join(", ")
                };
                return not_served(
                    claim,
                    ctx,
                    c::INVALID_REQUEST,
                    format!(
                        "{field}: {url:?}: the claim's HostClass takes images only from {from}"
                    ),
                    deleting,
                )
                .await;
            }
        }
    }
    let uid = claim.uid().unwrap_or_default();
    let n = names(lv.name_prefix(), &uid);
    let held_reboot = claim
        .annotations()
        .keys()
        .any(|a| a.starts_with(ann::REBOOT_PREFIX));
    let power_on = claim.spec.powered_on && !held_reboot;
    if let Some(r) = &request
        && r.needs_power_on
        && !deleting
        && (!power_on || last_power(last.as_ref()).is_some_and(|p| p != Power::On))
    {
        // A VM that is (or is to be) off has nothing to restart: the request is consumed.
        let note = format!("{}: not done, the virtual machine is powered off", r.name);
        consumed(claim, ctx, r.annotation, &event(r.skipped, note)).await?;
        return Ok(Action::requeue(RETRY));
    }
    let action = request
        .as_ref()
        .filter(|_| ctx.forwarded(&k) != token)
        .map(|r| r.action);
    let want = Want {
        uri,
        pool: lv.pool().to_string(),
        domain: DomainSpec {
            name: n.domain.clone(),
            domain_type: lv.domain_type().to_string(),
            cpus: size.cpus,
            memory_mib: size.memory_mib,
            uefi: lv.uefi(),
            pool: lv.pool().to_string(),
            disk_volume: n.disk.clone(),
            disk_format: format,
            config_volume: config_drive.as_ref().map(|_| n.config.clone()),
            network: lv.network.clone(),
            console_log: format!("{}/{}.console.log", lv.console_log_dir(), n.domain),
            claim: k.clone(),
        },
        names: n,
        image: image.map(|i| ImageWant {
            url: i.url.clone(),
            checksum: i.checksum.clone(),
            checksum_type: i
                .checksum_type
                .and_then(|t| serde_json::to_value(t).ok())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            allowed_prefixes: lv.image_url_prefixes.clone(),
        }),
        config_drive,
        disk_bytes: u64::from(size.disk_gib) << 30,
        power_on,
        action: action.filter(|_| !deleting),
        remove: deleting || image.is_none(),
        work: std::env::temp_dir().join(format!("ferrometal-vm-{uid}")),
    };
    // Data first: a VM never boots without the user data its tenant gave it.
    let blocked_on_data = data_failed.is_some() && want.image.is_some();
    let in_line = last
        .as_ref()
        .is_some_and(|(o, at)| satisfies(o, &want) && at.elapsed() < OBSERVE_EVERY);
    let retry_later = fresh && !last.as_ref().is_some_and(|(o, _)| satisfies(o, &want));
    // Before anything is made, the claim records the class that makes it (see `VM_CLASS`).
    let class_name = class.name_any();
    if !deleting && want.image.is_some() && claim.annotations().get(VM_CLASS) != Some(&class_name) {
        let patch = json!({"metadata": {
            "annotations": {VM_CLASS: class_name},
            "resourceVersion": claim.resource_version(),
        }});
        return match claims(ctx, claim)
            .patch(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            // The write wakes the claim again.
            Ok(_) => Ok(Action::requeue(OBSERVE_EVERY)),
            Err(e) if conflict(&e) || not_found(&e) => Ok(Action::requeue(RETRY)),
            Err(e) => Err(e.into()),
        };
    }
    let running = if busy {
        true
    } else if !in_line && !retry_later && !blocked_on_data {
        if want.action.is_some() {
            ctx.set_forwarded(&k, token.clone());
        }
        let object = ObjectRef::from_obj(claim);
        let claims_cache = ctx.claims.clone();
        let (waker, woken) = (ctx.vms.waker(), object.clone());
        ctx.vms.spawn(
            k.clone(),
            object,
            move |o| claims_cache.get(o).is_some(),
            vm_pass::converge(want.clone(), k.clone(), move || {
                let _ = waker.send(woken);
            }),
        );
        true
    } else {
        false
    };
    // The phase the status shows.
    let reported = claim
        .status
        .as_ref()
        .is_some_and(|st| st.condition(c::PROVISIONED).is_some());
    if running && last.is_none() && !deleting && reported {
        // The first look since this process started: the status stays as it was (a VM that
        // runs is not reported as being made) until the pass tells.
        return Ok(Action::requeue(OBSERVE_EVERY));
    }
    let phase = match &last {
        _ if running && want.remove && !deleting && last_power(last.as_ref()).is_some() => {
            Phase::Removing
        }
        // Retrying an unreachable libvirt host: unreachable until the retry gets through (a
        // status that said "being made" at every retry would flap, an Event each time).
        Some((Outcome::Unreachable, _)) if !(running && vm_pass::reached(&k)) => Phase::Unreachable,
        _ if running && last_power(last.as_ref()).is_none() && want.image.is_some() => {
            Phase::Creating
        }
        Some((Outcome::Unreachable, _)) => Phase::Unreachable,
        Some((Outcome::Failed { tenant, power }, _)) => match power {
            Some(p) => Phase::Running {
                on: *p == Power::On,
            },
            None => Phase::CreateFailed(tenant.clone()),
        },
        Some((Outcome::Seen { power: Some(p), .. }, _)) => Phase::Running {
            on: *p == Power::On,
        },
        Some((Outcome::Seen { power: None, .. }, _)) | None => {
            if want.image.is_some() {
                Phase::Creating
            } else {
                Phase::NoImage
            }
        }
    };
    if deleting {
        let gone = !running && matches!(last, Some((Outcome::Seen { power: None, .. }, _)));
        if gone {
            ctx.vm_seen.lock().unwrap().remove(&k);
            ctx.set_forwarded(&k, None);
            return super::release::let_go(claim, ctx).await;
        }
    }
    // The tenant's view of the VM's hardware, as a bare-metal claim's HardwareData copy.
    let hardware_data = match (&phase, &last) {
        (Phase::Running { .. }, Some((Outcome::Seen { macs, .. }, _))) if !deleting => {
            Some(hardware(claim, &want, macs, ctx).await?)
        }
        _ => claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
    };
    let deleting_msg = deleting.then_some("the virtual machine is being removed");
    let requeue = match &phase {
        _ if running || !retry_later => OBSERVE_EVERY,
        Phase::CreateFailed(_) => RETRY_CREATE,
        _ => RETRY,
    };
    write(
        claim,
        ctx,
        Input {
            claim,
            phase,
            data_failed,
            deleting: deleting_msg,
            hardware_data,
            now: &now(),
        },
    )
    .await?;
    Ok(Action::requeue(requeue))
}

fn last_power(last: Option<&(Outcome, Instant)>) -> Option<Power> {
    match last {
        Some((Outcome::Seen { power, .. } | Outcome::Failed { power, .. }, _)) => *power,
        _ => None,
    }
}

/// Whether the last pass left the VM as `want` has it.
fn satisfies(o: &Outcome, want: &Want) -> bool {
    let Outcome::Seen { power, .. } = o else {
        return false;
    };
    if want.action.is_some() {
        return false;
    }
    match (power, want.remove) {
        (None, true) => true,
        (None, false) => false,
        (Some(_), true) => false,
        (Some(p), false) => (*p == Power::On) == want.power_on,
    }
}

/// What the VM is, as inspection data: written next to the claim (owned by it) when it
/// changes.
async fn hardware(
    claim: &HostClaim,
    want: &Want,
    macs: &[String],
    ctx: &ClaimContext,
) -> Result<NamespacedRef, Error> {
    let d = &want.domain;
    let spec = HardwareDataSpec {
        hardware: Some(HardwareDetails {
            system_vendor: Some(HardwareSystemVendor {
                manufacturer: Some("QEMU".into()),
                product_name: Some("Standard PC (Q35 + ICH9, 2009)".into()),
                serial_number: None,
            }),
            ram_mebibytes: i64::from(d.memory_mib),
            nics: macs
                .iter()
                .enumerate()
                .map(|(i, mac)| NicDetails {
                    name: format!("eth{i}"),
                    model: Some("virtio".into()),
                    mac: mac.clone(),
                    pxe: i == 0,
                    ..Default::default()
                })
                .collect(),
            storage: vec![StorageDetails {
                name: "/dev/vda".into(),
                size_bytes: i64::try_from(want.disk_bytes).unwrap_or(i64::MAX),
                type_: Some(DiskType::Hdd),
                model: Some("virtio".into()),
                ..Default::default()
            }],
            cpu: Some(CpuDetails {
                arch: "x86_64".into(),
                count: i64::from(d.cpus),
                ..Default::default()
            }),
            hostname: Some(claim.name_any()),
            ..Default::default()
        }),
    };
    let ns = claim.namespace().unwrap_or_default();
    let existing = ctx
        .hardware
        .get(&ObjectRef::new(&claim.name_any()).within(&ns));
    if existing.as_ref().map(|e| &e.spec) != Some(&spec) {
        write_hardware_copy(&ctx.client, claim, &spec).await?;
    }
    Ok(NamespacedRef {
        namespace: ns,
        name: claim.name_any(),
    })
}

/// The libvirt URI from the class's connection Secret; `None` when it is missing (logged for
/// the infrastructure team; the tenant only reads that the class is not configured).
async fn connection(lv: &LibvirtClass, ctx: &ClaimContext) -> Result<Option<String>, Error> {
    let r = &lv.connection_secret_ref;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &r.namespace);
    let secret = match api.get_opt(&r.name).await {
        Ok(s) => s,
        Err(e) => return Err(e.into()),
    };
    let uri = secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(LIBVIRT_URI_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if uri.is_none() {
        tracing::warn!(
            secret = %format!("{}/{}", r.namespace, r.name),
            "a libvirt HostClass's connection Secret is missing or has no {LIBVIRT_URI_KEY:?} key"
        );
    }
    Ok(uri)
}

/// The config drive from the claim's data Secrets, or the first that could not be read.
async fn data(
    claim: &HostClaim,
    ctx: &ClaimContext,
) -> Result<(Option<ConfigDrive>, Option<(DataKind, String)>), Error> {
    let ns = claim.namespace().unwrap_or_default();
    let mut texts: BTreeMap<&'static str, String> = BTreeMap::new();
    for kind in DataKind::ALL {
        let Some((sns, name)) = kind.source(claim) else {
            continue;
        };
        if sns != ns {
            return Ok((
                None,
                Some((
                    kind,
                    format!(
                        "spec.{}: Secret {sns}/{name} is not in the claim's namespace",
                        kind.field()
                    ),
                )),
            ));
        }
        let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
        let secret = match api.get_opt(&name).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Ok((None, Some((kind, format!("Secret {name} not found")))));
            }
            Err(e) => return Err(e.into()),
        };
        let data = secret.data.unwrap_or_default();
        let Some(value) = [kind.field(), "value"].iter().find_map(|k| data.get(*k)) else {
            return Ok((
                None,
                Some((
                    kind,
                    format!("Secret {name} has no {:?} or \"value\" key", kind.field()),
                )),
            ));
        };
        texts.insert(kind.field(), String::from_utf8_lossy(&value.0).into_owned());
    }
    let name = claim.name_any();
    let mut meta = match texts.get("metaData").map(|t| structured(t)) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, v) in [
        ("uuid", claim.uid().unwrap_or_default()),
        ("hostname", name.clone()),
        ("local-hostname", name.clone()),
        ("name", name),
    ] {
        meta.entry(k).or_insert_with(|| json!(v));
    }
    Ok((
        Some(ConfigDrive {
            meta_data: Value::Object(meta),
            user_data: texts.get("userData").cloned(),
            network_data: texts.get("networkData").map(|t| structured(t)),
        }),
        None,
    ))
}

/// The one-shot reboot was done: it leaves the claim.
fn event_warning(reason: &str, note: String) -> HostEvent {
    HostEvent {
        warning: true,
        ..event(reason, note)
    }
}

/// Removes a one-shot annotation that was acted on (or refused), with its Event.
async fn consumed(
    claim: &HostClaim,
    ctx: &ClaimContext,
    annotation: &str,
    what: &HostEvent,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"annotations": {annotation: null}}});
    // A failed write leaves the annotation: its token, recorded before the action, keeps a
    // second one from following, and the next reconcile tries the removal again.
    if let Err(e) = claims(ctx, claim)
        .patch(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(claim = %key(claim), annotation, error = %e, "removing a one-shot annotation failed");
        return Ok(());
    }
    ctx.events
        .publish_about(claim, std::slice::from_ref(what))
        .await;
    Ok(())
}

pub(super) async fn not_served(
    claim: &HostClaim,
    ctx: &ClaimContext,
    reason: &'static str,
    msg: String,
    deleting: bool,
) -> Result<Action, Error> {
    write(
        claim,
        ctx,
        Input {
            claim,
            phase: Phase::NotServed(reason, msg),
            data_failed: None,
            deleting: deleting.then_some("the claim's virtual machine cannot be removed yet"),
            hardware_data: None,
            now: &now(),
        },
    )
    .await?;
    Ok(Action::requeue(Duration::from_secs(30)))
}

async fn write(claim: &HostClaim, ctx: &ClaimContext, input: Input<'_>) -> Result<(), Error> {
    write_new(claim, ctx, status::status(input)).await
}

/// The claim names the class it is served by (see `host_class`), or the default class.
pub(super) fn class_of(claim: &HostClaim, ctx: &ClaimContext) -> Result<Option<HostClass>, String> {
    let classes: Vec<HostClass> = ctx.classes.state().iter().map(|c| (**c).clone()).collect();
    ferrometal_api::host_class::class_for(claim.metadata.annotations.as_ref(), &classes)
        .map(|c| c.cloned())
}
