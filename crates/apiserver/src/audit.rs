//! The audit log: one JSON line per request under `DATA_DIR/audit/` (who, verb, resource,
//! name, code), size-rotated. Request and response bodies are never written, so a Secret's
//! data cannot reach it. Lines go through a bounded queue to a writer task: a slow disk delays
//! the log, never a request.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use tokio::sync::mpsc;

/// Rotate when the current file passes this size; keep this many old files.
const MAX_FILE_BYTES: u64 = 16 << 20;
const KEEP: usize = 3;
const QUEUE: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Entry {
    pub user: String,
    pub impersonated_by: Option<String>,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
    pub code: u16,
}

pub struct Audit {
    tx: mpsc::Sender<Entry>,
}

impl Audit {
    /// Starts the writer task (inside a Tokio runtime).
    pub fn open(dir: &Path) -> std::io::Result<Audit> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("audit.log");
        let (tx, rx) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_loop(path, rx))?;
        Ok(Audit { tx })
    }

    pub fn record(&self, e: Entry) {
        // A full queue means the disk cannot keep up; dropping a line beats stalling requests.
        if self.tx.try_send(e).is_err() {
            tracing::warn!("audit queue full; a line was dropped");
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    o.mode(0o600);
    o.open(path)
}

fn rotated(path: &Path, i: usize) -> PathBuf {
    path.with_extension(format!("log.{i}"))
}

fn write_loop(path: PathBuf, mut rx: mpsc::Receiver<Entry>) {
    let open = |path: &Path| -> Option<(std::io::BufWriter<std::fs::File>, u64)> {
        match open_append(path) {
            Ok(f) => {
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                Some((std::io::BufWriter::new(f), size))
            }
            Err(e) => {
                tracing::error!(error = %e, path = %path.display(), "cannot open the audit log");
                None
            }
        }
    };
    let Some((mut file, mut size)) = open(&path) else {
        return;
    };
    while let Some(e) = rx.blocking_recv() {
        let line = json!({
            "ts": jiff::Timestamp::now().to_string(),
            "user": e.user,
            "impersonatedBy": e.impersonated_by,
            "verb": e.verb,
            "group": e.group,
            "resource": e.resource,
            "subresource": e.subresource,
            "namespace": e.namespace,
            "name": e.name,
            "path": e.path,
            "code": e.code,
        })
        .to_string();
        if writeln!(file, "{line}").is_err() {
            continue;
        }
        size += line.len() as u64 + 1;
        // Lines are buffered while more are queued; the file is written out as soon as the
        // queue is empty, so a reader (or a crash) misses at most what is still in flight.
        if rx.is_empty() {
            let _ = file.flush();
        }
        if size > MAX_FILE_BYTES {
            let _ = file.flush();
            for i in (1..KEEP).rev() {
                let _ = std::fs::rename(rotated(&path, i), rotated(&path, i + 1));
            }
            let _ = std::fs::rename(&path, rotated(&path, 1));
            match open(&path) {
                Some((f, s)) => (file, size) = (f, s),
                None => return,
            }
        }
    }
}
