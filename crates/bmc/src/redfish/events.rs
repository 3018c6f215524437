//! Event subscriptions over Redfish: the EventService's `Subscriptions`, listed, created with
//! a destination, a context and HTTP headers (never logged: they may carry a token), and
//! deleted.

use std::collections::BTreeMap;

use reqwest::Method;
use reqwest::header::LOCATION;
use serde_json::{Value, json};

use super::client::RedfishBmc;
use super::transport::SERVICE_ROOT;
use crate::error::BmcError;
use crate::types::EventSubscription;

impl RedfishBmc {
    /// The subscriptions collection's path.
    async fn subscriptions_path(&self) -> Result<String, BmcError> {
        let root = self.transport.get(SERVICE_ROOT).await?;
        let service = root["EventService"]["@odata.id"]
            .as_str()
            .ok_or_else(|| self.unsupported("event subscriptions (no EventService)"))?;
        let doc = self.transport.get(service).await?;
        doc["Subscriptions"]["@odata.id"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| self.unsupported("event subscriptions (the EventService lists none)"))
    }

    pub(super) async fn list_subscriptions(&self) -> Result<Vec<EventSubscription>, BmcError> {
        let path = self.subscriptions_path().await?;
        let mut warnings = Vec::new();
        let members = self
            .members(
                &json!({ "@odata.id": path }),
                &mut warnings,
                "subscriptions",
            )
            .await;
        Ok(members
            .iter()
            .filter_map(|s| {
                Some(EventSubscription {
                    path: s["@odata.id"].as_str()?.to_string(),
                    id: s["Id"].as_str().unwrap_or_default().to_string(),
                    destination: s["Destination"].as_str().unwrap_or_default().to_string(),
                    context: s["Context"].as_str().unwrap_or_default().to_string(),
                })
            })
            .collect())
    }

    pub(super) async fn create_subscription(
        &self,
        destination: &str,
        context: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<EventSubscription, BmcError> {
        let path = self.subscriptions_path().await?;
        let headers: Vec<Value> = headers.iter().map(|(k, v)| json!({ k: v })).collect();
        let mut body = json!({
            "Destination": destination,
            "Context": context,
            "Protocol": "Redfish",
        });
        if !headers.is_empty() {
            body["HttpHeaders"] = Value::Array(headers);
        }
        let answer = self
            .transport
            .request(Method::POST, &path, Some(&body), None)
            .await?;
        let location = answer
            .headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .or_else(|| answer.body["@odata.id"].as_str().map(String::from))
            .ok_or_else(|| BmcError::Protocol {
                bmc: self.transport.endpoint.clone(),
                operation: "POST EventService/Subscriptions".into(),
                reason: "the subscription was accepted but not named".into(),
            })?;
        let id = answer.body["Id"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| {
                location
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            });
        Ok(EventSubscription {
            path: location,
            id,
            destination: destination.to_string(),
            context: context.to_string(),
        })
    }

    pub(super) async fn remove_subscription(&self, path: &str) -> Result<(), BmcError> {
        match self
            .transport
            .request(Method::DELETE, path, None, None)
            .await
        {
            Ok(_) | Err(BmcError::Http { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
