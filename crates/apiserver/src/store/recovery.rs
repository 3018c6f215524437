//! After a failed commit: the probe commits that decide when writes are accepted again, and
//! the fault-injection hook that stands in for a full disk.

use std::path::PathBuf;
use std::sync::Arc;

use redb::{Database, Durability};

use super::error::{StoreError, db_err};
use super::inner::Inner;
use super::limits::MAX_OBJECT_BYTES;
use super::tables::{META, PROBE, REVISION};

/// After a failed commit: once a second, drop the undurable overlay (nothing in it was
/// acknowledged), reopen the database (redb wants that after an I/O error) and make a probe
/// commit; when it lands, writes are accepted again.
pub(super) async fn recover(weak: std::sync::Weak<Inner>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let mut w = inner.writer.lock().await;
        if w.closed {
            return;
        }
        {
            let q = inner.queue.lock().expect("queue lock");
            if q.committing || !q.batch.is_empty() {
                continue;
            }
        }
        let published = inner.published.load(std::sync::atomic::Ordering::Acquire);
        // Volatile revisions handed out up to the reserved one may be published already.
        let stored_rev = published.max(inner.reserved.load(std::sync::atomic::Ordering::Acquire));
        w.overlay.clear();
        w.next_rev = published;
        let old = inner.db.write().expect("store lock").take();
        drop(old);
        let path = inner.path.clone();
        let reopened = tokio::task::spawn_blocking(move || -> Result<Database, StoreError> {
            let db = Database::builder()
                .set_cache_size(2 << 20)
                .create(&path)
                .map_err(db_err)?;
            injected_fault()?;
            // A probe the size of two of the largest objects, committed then removed: writes
            // are accepted again only with that much room, so readiness does not flap while
            // the disk stays full (redb can often still rewrite a few pages it has).
            let probe = vec![0u8; 2 * MAX_OBJECT_BYTES];
            for keep in [true, false] {
                let mut tx = db.begin_write().map_err(db_err)?;
                tx.set_durability(Durability::Immediate).map_err(db_err)?;
                {
                    let mut table = tx.open_table(PROBE).map_err(db_err)?;
                    if keep {
                        table.insert("probe", probe.as_slice()).map_err(db_err)?;
                    } else {
                        table.remove("probe").map_err(db_err)?;
                    }
                    let mut meta = tx.open_table(META).map_err(db_err)?;
                    meta.insert(REVISION, stored_rev).map_err(db_err)?;
                }
                tx.commit().map_err(db_err)?;
            }
            Ok(db)
        })
        .await;
        match reopened {
            Ok(Ok(db)) => {
                *inner.db.write().expect("store lock") = Some(Arc::new(db));
                inner.queue.lock().expect("queue lock").failed = None;
                tracing::warn!(revision = published, "the store can write again");
                return;
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "the store still cannot write"),
            Err(e) => tracing::debug!(error = %e, "store probe failed"),
        }
    }
}

/// The documented fault-injection hook for machines where a small filesystem cannot be
/// mounted: while the file named by `FERROMETAL_FAULT_DISK_FULL` exists, every commit fails as
/// on a full disk.
pub(super) fn injected_fault() -> Result<(), StoreError> {
    // Read once: the environment does not change under a running server, and commits are hot.
    static FLAG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    match FLAG.get_or_init(|| std::env::var_os("FERROMETAL_FAULT_DISK_FULL").map(PathBuf::from)) {
        Some(flag) if flag.exists() => Err(StoreError::Db(format!(
            "No space left on device (injected: {} exists)",
            flag.display()
        ))),
        _ => Ok(()),
    }
}
