//! The EventService's subscriptions: created with a POST naming the destination (and a
//! context, HTTP headers), listed, read and deleted. Headers are write-only, as Redfish has
//! them: never shown in a read, only kept for tests through [`Subscriptions::snapshot`].

use serde::Serialize;
use serde_json::{Value, json};

use crate::inventory::odata;

const BASE: &str = "/redfish/v1/EventService/Subscriptions";
/// Bounded, as every list a client can grow.
const MAX_SUBSCRIPTIONS: usize = 1024;

/// One subscription as the emulator keeps it (headers included).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Subscription {
    pub id: u64,
    pub destination: String,
    pub context: String,
    pub headers: Vec<(String, String)>,
}

#[derive(Default)]
pub struct Subscriptions {
    next: u64,
    list: Vec<Subscription>,
}

pub fn path(id: u64) -> String {
    format!("{BASE}/{id}")
}

impl Subscriptions {
    /// Creates one from a POST body; the error is a Redfish message id and text.
    pub fn create(&mut self, body: &Value) -> Result<&Subscription, (&'static str, String)> {
        let destination = body["Destination"].as_str().unwrap_or_default();
        if !(destination.starts_with("http://") || destination.starts_with("https://")) {
            return Err((
                "Base.1.8.PropertyValueFormatError",
                format!(
                    "The value {destination:?} for the property Destination is not an http(s) URL."
                ),
            ));
        }
        if self.list.len() >= MAX_SUBSCRIPTIONS {
            return Err((
                "Base.1.8.CreateLimitReachedForResource",
                "No more subscriptions can be created.".into(),
            ));
        }
        // HttpHeaders: an array of objects, each name → value.
        let headers = body["HttpHeaders"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_object)
                    .flat_map(|o| {
                        o.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.next += 1;
        self.list.push(Subscription {
            id: self.next,
            destination: destination.to_string(),
            context: body["Context"].as_str().unwrap_or_default().to_string(),
            headers,
        });
        Ok(self.list.last().expect("just pushed"))
    }

    pub fn delete(&mut self, id: u64) -> bool {
        let before = self.list.len();
        self.list.retain(|s| s.id != id);
        self.list.len() != before
    }

    pub fn get(&self, id: u64) -> Option<&Subscription> {
        self.list.iter().find(|s| s.id == id)
    }

    pub fn snapshot(&self) -> Vec<Subscription> {
        self.list.clone()
    }

    pub fn collection_doc(&self) -> Value {
        let members: Vec<Value> = self.list.iter().map(|s| odata(&path(s.id))).collect();
        json!({
            "@odata.type": "#EventDestinationCollection.EventDestinationCollection",
            "@odata.id": BASE,
            "Name": "Event Subscriptions",
            "Members@odata.count": members.len(),
            "Members": members,
        })
    }
}

pub fn subscription_doc(s: &Subscription) -> Value {
    json!({
        "@odata.type": "#EventDestination.v1_13_0.EventDestination",
        "@odata.id": path(s.id),
        "Id": s.id.to_string(),
        "Name": format!("Subscription {}", s.id),
        "Destination": s.destination,
        "Context": s.context,
        "Protocol": "Redfish",
        // Write-only, as Redfish has it.
        "HttpHeaders": [],
    })
}

pub fn event_service_doc() -> Value {
    json!({
        "@odata.type": "#EventService.v1_10_0.EventService",
        "@odata.id": "/redfish/v1/EventService",
        "Id": "EventService",
        "Name": "Event Service",
        "ServiceEnabled": true,
        "Subscriptions": odata(BASE),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_are_kept_with_their_headers_and_read_without() {
        let mut s = Subscriptions::default();
        let sub = s
            .create(&json!({"Destination": "http://hook/x", "Context": "c",
                "HttpHeaders": [{"Authorization": "Bearer t"}]}))
            .unwrap()
            .clone();
        assert_eq!(sub.headers, [("Authorization".into(), "Bearer t".into())]);
        assert_eq!(subscription_doc(&sub)["HttpHeaders"], json!([]));
        assert!(s.create(&json!({"Destination": "ftp://x"})).is_err());
        assert!(s.delete(sub.id));
        assert!(!s.delete(sub.id));
    }
}
