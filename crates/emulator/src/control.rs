//! The control API under `/emulator/`: unauthenticated, not counted, JSON.
//!
//! - `GET /emulator` — fleet summary
//! - `GET /emulator/counters`, `POST /emulator/counters/reset`
//! - `GET /emulator/systems/{id}` — [`crate::SystemSnapshot`]
//! - `GET|PUT|DELETE /emulator/systems/{id}/fault` — [`crate::Fault`]

use std::time::Instant;

use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use crate::app::App;
use crate::fault::Fault;
use crate::resp::{Resp, bad_request, empty, json, method_not_allowed, not_found};
use crate::state::{parse_index, parse_system_id};

enum Target {
    Info,
    Counters,
    ResetCounters,
    System(usize),
    Fault(usize),
    NotFound,
}

/// Accepts `sys-N` or a bare index.
fn system(id: &str, count: usize) -> Option<usize> {
    parse_system_id(id, count).or_else(|| parse_index(id, count))
}

fn route(path: &str, count: usize) -> Target {
    let mut segs = path.split('/').filter(|s| !s.is_empty()).skip(1);
    let segs: [Option<&str>; 4] = [segs.next(), segs.next(), segs.next(), segs.next()];
    let index = |id: &str, f: fn(usize) -> Target| system(id, count).map_or(Target::NotFound, f);
    match segs {
        [None, ..] => Target::Info,
        [Some("counters"), None, ..] => Target::Counters,
        [Some("counters"), Some("reset"), None, _] => Target::ResetCounters,
        [Some("systems"), Some(id), None, _] => index(id, Target::System),
        [Some("systems"), Some(id), Some("fault"), None] => index(id, Target::Fault),
        _ => Target::NotFound,
    }
}

pub async fn handle(app: &App, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    match route(req.uri().path(), app.systems.len()) {
        Target::NotFound => not_found(req.uri().path()),
        Target::Info if method == Method::GET => json(
            StatusCode::OK,
            &serde_json::json!({
                "systems": app.systems.len(),
                "power_delay_ms": app.power_delay.as_millis() as u64,
                "reset_types": app.reset_types,
            }),
        ),
        Target::Counters if method == Method::GET => json(StatusCode::OK, &app.counters()),
        Target::ResetCounters if method == Method::POST => {
            app.reset_counters();
            empty(StatusCode::NO_CONTENT)
        }
        Target::System(i) if method == Method::GET => {
            json(StatusCode::OK, &app.systems[i].snapshot(i, Instant::now()))
        }
        Target::Fault(i) if method == Method::GET => json(StatusCode::OK, &app.systems[i].fault()),
        Target::Fault(i) if method == Method::DELETE => {
            app.systems[i].set_fault(None);
            empty(StatusCode::NO_CONTENT)
        }
        Target::Fault(i) if method == Method::PUT => {
            let body = match Limited::new(req.into_body(), 4096).collect().await {
                Ok(body) => body.to_bytes(),
                Err(err) => return bad_request("Base.1.8.MalformedJSON", &err.to_string()),
            };
            match serde_json::from_slice::<Fault>(&body) {
                Ok(fault) => {
                    tracing::info!(system = i, ?fault, "fault set");
                    app.systems[i].set_fault(Some(fault));
                    empty(StatusCode::NO_CONTENT)
                }
                Err(err) => bad_request("Base.1.8.MalformedJSON", &err.to_string()),
            }
        }
        Target::Fault(_) => method_not_allowed("GET, PUT, DELETE"),
        Target::ResetCounters => method_not_allowed("POST"),
        Target::Info | Target::Counters | Target::System(_) => method_not_allowed("GET"),
    }
}
