//! What serves a claim, behind one seam.
//!
//! A claim chooses its kind of compute the way a PersistentVolumeClaim chooses a StorageClass:
//! through its HostClass (`ferrometal_api::host_class`). Each kind is a [`Provider`]: it brings
//! what serves the claim in line with the claim (binds or creates it, passes the data on,
//! powers and reboots it, reports the status in the shape every claim has), and takes it
//! down when the claim is deleted. The reconciler only picks the provider; a new kind of
//! compute (KubeVirt, a cloud) is one more module implementing the trait, not a controller.
//!
//! - [`BareMetal`]: a BareMetalHost chosen by the claim's selector (no class, or a
//!   `baremetal` class): `bind`, `copies`, `decide::host_sync`, `release`.
//! - [`Libvirt`]: a VM of its own on the class's libvirt host: `vm`.

use async_trait::async_trait;
use ferrometal_api::HostClaim;
use ferrometal_api::claim::conditions as c;
use ferrometal_api::host_class::{HostClass, Provider as Kind, VM_CLASS};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::context::ClaimContext;
use crate::error::Error;

#[async_trait]
pub(super) trait Provider: Send + Sync {
    /// Brings what serves the claim in line with it and writes the claim's status.
    async fn reconcile(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error>;
    /// The claim is deleted: takes down what served it, step by step, and lets the claim go
    /// (its finalizer) once nothing is left.
    async fn release(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error>;
}

pub(super) struct BareMetal;

#[async_trait]
impl Provider for BareMetal {
    async fn reconcile(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
        super::bare_metal::bare_metal(claim, ctx).await
    }

    async fn release(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
        super::release::release(claim, ctx).await
    }
}

pub(super) struct Libvirt(pub HostClass);

#[async_trait]
impl Provider for Libvirt {
    async fn reconcile(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
        super::vm::reconcile(claim, &self.0, ctx, false).await
    }

    async fn release(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
        super::vm::reconcile(claim, &self.0, ctx, true).await
    }
}

/// A claim whose class cannot be found: reported, never guessed (binding a BareMetalHost to
/// a claim meant for a VM would hand out a server nobody asked for).
pub(super) struct Unserved(pub String);

#[async_trait]
impl Provider for Unserved {
    async fn reconcile(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
        super::vm::not_served(claim, ctx, c::HOST_CLASS_NOT_FOUND, self.0.clone(), false).await
    }

    async fn release(&self, claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
        // A VM may have been made while the class existed: it is not dropped silently.
        if claim.annotations().contains_key(VM_CLASS) {
            return super::vm::not_served(
                claim,
                ctx,
                c::HOST_CLASS_NOT_FOUND,
                self.0.clone(),
                true,
            )
            .await;
        }
        super::release::let_go(claim, ctx).await
    }
}

/// The provider serving `claim`. A claim holding a BareMetalHost stays with bare metal, and
/// one whose VM a class made ([`VM_CLASS`]) with that class, whatever its class annotation or
/// the default class say now: what serves it is released the way it was made.
pub(super) fn for_claim(claim: &HostClaim, ctx: &ClaimContext) -> Box<dyn Provider> {
    let holds_host = claim
        .status
        .as_ref()
        .is_some_and(|s| s.bare_metal_host.is_some());
    if holds_host {
        return Box::new(BareMetal);
    }
    // A claim whose VM a class made stays with that class.
    if let Some(name) = claim.annotations().get(VM_CLASS) {
        return match ctx.classes.state().iter().find(|c| c.name_any() == *name) {
            Some(class) if class.spec.provider == Kind::Libvirt => {
                Box::new(Libvirt((**class).clone()))
            }
            _ => Box::new(Unserved(format!(
                "the HostClass {name:?} that made this claim's virtual machine is gone or no \
                 longer makes virtual machines"
            ))),
        };
    }
    match super::vm::class_of(claim, ctx) {
        Ok(None) => Box::new(BareMetal),
        Ok(Some(class)) => match class.spec.provider {
            Kind::Baremetal => Box::new(BareMetal),
            Kind::Libvirt => Box::new(Libvirt(class)),
        },
        Err(msg) => Box::new(Unserved(msg)),
    }
}
