//! Watch streams: newline-delimited JSON `WatchEvent`s from a resourceVersion, fed from the
//! store's event history, with bookmarks, timeouts and 410 Gone when history is compacted.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use ferrometal_apimachinery::selector::{FieldSelector, LabelSelector};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::registry::Resource;
use crate::render::{self, Render};
use crate::request::{Query, ResPath};
use crate::state::Core;
use crate::status::ApiError;
use crate::store::{EventType, Stored, Version};

/// Idle time between bookmarks; kube-apiserver sends them about once a minute.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// Watches without `timeoutSeconds` end after this long (the real server picks 30–60 min).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Longest watch a client may ask for: a bound on what one request holds, and on the deadline
/// arithmetic (a huge `timeoutSeconds` would overflow it).
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

struct Filter {
    /// Whether name, namespace and labels are all the selectors look at.
    meta_only: bool,
    namespace: Option<String>,
    name: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// Matches a history version, parsing the whole object only for field selectors on
    /// fields other than name and namespace.
    fn matches_version(&self, v: &Version) -> bool {
        if self.selects_all() {
            true
        } else if self.meta_only {
            self.matches(&v.meta())
        } else {
            self.matches(&v.value())
        }
    }

    fn matches_stored(&self, o: &Stored) -> bool {
        if self.selects_all() {
            true
        } else if self.meta_only {
            self.matches(&o.meta())
        } else {
            self.matches(&o.value())
        }
    }

    /// No selector at all: nothing needs parsing.
    fn selects_all(&self) -> bool {
        self.namespace.is_none()
            && self.name.is_none()
            && self.labels.is_empty()
            && self.fields.is_empty()
    }

    fn matches(&self, v: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && v.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
        {
            return false;
        }
        if let Some(n) = &self.name
            && crate::meta::name_of(v) != n
        {
            return false;
        }
        self.labels.matches_object(v) && self.fields.matches(v)
    }
}

struct Encoder {
    res: Arc<Resource>,
    render: Render,
    sent_columns: bool,
}

impl Encoder {
    fn event(&mut self, kind: &str, obj: &Version) -> Bytes {
        let plain =
            !crate::convert::converts(&self.res) && *obj.api_version == self.res.api_version();
        let object = match self.render {
            // The stored JSON is spliced in as is when no relabelling is needed.
            Render::Full if plain => {
                let mut out = Vec::with_capacity(obj.json.len() + 32);
                out.extend_from_slice(b"{\"type\":\"");
                out.extend_from_slice(kind.as_bytes());
                out.extend_from_slice(b"\",\"object\":");
                out.extend_from_slice(&obj.json);
                out.extend_from_slice(b"}\n");
                return out.into();
            }
            Render::Full => crate::convert::from_storage(&self.res, &obj.value()),
            Render::Metadata => render::partial_metadata(&obj.value()),
            Render::Table(inc) => {
                let v = crate::convert::from_storage(&self.res, &obj.value());
                let mut t = render::make_table(
                    &self.res,
                    &[v],
                    inc,
                    json!({
                        "resourceVersion": obj.rev.to_string(),
                    }),
                );
                // Column definitions go only with the first event, as kube-apiserver does.
                if self.sent_columns {
                    t["columnDefinitions"] = Value::Null;
                }
                self.sent_columns = true;
                t
            }
        };
        line(&json!({"type": kind, "object": object}))
    }

    /// The bookmark that ends the initial events of a streaming list.
    fn initial_events_end(&self, rev: u64) -> Bytes {
        line(&json!({"type": "BOOKMARK", "object": {
            "kind": self.res.kind,
            "apiVersion": self.res.api_version(),
            "metadata": {
                "resourceVersion": rev.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        }}))
    }

    fn bookmark(&self, rev: u64) -> Bytes {
        let object = match self.render {
            Render::Table(_) => json!({
                "kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": rev.to_string()},
                "columnDefinitions": null, "rows": null,
            }),
            _ => json!({
                "kind": self.res.kind,
                "apiVersion": self.res.api_version(),
                "metadata": {"resourceVersion": rev.to_string()},
            }),
        };
        line(&json!({"type": "BOOKMARK", "object": object}))
    }
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).expect("serializes");
    b.push(b'\n');
    b.into()
}

fn gone_event(want: u64, oldest: u64) -> Bytes {
    let status = ApiError::gone(format!("too old resource version: {want} ({oldest})")).to_status();
    line(&json!({"type": "ERROR", "object": status}))
}

pub async fn serve(
    core: &Arc<Core>,
    res: &Arc<Resource>,
    p: &ResPath,
    q: &Query,
    render: Render,
) -> Result<Response, ApiError> {
    let (labels, fields) = crate::request::selectors(q)?;
    let meta_only = fields
        .fields()
        .iter()
        .all(|f| f == "metadata.name" || f == "metadata.namespace");
    let filter = Filter {
        meta_only,
        namespace: p.namespace.clone(),
        name: p
            .name
            .clone()
            .or_else(|| fields.required_value("metadata.name").map(String::from)),
        labels,
        fields,
    };
    let initial_events = q.get("sendInitialEvents").is_some_and(|v| v == "true");
    // Before the stream starts, so a version far ahead is a plain 504, not a silent watch.
    core.wait_for_resource_version(q).await?;
    // Streaming lists: the current state first, whatever version was given.
    let from = crate::request::resource_version(q)?.filter(|_| !initial_events);
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(|t| Duration::from_secs(t.min(MAX_TIMEOUT.as_secs())))
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let core = core.clone();
    let res = res.clone();
    tokio::spawn(async move {
        let mut enc = Encoder {
            res: res.clone(),
            render,
            sent_columns: false,
        };
        let mut revs = core.store.subscribe();
        let mut shutdown = core.shutdown.clone();
        // Starting point: the given revision, or the current state sent as ADDED events.
        let mut cursor = match from {
            Some(rv) => rv,
            None => {
                let (rev, objs) = core.store.read(|s| {
                    let objs: Vec<Arc<Stored>> = s
                        .list(&res.key, filter.namespace.as_deref(), None)
                        .filter(|o| filter.matches_stored(o))
                        .cloned()
                        .collect();
                    (s.revision(), objs)
                });
                for o in objs {
                    if tx.send(Ok(enc.event("ADDED", &o))).await.is_err() {
                        return;
                    }
                }
                if initial_events && tx.send(Ok(enc.initial_events_end(rev))).await.is_err() {
                    return;
                }
                rev
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last_bookmark = tokio::time::Instant::now();
        loop {
            // Mark the revision seen before reading, so a write landing after the read still
            // wakes us up below.
            revs.borrow_and_update();
            let (batch, upto) = match core.store.events_since(&res.key, cursor) {
                Ok(b) => b,
                Err(gone) => {
                    let _ = tx.send(Ok(gone_event(cursor, gone.oldest))).await;
                    return;
                }
            };
            let mut sent = false;
            for ev in batch {
                cursor = cursor.max(ev.obj.rev);
                let now_matches = filter.matches_version(&ev.obj);
                let kind = match ev.kind {
                    EventType::Deleted if now_matches => Some("DELETED"),
                    EventType::Deleted => None,
                    EventType::Added if now_matches => Some("ADDED"),
                    EventType::Added => None,
                    EventType::Modified => {
                        let before = core_prev_matches(&ev.prev, &filter);
                        match (before, now_matches) {
                            (true, true) => Some("MODIFIED"),
                            (false, true) => Some("ADDED"),
                            (true, false) => Some("DELETED"),
                            (false, false) => None,
                        }
                    }
                };
                if let Some(kind) = kind {
                    if tx.send(Ok(enc.event(kind, &ev.obj))).await.is_err() {
                        return;
                    }
                    sent = true;
                }
            }
            if sent {
                last_bookmark = tokio::time::Instant::now();
            }
            // Everything up to `upto` has been looked at.
            cursor = cursor.max(upto);
            let next_bookmark = last_bookmark + BOOKMARK_EVERY;
            tokio::select! {
                changed = revs.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = tokio::time::sleep_until(next_bookmark), if bookmarks => {
                    if tx.send(Ok(enc.bookmark(cursor))).await.is_err() {
                        return;
                    }
                    last_bookmark = tokio::time::Instant::now();
                }
                () = tokio::time::sleep_until(deadline) => return,
                _ = shutdown.changed() => return,
                () = tx.closed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

fn core_prev_matches(prev: &Option<Version>, filter: &Filter) -> bool {
    prev.as_ref().is_some_and(|p| filter.matches_version(p))
}
