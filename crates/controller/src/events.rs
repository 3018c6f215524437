//! Publishing host Events (core Events through the kube-rs recorder).

use ferrometal_api::BareMetalHost;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};

use crate::host::decide::HostEvent;

pub async fn publish(recorder: &Recorder, host: &BareMetalHost, events: &[HostEvent]) {
    if events.is_empty() {
        return;
    }
    let mut reference = host.object_ref(&());
    // Without the resourceVersion a repeated Event (a retry) folds into a series instead of
    // piling up as new objects.
    reference.resource_version = None;
    for e in events {
        let event = Event {
            type_: if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason.clone(),
            // The API rejects notes over 1 kB.
            note: Some(e.note.chars().take(1000).collect()),
            action: e.reason.clone(),
            secondary: None,
        };
        if let Err(err) = recorder.publish(&event, &reference).await {
            // An Event is a courtesy; losing one must not fail the reconcile.
            tracing::warn!(reason = %e.reason, error = %err, "publishing Event failed");
            crate::metrics::metrics().error("event");
        }
    }
}
