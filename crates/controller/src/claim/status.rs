//! Writing the claim's status (with Events for the conditions that changed).

use std::time::Duration;

use ferrometal_api::{HostClaim, HostClaimStatus};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::context::{ClaimContext, claims};
use super::decide::{self, StatusInput};
use crate::error::{Error, not_found};
use crate::events::announce;

pub(super) async fn write_status(
    claim: &HostClaim,
    ctx: &ClaimContext,
    input: StatusInput<'_>,
    requeue: Duration,
) -> Result<Action, Error> {
    let new = decide::status(input);
    write_new(claim, ctx, new).await?;
    Ok(Action::requeue(requeue))
}

/// Writes `new` as the claim's status when it differs (with Events for the conditions that
/// changed). Every provider's status goes through here.
pub(super) async fn write_new(
    claim: &HostClaim,
    ctx: &ClaimContext,
    new: HostClaimStatus,
) -> Result<(), Error> {
    let old = claim.status.clone().unwrap_or_default();
    if new != old {
        announce(claim, &old, &new, &ctx.events).await;
        // A merge patch: fields the new status leaves out must be cleared explicitly.
        let mut body = serde_json::to_value(&new)?;
        if let Some(m) = body.as_object_mut() {
            for field in ["bareMetalHost", "hardwareData", "conditions"] {
                m.entry(field).or_insert(Value::Null);
            }
            m.insert("poweredOn".into(), new.powered_on.into());
        }
        let patch = json!({ "status": body });
        match claims(ctx, claim)
            .patch_status(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            // Deleted meanwhile: nothing to report to.
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
