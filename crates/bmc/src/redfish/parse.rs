//! Reading what a Redfish BMC sends: links, collection members, identity, drives, error
//! messages, and the reset type to use among those it allows. Pure functions over its JSON.

use serde_json::Value;

use crate::{Disk, PowerAction, SystemIdentity};

/// The longest text of anything the BMC sent that we keep.
const MAX_TEXT: usize = 300;

/// Picks the reset type for an action among what the BMC allows. Fallbacks keep the intent:
/// PowerCycle and ForceRestart stand in for each other (both end On after an off moment),
/// On and ForceOn likewise; graceful actions never degrade into forced ones.
pub fn choose_reset_type(action: PowerAction, allowed: Option<&[String]>) -> Option<&'static str> {
    let candidates: &[&'static str] = match action {
        PowerAction::On => &["On", "ForceOn"],
        PowerAction::ForceOn => &["ForceOn", "On"],
        PowerAction::ForceOff => &["ForceOff"],
        PowerAction::GracefulShutdown => &["GracefulShutdown"],
        PowerAction::GracefulRestart => &["GracefulRestart"],
        PowerAction::ForceRestart => &["ForceRestart", "PowerCycle"],
        PowerAction::PowerCycle => &["PowerCycle", "ForceRestart"],
    };
    match allowed {
        None => candidates.first().copied(),
        Some(allowed) => candidates
            .iter()
            .copied()
            .find(|c| allowed.iter().any(|a| a == c)),
    }
}

/// At most [`MAX_TEXT`] characters of something a BMC sent, marked when cut.
pub(super) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A link as the BMC wrote it; absolute ones are checked against its origin when used.
pub(super) fn link(v: &Value) -> Option<String> {
    v["@odata.id"].as_str().map(String::from)
}

pub(super) fn member_links(collection: &Value) -> Vec<String> {
    collection["Members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(link)
        .collect()
}

pub(super) fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array().map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
    })
}

pub(super) fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

pub(super) fn u64_of(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_f64().map(|f| f as u64))
        .unwrap_or(0)
}

pub(super) fn identity_of(system: &Value) -> SystemIdentity {
    let opt = |k: &str| {
        system[k]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    SystemIdentity {
        uuid: opt("UUID"),
        manufacturer: opt("Manufacturer"),
        model: opt("Model"),
        serial_number: opt("SerialNumber"),
    }
}

pub(super) fn disk_of(d: &Value) -> Disk {
    Disk {
        name: d["Id"]
            .as_str()
            .or(d["Name"].as_str())
            .unwrap_or_default()
            .into(),
        size_bytes: u64_of(&d["CapacityBytes"]),
        media_type: str_of(&d["MediaType"]),
        model: str_of(&d["Model"]),
        serial_number: str_of(&d["SerialNumber"]),
        protocol: str_of(&d["Protocol"]),
    }
}

/// The human part of a Redfish error body.
pub(super) fn redfish_message(body: &Value) -> String {
    let error = &body["error"];
    let extended = error["@Message.ExtendedInfo"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(|m| m["Message"].as_str());
    let text = extended
        .or(error["message"].as_str())
        .or(body.as_str())
        .unwrap_or("(no message)");
    let mut text: String = text.chars().take(300).collect();
    if text.is_empty() {
        text = "(no message)".into();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reset_type_fallbacks() {
        let all: Vec<String> = PowerAction::ALL
            .iter()
            .map(|a| a.as_str().to_string())
            .collect();
        let sushy: Vec<String> = [
            "On",
            "ForceOff",
            "GracefulShutdown",
            "GracefulRestart",
            "ForceRestart",
            "Nmi",
            "ForceOn",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let only_on_off: Vec<String> = vec!["On".into(), "ForceOff".into()];
        type Row<'a> = (PowerAction, Option<&'a [String]>, Option<&'a str>);
        let rows: &[Row] = &[
            (PowerAction::PowerCycle, None, Some("PowerCycle")),
            (PowerAction::PowerCycle, Some(&all), Some("PowerCycle")),
            (PowerAction::PowerCycle, Some(&sushy), Some("ForceRestart")),
            (
                PowerAction::ForceRestart,
                Some(&sushy),
                Some("ForceRestart"),
            ),
            (PowerAction::ForceOn, Some(&only_on_off), Some("On")),
            (PowerAction::On, Some(&sushy), Some("On")),
            (PowerAction::GracefulRestart, Some(&only_on_off), None),
            (PowerAction::PowerCycle, Some(&only_on_off), None),
            (
                PowerAction::GracefulShutdown,
                Some(&sushy),
                Some("GracefulShutdown"),
            ),
        ];
        for (action, allowed, expect) in rows {
            assert_eq!(
                choose_reset_type(*action, *allowed),
                *expect,
                "{action:?} {allowed:?}"
            );
        }
    }

    #[test]
    fn error_messages_from_bodies() {
        let body = json!({"error": {"code": "Base.1.8.GeneralError", "message": "boom",
            "@Message.ExtendedInfo": [{"Message": "The value 'X' is not allowed"}]}});
        assert_eq!(redfish_message(&body), "The value 'X' is not allowed");
        assert_eq!(redfish_message(&json!({"error": {"message": "m"}})), "m");
        assert_eq!(
            redfish_message(&json!("<html>oops</html>")),
            "<html>oops</html>"
        );
        assert_eq!(redfish_message(&Value::Null), "(no message)");
    }
}
