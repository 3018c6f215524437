//! The objects named after a host, in its namespace, that ask something of it:
//! HostFirmwareSettings, HostFirmwareComponents, HostUpdatePolicy and DataImage. What they ask
//! is read from the caches the host controller keeps of them; what the host did is recorded in
//! their status (the updates made, the image attached).

use ferrometal_api::firmware::{
    FIRMWARE_UPDATED, FirmwareUpdate, HostFirmwareComponents, HostFirmwareSettings,
    HostUpdatePolicy, SETTINGS_READ, VALID, wanted_text,
};
use ferrometal_api::media::DataImage;
use ferrometal_api::{BareMetalHost, ProvisioningState};
use ferrometal_provisioner::{ComponentUpdate, FirmwareChanges};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::error::ignore_not_found;

use super::decide::{DataImageResult, DataImageWork, FirmwareWork};

/// The field manager of the firmware objects' owner reference (and their empty spec).
const COMPANIONS_MANAGER: &str = "ferrometal-host-controller";

fn validated(conditions: &[ferrometal_api::Condition], generation: Option<i64>) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == VALID && c.status == "True" && c.observed_generation == generation)
}

/// The updates to make: those of a validated object not yet recorded as made (metal3's
/// difference of `spec.updates` and `status.updates`).
pub fn component_updates(hfc: &HostFirmwareComponents) -> Vec<ComponentUpdate> {
    let Some(status) = hfc.status.as_ref() else {
        return Vec::new();
    };
    if !validated(&status.conditions, hfc.metadata.generation) {
        return Vec::new();
    }
    hfc.spec
        .updates
        .iter()
        .filter(|u| !status.updates.contains(u))
        .map(|u| ComponentUpdate {
            component: u.component.clone(),
            url: u.url.clone(),
        })
        .collect()
}

/// The settings to change: only from an object whose wanted settings were validated, for its
/// current generation, against a read of the BMC; only those the BMC does not report already.
pub fn settings_changes(hfs: &HostFirmwareSettings) -> FirmwareChanges {
    let Some(status) = hfs.status.as_ref().filter(|s| !s.settings.is_empty()) else {
        return FirmwareChanges::default();
    };
    if !validated(&status.conditions, hfs.metadata.generation) {
        return FirmwareChanges::default();
    }
    let settings = hfs
        .spec
        .settings
        .iter()
        .map(|(name, value)| (name.clone(), wanted_text(value)))
        .filter(|(name, value)| status.settings.get(name) != Some(value))
        .collect();
    FirmwareChanges {
        settings,
        ..Default::default()
    }
}

/// What a HostFirmwareSettings asks of its host, as a hash (0: nothing): the changes to make,
/// and the BMC read they were compared with (a read after the changes were made ends them).
/// Only a change of it wakes the host (`shared_watch::ask_changed`): the object's controller
/// writes its status after each read of the BMC, and one is made for every registered host.
pub fn settings_ask(hfs: &HostFirmwareSettings) -> u64 {
    let changes = settings_changes(hfs);
    if changes.is_empty() {
        return 0;
    }
    let read = hfs.status.as_ref().and_then(|s| s.last_updated.as_deref());
    ask_hash(&(&changes.settings, read))
}

/// What a HostFirmwareComponents asks of its host, as [`settings_ask`].
pub fn components_ask(hfc: &HostFirmwareComponents) -> u64 {
    let updates = component_updates(hfc);
    if updates.is_empty() {
        return 0;
    }
    let read = hfc.status.as_ref().and_then(|s| s.last_updated.as_deref());
    ask_hash(&(&updates, read))
}

fn ask_hash(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    // 0 is "asks nothing".
    h.finish().max(1)
}

/// The caches the host controller keeps of a host's firmware objects.
pub struct CompanionStores {
    pub settings: Store<HostFirmwareSettings>,
    pub components: Store<HostFirmwareComponents>,
    pub policies: Store<HostUpdatePolicy>,
    pub data_images: Store<DataImage>,
}

/// The host's DataImage, if it has one.
pub fn data_image_work(host: &BareMetalHost, stores: &CompanionStores) -> Option<DataImageWork> {
    let ns = host.namespace().unwrap_or_default();
    let di = stores
        .data_images
        .get(&ObjectRef::new(&host.name_any()).within(&ns))?;
    let status = di.status.clone().unwrap_or_default();
    Some(DataImageWork {
        url: di.spec.url.clone(),
        deleting: di.metadata.deletion_timestamp.is_some(),
        attached: status.attached_image.map(|a| a.url),
        error: status.error.map(|e| e.message),
    })
}

/// The server-side apply that creates a host's firmware object of `kind`, with `spec` (empty),
/// owned by the host; for one a user wrote first (`spec` None), it only adds the owner
/// reference: naming even an empty list would claim the field the user's own manager holds
/// (HostFirmwareComponents' `spec.updates`), and conflict.
fn owned_by_host(
    host: &BareMetalHost,
    kind: &str,
    spec: Option<serde_json::Value>,
) -> serde_json::Value {
    let mut object = serde_json::json!({
        "apiVersion": "metal3.io/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": host.name_any(),
            "namespace": host.namespace().unwrap_or_default(),
            "ownerReferences": [{
                "apiVersion": BareMetalHost::api_version(&()),
                "kind": BareMetalHost::kind(&()),
                "name": host.name_any(),
                "uid": host.uid().unwrap_or_default(),
            }],
        },
    });
    if let Some(spec) = spec {
        object["spec"] = spec;
    }
    object
}

fn owns<K: ResourceExt>(object: Option<std::sync::Arc<K>>, host: &BareMetalHost) -> bool {
    object.is_some_and(|o| {
        o.owner_references()
            .iter()
            .any(|r| Some(&r.uid) == host.metadata.uid.as_ref())
    })
}

/// As metal3 does at registration: every registered host gets a HostFirmwareSettings named
/// after it, and a host behind a Redfish BMC (which keeps a firmware inventory) a
/// HostFirmwareComponents, both owned by the host so that they go with it. A host whose
/// objects are in the cache with its owner reference costs nothing; one without gets a
/// server-side apply each (create, or adopt what a user wrote first). Run on every reconcile,
/// so hosts registered before this existed get theirs too.
pub async fn ensure_firmware_objects(
    client: &kube::Client,
    host: &BareMetalHost,
    state: ProvisioningState,
    stores: &CompanionStores,
) -> Result<(), kube::Error> {
    // The hosts metal3 gives firmware objects: registered, not detached, not going away.
    if !crate::host_bmc::readable_in(host, state) || host.metadata.uid.is_none() {
        return Ok(());
    }
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let params = PatchParams::apply(COMPANIONS_MANAGER);
    let settings = stores.settings.get(&ObjectRef::new(&name).within(&ns));
    if !owns(settings.clone(), host) {
        let api: Api<HostFirmwareSettings> = Api::namespaced(client.clone(), &ns);
        let object = owned_by_host(
            host,
            "HostFirmwareSettings",
            settings
                .is_none()
                .then(|| serde_json::json!({"settings": {}})),
        );
        api.patch(&name, &params, &Patch::Apply(&object)).await?;
    }
    let redfish = host
        .spec
        .bmc
        .as_ref()
        .and_then(|b| ferrometal_bmc::BmcAddress::parse(&b.address).ok())
        .is_some_and(|a| a.protocol() == ferrometal_bmc::Protocol::Redfish);
    let components = stores.components.get(&ObjectRef::new(&name).within(&ns));
    if redfish && !owns(components.clone(), host) {
        let api: Api<HostFirmwareComponents> = Api::namespaced(client.clone(), &ns);
        let object = owned_by_host(
            host,
            "HostFirmwareComponents",
            components
                .is_none()
                .then(|| serde_json::json!({"updates": []})),
        );
        api.patch(&name, &params, &Patch::Apply(&object)).await?;
    }
    Ok(())
}

/// Records in the host's DataImage what the host did with it.
pub async fn record_data_image(
    client: &kube::Client,
    host: &BareMetalHost,
    stores: &CompanionStores,
    result: &DataImageResult,
) -> Result<(), kube::Error> {
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let now = crate::conditions::now();
    let status = match result {
        DataImageResult::Attached(url) => serde_json::json!({
            "attachedImage": {"url": url}, "error": null, "lastReconciled": now,
        }),
        DataImageResult::Detached => {
            serde_json::json!({"attachedImage": null, "error": null, "lastReconciled": now})
        }
        DataImageResult::Failed(message) => {
            let count = stores
                .data_images
                .get(&ObjectRef::new(&name).within(&ns))
                .and_then(|d| d.status.clone()?.error)
                .map_or(0, |e| e.count);
            serde_json::json!({
                "error": {"count": count + 1, "message": message}, "lastReconciled": now,
            })
        }
    };
    let api: Api<DataImage> = Api::namespaced(client.clone(), &ns);
    ignore_not_found(
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await,
    )
    .map(drop)
}

pub fn firmware_work(host: &BareMetalHost, stores: &CompanionStores) -> FirmwareWork {
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let hfs = stores.settings.get(&ObjectRef::new(&name).within(&ns));
    let hfc = stores.components.get(&ObjectRef::new(&name).within(&ns));
    let policy = stores.policies.get(&ObjectRef::new(&name).within(&ns));
    let mut changes = hfs.as_deref().map(settings_changes).unwrap_or_default();
    changes.updates = hfc.as_deref().map(component_updates).unwrap_or_default();
    let settings_read = hfs
        .as_deref()
        .and_then(|h| h.status.as_ref()?.last_updated.clone());
    let components_read = hfc
        .as_deref()
        .and_then(|h| h.status.as_ref()?.last_updated.clone());
    let read = match (settings_read, components_read) {
        (None, None) => None,
        (s, c) => Some(format!(
            "{}|{}",
            s.unwrap_or_default(),
            c.unwrap_or_default()
        )),
    };
    let on_reboot = |field: fn(&HostUpdatePolicy) -> &str| {
        policy.as_deref().is_some_and(|p| field(p) == "onReboot")
    };
    FirmwareWork {
        changes,
        read,
        settings_on_reboot: on_reboot(|p| &p.spec.firmware_settings),
        updates_on_reboot: on_reboot(|p| &p.spec.firmware_updates),
    }
}

/// Records updates made in the host's HostFirmwareComponents (`status.updates`, as metal3
/// records them), each replacing an earlier one of the same component.
pub async fn record_updates(
    client: &kube::Client,
    host: &BareMetalHost,
    stores: &CompanionStores,
    done: &[ComponentUpdate],
) -> Result<(), kube::Error> {
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let mut updates = stores
        .components
        .get(&ObjectRef::new(&name).within(&ns))
        .and_then(|h| h.status.clone())
        .map(|s| s.updates)
        .unwrap_or_default();
    for u in done {
        updates.retain(|r| r.component != u.component);
        updates.push(FirmwareUpdate {
            component: u.component.clone(),
            url: u.url.clone(),
        });
    }
    let api: Api<HostFirmwareComponents> = Api::namespaced(client.clone(), &ns);
    let patch = serde_json::json!({ "status": { "updates": updates } });
    // Deleted meanwhile: nothing left to record in.
    ignore_not_found(
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )
    .map(drop)
}

/// A flashed BIOS may have changed or reset settings: the host's HostFirmwareSettings is marked
/// as not read (`SettingsRead` Unknown), which makes its controller read the BMC again even when
/// it asks for nothing (such an object is otherwise read only when made or changed).
pub async fn settings_to_read_again(
    client: &kube::Client,
    host: &BareMetalHost,
) -> Result<(), kube::Error> {
    let api: Api<HostFirmwareSettings> =
        Api::namespaced(client.clone(), &host.namespace().unwrap_or_default());
    let name = host.name_any();
    // On the version just read, so a read written meanwhile (which may predate the update) is
    // not taken for the one after it: on a conflict, look again.
    for _ in 0..3 {
        let Some(hfs) = api.get_opt(&name).await? else {
            return Ok(());
        };
        let mut conditions = hfs
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let Some(read) = conditions.iter().find(|c| c.type_ == SETTINGS_READ) else {
            // Never read yet: its first read comes anyway.
            return Ok(());
        };
        let generation = read.observed_generation;
        crate::conditions::set_condition(
            &mut conditions,
            SETTINGS_READ,
            "Unknown",
            FIRMWARE_UPDATED,
            "the host's firmware was updated: its settings are read again",
            &crate::conditions::now(),
            generation,
        );
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": hfs.resource_version() },
            "status": { "conditions": conditions },
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            other => return ignore_not_found(other).map(drop),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::Condition;
    use ferrometal_api::firmware::{HostFirmwareSettingsSpec, HostFirmwareSettingsStatus};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn hfs(valid: &str, observed: i64) -> HostFirmwareSettings {
        let mut h = HostFirmwareSettings::new(
            "h",
            HostFirmwareSettingsSpec {
                settings: [
                    ("Cores".to_string(), IntOrString::Int(16)),
                    ("Mode".to_string(), IntOrString::String("Uefi".into())),
                ]
                .into(),
            },
        );
        h.metadata.generation = Some(2);
        h.status = Some(HostFirmwareSettingsStatus {
            settings: [
                ("Cores".to_string(), "8".to_string()),
                ("Mode".to_string(), "Uefi".to_string()),
            ]
            .into(),
            conditions: vec![Condition {
                type_: VALID.into(),
                status: valid.into(),
                reason: "Success".into(),
                message: String::new(),
                last_transition_time: None,
                observed_generation: Some(observed),
            }],
            ..Default::default()
        });
        h
    }

    #[test]
    fn a_firmware_object_wakes_its_host_only_when_its_ask_changes() {
        use futures::StreamExt;
        use kube::runtime::watcher::Event;
        let mut quiet = hfs("True", 2);
        quiet.spec.settings.clear();
        let asking = hfs("True", 2);
        let mut read_again = asking.clone();
        read_again.status.as_mut().unwrap().last_updated = Some("later".into());
        let mut made = read_again.clone();
        let read = &mut made.status.as_mut().unwrap().settings;
        read.insert("Cores".into(), "16".into());
        assert_eq!(settings_ask(&quiet), 0);
        assert_eq!(settings_ask(&made), 0);
        assert_ne!(settings_ask(&asking), 0);
        let events = vec![
            // Made by the host controller, asking nothing; then its controller's first read.
            Event::Init,
            Event::InitApply(quiet.clone()),
            Event::InitDone,
            Event::Apply(quiet.clone()),
            // Validated changes: the host is woken, once.
            Event::Apply(asking.clone()),
            Event::Apply(asking.clone()),
            // A new read to compare them with, then the read that shows them made.
            Event::Apply(read_again.clone()),
            Event::Apply(made.clone()),
            // Deleted asking nothing; then asked again and deleted while asking.
            Event::Delete(made.clone()),
            Event::Apply(asking.clone()),
            Event::Delete(asking.clone()),
        ]
        .into_iter()
        .map(|e| crate::shared_watch::shared(e, None));
        let woken: Vec<u64> = futures::executor::block_on(
            crate::shared_watch::ask_changed(futures::stream::iter(events).boxed(), settings_ask)
                .map(|o| settings_ask(&o))
                .collect(),
        );
        let (a, r) = (settings_ask(&asking), settings_ask(&read_again));
        assert_ne!(a, r);
        assert_eq!(woken, [a, r, 0, a, a]);
    }

    #[test]
    fn only_validated_differing_settings_are_changed() {
        let changes = settings_changes(&hfs("True", 2));
        assert_eq!(
            changes.settings,
            [("Cores".to_string(), "16".to_string())].into()
        );
        // Not valid, or validated for an older generation: nothing is changed.
        assert!(settings_changes(&hfs("False", 2)).is_empty());
        assert!(settings_changes(&hfs("True", 1)).is_empty());
        // Never read from the BMC: nothing to compare with, nothing is changed.
        let mut unread = hfs("True", 2);
        unread.status.as_mut().unwrap().settings.clear();
        assert!(settings_changes(&unread).is_empty());
    }
}
