//! HostFirmwareSettings, as metal3 has them: the status holds the BIOS settings the host's
//! BMC reports and a reference to the FirmwareSchema (the attribute registry) that describes
//! them; the conditions say whether the wanted settings (`spec.settings`) are valid for that
//! schema (`Valid`) and whether they differ from the current ones (`ChangeDetected`).
//!
//! Reading and validating is all this controller does; the host controller applies valid
//! settings (in `preparing`, or on a provisioned host through servicing), and a detected
//! change says when. A HostFirmwareSettings is read when it is created (named after its host,
//! in the host's namespace, as metal3 names them), when its host's state or spec changes (not
//! on its power or timing writes), and every ten minutes while it wants settings. The BMC is
//! read through the per-BMC gate with a bounded timeout, on a task of its own ([`Reads`]): a
//! hung BMC holds that task, not one of the controller's workers.
//!
//! FirmwareSchemas are shared by hosts with the same registry: each is named after a hash of
//! its content (`schema-<hash>`), so equal registries land in one object. metal3 ties a schema
//! to every HostFirmwareSettings that uses it with an owner reference each; with a thousand
//! hosts of one model that is one object with a thousand owners, rewritten per host. Instead,
//! the schemas this controller wrote carry a label, and a sweep deletes one that no
//! HostFirmwareSettings names at two checks in a row (so one written just before its
//! settings' status is never taken). Schemas without the label (written by hand, or by
//! metal3) are never deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_api::firmware::{
    FirmwareSchema, FirmwareSchemaSpec, HostFirmwareSettings, HostFirmwareSettingsStatus,
    SchemaReference, SettingSchema, validate_settings, wanted_text,
};
use ferrometal_bmc::{Bios, BiosAttribute, setting_text};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::Store;
use serde_json::{Value, json};

use crate::conditions::{self, set_condition};
use crate::host_bmc::{self, ReadContext, ReadError, Reads, Taken};
use crate::shared_watch::{Watched, applied, changed_or_gone};

use ferrometal_api::firmware::FIRMWARE_UPDATED;
pub use ferrometal_api::firmware::{CHANGE_DETECTED, SETTINGS_READ as READ, VALID};
const FIELD_MANAGER: &str = "ferrometal-controller";
/// Marks the FirmwareSchemas this controller wrote: only those are ever deleted by it.
pub const SCHEMA_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "ferrometal");
const REFRESH: Duration = Duration::from_secs(600);

/// The settings as metal3 keeps them: every value a string; passwords (null) left out.
fn as_settings(attributes: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    attributes
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), setting_text(v)?)))
        .collect()
}

/// A registry attribute as metal3's FirmwareSchema describes one.
pub fn setting_schema(a: &BiosAttribute) -> SettingSchema {
    SettingSchema {
        attribute_type: a.kind.clone(),
        allowable_values: a.allowable_values.clone(),
        lower_bound: a.lower_bound,
        upper_bound: a.upper_bound,
        min_length: a.min_length,
        max_length: a.max_length,
        read_only: Some(a.read_only),
        unique: None,
    }
}

/// The registry as metal3's FirmwareSchema describes it.
fn as_schema(bios: &Bios) -> BTreeMap<String, SettingSchema> {
    bios.registry
        .iter()
        .map(|a| (a.name.clone(), setting_schema(a)))
        .collect()
}

/// `schema-` and 8 hex digits of FNV-1a over the schema's JSON: stable across releases, so
/// equal registries keep one name.
fn schema_name(schema: &BTreeMap<String, SettingSchema>) -> String {
    let bytes = serde_json::to_vec(schema).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("schema-{:08x}", hash >> 32)
}

/// The status after a successful read: current settings, schema reference, and the two
/// conditions from the wanted settings.
pub fn decide_status(
    hfs: &HostFirmwareSettings,
    current: BTreeMap<String, String>,
    schema: Option<(&str, &BTreeMap<String, SettingSchema>)>,
    now: &str,
) -> HostFirmwareSettingsStatus {
    let mut status = hfs.status.clone().unwrap_or_default();
    let generation = hfs.metadata.generation;
    if status.settings != current || status.last_updated.is_none() {
        status.last_updated = Some(now.to_string());
    }
    status.settings = current;
    let namespace = hfs.namespace().unwrap_or_default();
    status.firmware_schema = schema.map(|(name, _)| SchemaReference {
        namespace,
        name: name.to_string(),
    });
    // Without a registry, an attribute the BMC reports is all that can be checked.
    let fallback: BTreeMap<String, SettingSchema>;
    let schema = match schema {
        Some((_, s)) => s,
        None => {
            fallback = status
                .settings
                .keys()
                .map(|k| (k.clone(), SettingSchema::default()))
                .collect();
            &fallback
        }
    };
    let wanted = &hfs.spec.settings;
    let (valid, reason, message) = match validate_settings(schema, wanted) {
        Ok(()) => (true, "Success", String::new()),
        Err(why) => (false, "ConfigurationError", why),
    };
    let status_of = |ok: bool| if ok { "True" } else { "False" };
    set_condition(
        &mut status.conditions,
        VALID,
        status_of(valid),
        reason,
        &message,
        now,
        generation,
    );
    let differing: Vec<&str> = wanted
        .iter()
        .filter(|(k, v)| status.settings.get(*k) != Some(&wanted_text(v)))
        .map(|(k, _)| k.as_str())
        .collect();
    let changed = !differing.is_empty();
    let message = if changed {
        format!(
            "{} differ from the BMC's current settings: applied when the host is prepared \
             (an available host goes back to preparing), or on a provisioned host's reboot when \
             its HostUpdatePolicy says firmwareSettings: onReboot",
            differing.join(", ")
        )
    } else {
        String::new()
    };
    set_condition(
        &mut status.conditions,
        CHANGE_DETECTED,
        status_of(changed),
        "Success",
        &message,
        now,
        generation,
    );
    set_condition(
        &mut status.conditions,
        READ,
        "True",
        "Read",
        "",
        now,
        generation,
    );
    status
}

/// Marked by the host controller after it updated the host's firmware: to be read again.
fn updated(conditions: &[ferrometal_api::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == READ && c.status == "Unknown" && c.reason == FIRMWARE_UPDATED)
}

/// The host's firmware work is over and, if it is to be on, it is on again: the boot after a
/// flash is what applies settings staged with it, so a read before it would show the old ones.
/// (A host kept off is read as it is.)
fn settled(host: &BareMetalHost) -> bool {
    use ferrometal_api::{OperationalStatus, ProvisioningState};
    let Some(st) = host.status.as_ref() else {
        return false;
    };
    st.operational_status != OperationalStatus::Servicing
        && st.provisioning.state != ProvisioningState::Preparing
        && (!host.spec.online || st.powered_on)
}

/// The controller's context: what the read controllers share, and its reads in flight.
pub struct SettingsContext {
    read: Arc<ReadContext>,
    reads: Reads<HostFirmwareSettings, Bios>,
}

async fn reconcile(
    hfs: Arc<HostFirmwareSettings>,
    ctx: Arc<SettingsContext>,
) -> Result<Action, ReadError> {
    let ns = hfs.namespace().unwrap_or_default();
    let name = hfs.name_any();
    let taken = ctx.reads.take(&hfs);
    let Some(host) = ctx.read.hosts.get(&ObjectRef::new(&name).within(&ns)) else {
        // Another shard's host, or none yet: its events bring this back.
        return Ok(Action::await_change());
    };
    let conditions = hfs.status.as_ref().map(|s| s.conditions.as_slice());
    if !host_bmc::readable(&host) {
        return Ok(Action::await_change());
    }
    let (read, deferred) = match taken {
        Taken::Running => return Ok(Action::requeue(host_bmc::READ_BACKSTOP)),
        Taken::Done { read, deferred } => (read?, deferred),
        Taken::Idle => {
            if host_bmc::read_and_idle(
                hfs.spec.settings.is_empty(),
                conditions.unwrap_or_default(),
                hfs.metadata.generation,
                READ,
            ) || (updated(conditions.unwrap_or_default()) && !settled(&host))
            {
                return Ok(Action::await_change());
            }
            return Ok(ctx
                .reads
                .start(&ctx.read, host.clone(), &hfs, |bmc| async move {
                    bmc.bios().await
                }));
        }
    };
    let now = conditions::now();
    let status = match read {
        Ok(bios) => {
            let schema = as_schema(&bios);
            let schema_ref = if schema.is_empty() {
                None
            } else {
                let schema_name = schema_name(&schema);
                write_schema(&ctx.read, &ns, &schema_name, &host, &schema).await?;
                Some(schema_name)
            };
            decide_status(
                &hfs,
                as_settings(&bios.attributes),
                schema_ref.as_deref().map(|n| (n, &schema)),
                &now,
            )
        }
        Err(why) => {
            let mut status = hfs.status.clone().unwrap_or_default();
            set_condition(
                &mut status.conditions,
                READ,
                "False",
                "ReadFailed",
                &why,
                &now,
                hfs.metadata.generation,
            );
            status
        }
    };
    if Some(&status) != hfs.status.as_ref() {
        let api: Api<HostFirmwareSettings> = Api::namespaced(ctx.read.client.clone(), &ns);
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|e| ReadError::Write(name.clone(), e))?;
    }
    // Read again every ten minutes only when settings are wanted (drift matters then); one
    // asking for nothing (as each host gets) is read when its host changes, so a fleet's
    // steady state costs its BMCs nothing here. At once when the object or its host changed
    // while this read ran.
    Ok(if deferred {
        Action::requeue(Duration::ZERO)
    } else if hfs.spec.settings.is_empty() {
        Action::await_change()
    } else {
        Action::requeue(REFRESH)
    })
}

async fn write_schema(
    ctx: &ReadContext,
    ns: &str,
    name: &str,
    host: &BareMetalHost,
    schema: &BTreeMap<String, SettingSchema>,
) -> Result<(), ReadError> {
    let vendor = host
        .status
        .as_ref()
        .and_then(|s| s.hardware.as_ref())
        .and_then(|h| h.system_vendor.as_ref());
    let mut fs = FirmwareSchema::new(
        name,
        FirmwareSchemaSpec {
            hardware_vendor: vendor
                .and_then(|v| v.manufacturer.clone())
                .unwrap_or_default(),
            hardware_model: vendor
                .and_then(|v| v.product_name.clone())
                .unwrap_or_default(),
            schema: schema.clone(),
        },
    );
    fs.metadata.namespace = Some(ns.to_string());
    fs.metadata.labels = Some(BTreeMap::from([(
        SCHEMA_LABEL.0.to_string(),
        SCHEMA_LABEL.1.to_string(),
    )]));
    let api: Api<FirmwareSchema> = Api::namespaced(ctx.client.clone(), ns);
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&fs),
    )
    .await
    .map_err(|e| ReadError::Write(format!("FirmwareSchema {name}"), e))?;
    Ok(())
}

fn error_policy(
    _hfs: Arc<HostFirmwareSettings>,
    error: &ReadError,
    _ctx: Arc<SettingsContext>,
) -> Action {
    tracing::debug!(%error, "firmware settings");
    Action::requeue(Duration::from_secs(10))
}

/// The schemas (namespace, name) the given HostFirmwareSettings name.
fn named_schemas<'a>(
    settings: impl IntoIterator<Item = &'a HostFirmwareSettings>,
) -> BTreeSet<(String, String)> {
    settings
        .into_iter()
        .filter_map(|h| h.status.as_ref()?.firmware_schema.as_ref())
        .map(|r| (r.namespace.clone(), r.name.clone()))
        .collect()
}

/// The labelled schemas no HostFirmwareSettings names, by uid: those unnamed at the last
/// check too are deleted now (with their uid as a precondition, so a schema written again
/// meanwhile under the same name is left alone).
async fn sweep_schemas(
    client: &kube::Client,
    settings: &Store<HostFirmwareSettings>,
    unnamed_before: &BTreeSet<String>,
) -> Result<BTreeSet<String>, kube::Error> {
    let schemas: Api<FirmwareSchema> = Api::all(client.clone());
    let labelled = schemas
        .list(&ListParams::default().labels(&format!("{}={}", SCHEMA_LABEL.0, SCHEMA_LABEL.1)))
        .await?;
    let named = named_schemas(settings.state().iter().map(|h| h.as_ref()));
    let mut unnamed = BTreeSet::new();
    let mut candidates = Vec::new();
    for fs in labelled.items {
        let (ns, name, uid) = (fs.namespace().unwrap_or_default(), fs.name_any(), fs.uid());
        let Some(uid) = uid else { continue };
        if named.contains(&(ns.clone(), name.clone())) {
            continue;
        }
        if unnamed_before.contains(&uid) {
            candidates.push((ns, name, uid));
        } else {
            unnamed.insert(uid);
        }
    }
    // This process may watch only its shard's settings: the namespace's own list decides.
    let mut checked: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for (ns, name, uid) in candidates {
        if !checked.contains_key(&ns) {
            let all: Api<HostFirmwareSettings> = Api::namespaced(client.clone(), &ns);
            let listed = all.list(&ListParams::default()).await?;
            checked.insert(ns.clone(), named_schemas(&listed.items));
        }
        if checked[&ns].contains(&(ns.clone(), name.clone())) {
            continue;
        }
        let api: Api<FirmwareSchema> = Api::namespaced(client.clone(), &ns);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(namespace = %ns, schema = %name, "deleted a FirmwareSchema no HostFirmwareSettings names")
            }
            // Gone or written anew meanwhile: nothing to do.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(unnamed)
}

/// Runs the HostFirmwareSettings controller until `shutdown` resolves, on the process's one
/// watch of them; `hosts` wakes the settings of a host that changed. Every `sweep`, the
/// schemas it wrote that nothing names any more are collected.
pub async fn run(
    ctx: Arc<ReadContext>,
    hosts: Watched<BareMetalHost>,
    settings: Watched<HostFirmwareSettings>,
    sweep: Duration,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let store = settings.store.clone();
    let (reads, woken) = Reads::new(settings.store.clone());
    let ctx = Arc::new(SettingsContext { read: ctx, reads });
    let controller = Controller::for_shared_stream(applied(settings.events), settings.store)
        .watches_shared_stream(
            changed_or_gone(hosts.events, host_bmc::read_trigger),
            host_bmc::named_after,
        )
        .reconcile_on(woken)
        .with_config(Config::default().concurrency(4))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {});
    let sweeper = async {
        let mut unnamed = BTreeSet::new();
        let mut tick = tokio::time::interval(sweep);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match sweep_schemas(&client, &store, &unnamed).await {
                Ok(now_unnamed) => unnamed = now_unnamed,
                Err(e) => tracing::debug!(error = %e, "FirmwareSchema sweep"),
            }
        }
    };
    // The controller ends at shutdown; the sweep ends with it.
    tokio::select! {
        () = controller => {}
        _ = sweeper => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::firmware::HostFirmwareSettingsSpec;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn hfs(wanted: &[(&str, IntOrString)]) -> HostFirmwareSettings {
        let mut h = HostFirmwareSettings::new(
            "node-a",
            HostFirmwareSettingsSpec {
                settings: wanted
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            },
        );
        h.metadata.namespace = Some("infra".into());
        h.metadata.generation = Some(3);
        h
    }

    fn schema() -> BTreeMap<String, SettingSchema> {
        BTreeMap::from([
            (
                "ProcTurboMode".to_string(),
                SettingSchema {
                    attribute_type: "Enumeration".into(),
                    allowable_values: vec!["Enabled".into(), "Disabled".into()],
                    ..Default::default()
                },
            ),
            (
                "NumCores".to_string(),
                SettingSchema {
                    attribute_type: "Integer".into(),
                    lower_bound: Some(1),
                    upper_bound: Some(64),
                    ..Default::default()
                },
            ),
        ])
    }

    fn current() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("ProcTurboMode".to_string(), "Enabled".to_string()),
            ("NumCores".to_string(), "8".to_string()),
        ])
    }

    fn cond<'a>(s: &'a HostFirmwareSettingsStatus, t: &str) -> (&'a str, &'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn conditions_follow_the_wanted_settings() {
        let s = schema();
        let now = "2026-11-27T00:00:00Z";
        // (wanted settings, valid, what ChangeDetected names)
        type Case<'a> = (&'a [(&'a str, IntOrString)], bool, Option<&'a str>);
        let cases: &[Case] = &[
            (&[], true, None),
            (&[("NumCores", IntOrString::Int(8))], true, None),
            (
                &[("NumCores", IntOrString::Int(16))],
                true,
                Some("NumCores differ"),
            ),
            (
                &[("ProcTurboMode", IntOrString::String("Disabled".into()))],
                true,
                Some("ProcTurboMode differ"),
            ),
            (
                &[("NumCores", IntOrString::Int(99))],
                false,
                Some("NumCores"),
            ),
            (&[("Warp", IntOrString::Int(9))], false, Some("Warp")),
        ];
        for (wanted, valid, change) in cases {
            let h = hfs(wanted);
            let st = decide_status(&h, current(), Some(("schema-1", &s)), now);
            assert_eq!(cond(&st, VALID).0 == "True", *valid, "{wanted:?}: {st:?}");
            let (changed, _, message) = cond(&st, CHANGE_DETECTED);
            match change {
                Some(what) => {
                    assert_eq!(changed, "True", "{wanted:?}");
                    assert!(message.contains(what), "{message}");
                    assert!(message.contains("onReboot"), "{message}");
                }
                None => assert_eq!(changed, "False", "{wanted:?}"),
            }
            assert_eq!(st.settings, current());
            assert_eq!(st.firmware_schema.as_ref().unwrap().name, "schema-1");
            assert!(
                st.conditions
                    .iter()
                    .all(|c| c.observed_generation == Some(3))
            );
        }
        let invalid = decide_status(
            &hfs(&[("NumCores", IntOrString::Int(99))]),
            current(),
            Some(("schema-1", &s)),
            now,
        );
        assert_eq!(
            cond(&invalid, VALID).2,
            "Setting NumCores is invalid, integer 99 is above maximum value 64"
        );
    }

    #[test]
    fn without_a_registry_only_known_attributes_pass() {
        let now = "2026-11-27T00:00:00Z";
        let st = decide_status(
            &hfs(&[("NumCores", IntOrString::Int(99))]),
            current(),
            None,
            now,
        );
        assert_eq!(cond(&st, VALID).0, "True");
        assert!(st.firmware_schema.is_none());
        let st = decide_status(&hfs(&[("Warp", IntOrString::Int(1))]), current(), None, now);
        assert_eq!(cond(&st, VALID).0, "False");
    }

    #[test]
    fn equal_registries_share_a_schema_name() {
        assert_eq!(schema_name(&schema()), schema_name(&schema()));
        let mut other = schema();
        other.remove("NumCores");
        assert_ne!(schema_name(&schema()), schema_name(&other));
        assert!(schema_name(&schema()).starts_with("schema-"));
    }

    #[test]
    fn values_are_kept_as_strings_and_passwords_left_out() {
        let attrs = BTreeMap::from([
            ("A".to_string(), json!("x")),
            ("B".to_string(), json!(8)),
            ("C".to_string(), json!(true)),
            ("P".to_string(), Value::Null),
        ]);
        let s = as_settings(&attrs);
        assert_eq!(s.len(), 3);
        assert_eq!(s["B"], "8");
        assert_eq!(s["C"], "true");
    }
}
