//! Requests for a system's RAID volumes (the state and documents are in `volumes`).

use std::time::Instant;

use http::header::{HeaderValue, LOCATION};
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use crate::app::App;
use crate::resp::{Resp, bad_request, empty, json, method_not_allowed, not_found, read_json};
use crate::volumes;

/// `Storage/1/Volumes` (`volume: None`: GET lists, POST creates) or one volume (GET, DELETE).
pub async fn request(app: &App, index: usize, volume: Option<u64>, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().to_string();
    match (volume, req.method().clone()) {
        (None, Method::GET) => {
            let v = app.volumes(index);
            json(StatusCode::OK, &volumes::collection_doc(index, &v))
        }
        (None, Method::POST) => {
            let body = match read_json(req).await {
                Ok(body) => body,
                Err(resp) => return resp,
            };
            let mut v = app.volumes(index);
            match v.create(index, &body) {
                Ok(created) => {
                    let doc = volumes::volume_doc(index, created);
                    let location = volumes::path(index, created.id);
                    let note = format!("CreateVolume:{}:{}", created.name, created.raid_type);
                    drop(v);
                    app.systems[index].lock(Instant::now()).record(note);
                    let mut resp = json(StatusCode::CREATED, &doc);
                    if let Ok(location) = HeaderValue::from_str(&location) {
                        resp.headers_mut().insert(LOCATION, location);
                    }
                    resp
                }
                Err((id, message)) => bad_request(id, &message),
            }
        }
        (None, _) => method_not_allowed("GET, POST"),
        (Some(id), Method::GET) => match app.volumes(index).get(id) {
            Some(v) => json(StatusCode::OK, &volumes::volume_doc(index, v)),
            None => not_found(&path),
        },
        (Some(id), Method::DELETE) => {
            let deleted = app.volumes(index).delete(id);
            match deleted {
                Some(v) => {
                    app.systems[index]
                        .lock(Instant::now())
                        .record(format!("DeleteVolume:{}", v.name));
                    empty(StatusCode::NO_CONTENT)
                }
                None => not_found(&path),
            }
        }
        (Some(_), _) => method_not_allowed("GET, DELETE"),
    }
}
