//! One service per SQLite file: [`InstanceLock`], an OS lock (`flock`) on a file
//! beside the database, held by `tradeops serve` for its whole life. The engine is the only
//! writer of trading state, and two services on one file would run two engines (and each would
//! take the other's running jobs for orphans); the second is refused at start, naming the first.
//! Running several services needs PostgreSQL. The CLI's short commands (tokens, imports) do not
//! take the lock: they work beside a running service.
//!
//! The lock goes with the process however it ends (`kill -9` included), so a restart after a
//! crash is never refused. `flock` is advisory and unreliable on network file systems: keep the
//! database on a local disk.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::db::StoreError;

/// This process's hold on a SQLite database; released when dropped.
#[derive(Debug)]
pub struct InstanceLock {
    /// Open for as long as the lock is held: closing it releases the lock.
    file: File,
    path: PathBuf,
}

impl InstanceLock {
    /// Takes the lock of the database at `url`, writing `holder` (who this process is: its pid,
    /// its address) into the lock file for whoever is refused next. `Ok(None)` for a database
    /// that needs none: PostgreSQL (several services may share it) or SQLite in memory.
    /// [`StoreError::InUse`] when another process holds it.
    pub fn acquire(url: &str, holder: &str) -> Result<Option<InstanceLock>, StoreError> {
        let Some(database) = sqlite_file(url) else { return Ok(None) };
        if let Some(parent) = database.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(parent);
        }
        let path = lock_path(&database);
        let unusable = |e: std::io::Error| StoreError::Unavailable(format!("lock file {}: {e}", path.display()));
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(unusable)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut held_by = String::new();
                let _ = file.read_to_string(&mut held_by);
                let held_by = held_by.trim();
                let who = if held_by.is_empty() { "another tradeops process".to_string() } else { held_by.to_string() };
                return Err(StoreError::InUse(format!(
                    "{} is in use by {who}: one tradeops service runs on a SQLite database; stop that one \
                     first, or run several on PostgreSQL",
                    database.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(unusable(e)),
        }
        let lock = InstanceLock { file, path: path.clone() };
        lock.write(holder).map_err(unusable)?;
        Ok(Some(lock))
    }

    /// Says who holds the lock now (once the service knows its address): what the next process
    /// refused is told. Best effort: the lock holds whatever the file says.
    pub fn describe(&self, holder: &str) {
        if let Err(e) = self.write(holder) {
            tracing::warn!(path = %self.path.display(), error = %e, "the lock file could not be rewritten");
        }
    }

    fn write(&self, holder: &str) -> std::io::Result<()> {
        let mut file = &self.file;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(format!("{holder}\n").as_bytes())
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The file of a SQLite URL (`sqlite://data/tradeops.db?mode=rwc`, `sqlite:x.db`); `None` for
/// another database or SQLite in memory.
fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty() && !path.contains(":memory:")).then(|| PathBuf::from(path))
}

/// `tradeops.db` → `tradeops.db.lock`, beside it.
fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    database.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_of_the_same_file_is_refused_naming_the_first_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/sub/tradeops.db?mode=rwc", dir.path().display());
        let first = InstanceLock::acquire(&url, "pid 4242, listening on 127.0.0.1:8080").unwrap().expect("a lock");
        assert_eq!(first.path(), dir.path().join("sub/tradeops.db.lock"));

        // Another open of the same file (as another process's would be) is refused and says who.
        let refused = InstanceLock::acquire(&url, "pid 7").unwrap_err();
        let text = refused.to_string();
        assert!(matches!(refused, StoreError::InUse(_)), "{refused:?}");
        assert!(text.contains("tradeops.db is in use by pid 4242, listening on 127.0.0.1:8080"), "{text}");
        assert!(text.contains("PostgreSQL"), "{text}");

        // Another database is not held.
        let other = format!("sqlite:{}/other.db", dir.path().display());
        assert!(InstanceLock::acquire(&other, "pid 7").unwrap().is_some());

        drop(first);
        let second = InstanceLock::acquire(&url, "pid 7").unwrap().expect("free again");
        assert_eq!(std::fs::read_to_string(second.path()).unwrap(), "pid 7\n", "the new holder is written");
        second.describe("pid 7, listening on 127.0.0.1:9000");
        let refused = InstanceLock::acquire(&url, "pid 8").unwrap_err().to_string();
        assert!(refused.contains("in use by pid 7, listening on 127.0.0.1:9000:"), "{refused}");
    }

    #[test]
    fn postgres_and_memory_databases_need_no_lock() {
        assert!(InstanceLock::acquire("postgres://postgres@127.0.0.1/test", "me").unwrap().is_none());
        assert!(InstanceLock::acquire("sqlite::memory:", "me").unwrap().is_none());
        assert!(InstanceLock::acquire("sqlite://:memory:", "me").unwrap().is_none());
    }
}
