//! What remote claim reconciles share: the local client, Events, and the links to other
//! clusters.

use super::link::Links;
use crate::events::EventPublisher;

pub struct RemoteContext {
    pub client: kube::Client,
    pub events: EventPublisher,
    pub links: Links,
}
