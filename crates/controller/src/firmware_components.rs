//! HostFirmwareComponents, as metal3 has them: the status lists the host's firmware
//! components (`bios`, `bmc`, and `nic:<adapter Id>` for each network adapter, as Ironic names
//! them) with the version first seen (`initialVersion`, kept) and the one
//! the BMC reports now (`currentVersion`); `Valid` says whether the wanted updates name
//! components metal3 accepts (`bmc`, `bios`, `nic:...`) with a URL, and `ChangeDetected`
//! whether they differ from the updates last applied (`status.updates`).
//!
//! Reading is all this controller does; the host controller makes the updates (in `preparing`,
//! or through servicing) and records them in `status.updates`. A component whose version moved
//! after an update was recorded gets `lastVersionFlashed` and `updatedAt`.
//! Read when the object is created (named after its host, in the host's namespace), when its
//! host changes and, while it asks for updates, every ten minutes, through the per-BMC gate and
//! off the reconcile workers ([`Reads`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_api::firmware::{
    FirmwareComponentStatus, HostFirmwareComponents, HostFirmwareComponentsStatus,
};
use ferrometal_bmc::FirmwareVersions;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::conditions::{self, set_condition};
use crate::host_bmc::{self, ReadContext, ReadError, Reads, Taken};
use crate::shared_watch::{Watched, applied, changed_or_gone};

pub use ferrometal_api::firmware::{CHANGE_DETECTED, VALID, VERSIONS_READ as READ};
const REFRESH: Duration = Duration::from_secs(600);

/// metal3's rule for the components an update may name.
fn invalid_component(name: &str) -> bool {
    !(name == "bmc" || name == "bios" || name.starts_with("nic:"))
}

/// The status after a read: each component's versions (the first one seen kept as
/// `initialVersion`), and the two conditions from the wanted updates.
pub fn decide_status(
    hfc: &HostFirmwareComponents,
    versions: &FirmwareVersions,
    now: &str,
) -> HostFirmwareComponentsStatus {
    let mut status = hfc.status.clone().unwrap_or_default();
    let generation = hfc.metadata.generation;
    let before = status.components.clone();
    for (component, version) in versions.components() {
        match status
            .components
            .iter_mut()
            .find(|c| c.component == component)
        {
            Some(c) => c.current_version = version,
            None => status.components.push(FirmwareComponentStatus {
                component,
                initial_version: version.clone(),
                current_version: version,
                ..Default::default()
            }),
        }
    }
    for c in &mut status.components {
        let moved = before
            .iter()
            .find(|b| b.component == c.component)
            .is_some_and(|b| b.current_version != c.current_version);
        let flashed = status.updates.iter().any(|u| u.component == c.component);
        if flashed && (moved || c.last_version_flashed.is_empty()) {
            c.last_version_flashed = c.current_version.clone();
            c.updated_at = Some(now.to_string());
        }
    }
    if status.components != before || status.last_updated.is_none() {
        status.last_updated = Some(now.to_string());
    }
    let wanted = &hfc.spec.updates;
    let problem = wanted.iter().find_map(|u| {
        if invalid_component(&u.component) {
            Some(format!(
                "component {} is invalid, only 'bmc', 'bios', or names starting with 'nic:' \
                 are allowed as update names",
                u.component
            ))
        } else if u.url.is_empty() {
            Some(format!("component {} has no url", u.component))
        } else {
            None
        }
    });
    let (valid, reason, message) = match problem {
        None => ("True", "OK", String::new()),
        Some(why) => ("False", "ConfigurationError", why),
    };
    set_condition(
        &mut status.conditions,
        VALID,
        valid,
        reason,
        &message,
        now,
        generation,
    );
    let changed = *wanted != status.updates;
    let message = if changed {
        "the wanted updates differ from those last applied: made when the host is prepared \
         (an available host goes back to preparing), or on a provisioned host's reboot when \
         its HostUpdatePolicy says firmwareUpdates: onReboot"
    } else {
        ""
    };
    set_condition(
        &mut status.conditions,
        CHANGE_DETECTED,
        if changed { "True" } else { "False" },
        "OK",
        message,
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

/// The controller's context: what the read controllers share, and its reads in flight.
pub struct ComponentsContext {
    read: Arc<ReadContext>,
    reads: Reads<HostFirmwareComponents, FirmwareVersions>,
}

async fn reconcile(
    hfc: Arc<HostFirmwareComponents>,
    ctx: Arc<ComponentsContext>,
) -> Result<Action, ReadError> {
    let ns = hfc.namespace().unwrap_or_default();
    let name = hfc.name_any();
    let taken = ctx.reads.take(&hfc);
    let Some(host) = ctx.read.hosts.get(&ObjectRef::new(&name).within(&ns)) else {
        return Ok(Action::await_change());
    };
    let conditions = hfc.status.as_ref().map(|s| s.conditions.as_slice());
    if !host_bmc::readable(&host) {
        return Ok(Action::await_change());
    }
    let (read, deferred) = match taken {
        Taken::Running => return Ok(Action::requeue(host_bmc::READ_BACKSTOP)),
        Taken::Done { read, deferred } => (read?, deferred),
        Taken::Idle => {
            if host_bmc::read_and_idle(
                hfc.spec.updates.is_empty(),
                conditions.unwrap_or_default(),
                hfc.metadata.generation,
                READ,
            ) {
                return Ok(Action::await_change());
            }
            return Ok(ctx.reads.start(&ctx.read, host, &hfc, |bmc| async move {
                bmc.firmware_versions().await
            }));
        }
    };
    let now = conditions::now();
    let status = match read {
        Ok(versions) => decide_status(&hfc, &versions, &now),
        Err(why) => {
            let mut status = hfc.status.clone().unwrap_or_default();
            set_condition(
                &mut status.conditions,
                READ,
                "False",
                "ReadFailed",
                &why,
                &now,
                hfc.metadata.generation,
            );
            status
        }
    };
    if Some(&status) != hfc.status.as_ref() {
        // `updates` is the host controller's record of the updates it made: never written
        // from this (possibly older) copy.
        let mut body = serde_json::to_value(&status).unwrap_or_default();
        if let Some(fields) = body.as_object_mut() {
            fields.remove("updates");
        }
        let api: Api<HostFirmwareComponents> = Api::namespaced(ctx.read.client.clone(), &ns);
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": body })),
        )
        .await
        .map_err(|e| ReadError::Write(name.clone(), e))?;
    }
    // As the settings: read again periodically only while updates are asked for; at once when
    // the object or its host changed while this read ran.
    Ok(if deferred {
        Action::requeue(Duration::ZERO)
    } else if hfc.spec.updates.is_empty() {
        Action::await_change()
    } else {
        Action::requeue(REFRESH)
    })
}

fn error_policy(
    _hfc: Arc<HostFirmwareComponents>,
    error: &ReadError,
    _ctx: Arc<ComponentsContext>,
) -> Action {
    tracing::debug!(%error, "firmware components");
    Action::requeue(Duration::from_secs(10))
}

/// Runs the HostFirmwareComponents controller until `shutdown` resolves; `hosts` wakes the
/// components of a host that changed.
pub async fn run(
    ctx: Arc<ReadContext>,
    hosts: Watched<BareMetalHost>,
    components: Watched<HostFirmwareComponents>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (reads, woken) = Reads::new(components.store.clone());
    let ctx = Arc::new(ComponentsContext { read: ctx, reads });
    Controller::for_shared_stream(applied(components.events), components.store)
        .watches_shared_stream(
            changed_or_gone(hosts.events, host_bmc::read_trigger),
            host_bmc::named_after,
        )
        .reconcile_on(woken)
        .with_config(Config::default().concurrency(4))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::firmware::{FirmwareUpdate, HostFirmwareComponentsSpec};

    fn hfc(
        updates: &[(&str, &str)],
        status: Option<HostFirmwareComponentsStatus>,
    ) -> HostFirmwareComponents {
        let mut h = HostFirmwareComponents::new(
            "node-a",
            HostFirmwareComponentsSpec {
                updates: updates
                    .iter()
                    .map(|(c, u)| FirmwareUpdate {
                        component: c.to_string(),
                        url: u.to_string(),
                    })
                    .collect(),
            },
        );
        h.metadata.generation = Some(2);
        h.status = status;
        h
    }

    fn versions(bios: &str, bmc: &str) -> FirmwareVersions {
        FirmwareVersions {
            bios: Some(bios.into()),
            bmc: Some(bmc.into()),
            nics: [("NIC.Slot.1".to_string(), format!("{bmc}-nic"))].into(),
        }
    }

    fn cond<'a>(s: &'a HostFirmwareComponentsStatus, t: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.message.as_str())
    }

    #[test]
    fn the_first_version_seen_is_kept_as_initial() {
        let now = "2026-11-27T00:00:00Z";
        let first = decide_status(&hfc(&[], None), &versions("1.0", "2.0"), now);
        let bios = &first.components[0];
        assert_eq!(
            (bios.component.as_str(), bios.initial_version.as_str()),
            ("bios", "1.0")
        );
        assert_eq!(first.components[1].current_version, "2.0");
        let nic = &first.components[2];
        assert_eq!(
            (nic.component.as_str(), nic.current_version.as_str()),
            ("nic:NIC.Slot.1", "2.0-nic")
        );
        let later = decide_status(
            &hfc(&[], Some(first)),
            &versions("1.1", "2.0"),
            "2026-11-28T00:00:00Z",
        );
        assert_eq!(later.components[0].initial_version, "1.0");
        assert_eq!(later.components[0].current_version, "1.1");
        assert_eq!(later.last_updated.as_deref(), Some("2026-11-28T00:00:00Z"));
        assert_eq!(cond(&later, CHANGE_DETECTED).0, "False");
    }

    #[test]
    fn updates_are_checked_as_metal3_checks_them() {
        let now = "2026-11-27T00:00:00Z";
        // (updates as (component, url), Valid, ChangeDetected)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case] = &[
            (&[("bios", "http://fw/bios.bin")], "True", "True"),
            (&[("nic:NIC.1", "http://fw/nic.bin")], "True", "True"),
            (&[("raid", "http://fw/raid.bin")], "False", "True"),
            (&[("bmc", "")], "False", "True"),
            (&[], "True", "False"),
        ];
        for (updates, valid, changed) in cases {
            let st = decide_status(&hfc(updates, None), &versions("1", "2"), now);
            assert_eq!(cond(&st, VALID).0, *valid, "{updates:?}");
            assert_eq!(cond(&st, CHANGE_DETECTED).0, *changed, "{updates:?}");
        }
        let st = decide_status(&hfc(&[("raid", "u")], None), &versions("1", "2"), now);
        assert!(cond(&st, VALID).1.contains("component raid is invalid"));
        let st = decide_status(&hfc(&[("bios", "u")], None), &versions("1", "2"), now);
        assert!(
            cond(&st, CHANGE_DETECTED)
                .1
                .contains("firmwareUpdates: onReboot")
        );
    }

    #[test]
    fn a_recorded_update_marks_the_version_it_flashed() {
        let first = decide_status(&hfc(&[], None), &versions("1.0", "2.0"), "t1");
        let mut recorded = first.clone();
        recorded.updates = vec![FirmwareUpdate {
            component: "bios".into(),
            url: "http://fw/bios-1.1.bin".into(),
        }];
        let after = decide_status(
            &hfc(&[("bios", "http://fw/bios-1.1.bin")], Some(recorded)),
            &versions("1.1", "2.0"),
            "t2",
        );
        let bios = &after.components[0];
        assert_eq!(bios.last_version_flashed, "1.1");
        assert_eq!(bios.updated_at.as_deref(), Some("t2"));
        assert_eq!(bios.initial_version, "1.0");
        assert!(
            after.components[1].last_version_flashed.is_empty(),
            "bmc not flashed"
        );
        assert_eq!(cond(&after, CHANGE_DETECTED).0, "False");
    }
}
