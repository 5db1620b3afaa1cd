//! What the durable job tables (downloads, backtests) share: the typed [`JobStatus`] (stored
//! as its text), the [`JobKind`] naming a job table, and the lease operations of
//! [`JobRepository`] — atomic claim of a queued job by one worker, lease renewal, cancel, and
//! taking back running jobs whose lease expired. Every statement is a conditional update, so
//! it is atomic on SQLite and PostgreSQL alike; times are epoch milliseconds the caller read
//! from its injected clock.

use crate::db::{Backend, Database, StoreError};
use crate::tokens::ChangeListener;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sqlx::Row;

/// A job's status (CONTRACT §4/§8): `QUEUED → RUNNING → COMPLETED | FAILED`, or `CANCELED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Canceled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 5] =
        [JobStatus::Queued, JobStatus::Running, JobStatus::Completed, JobStatus::Failed, JobStatus::Canceled];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "QUEUED",
            JobStatus::Running => "RUNNING",
            JobStatus::Completed => "COMPLETED",
            JobStatus::Failed => "FAILED",
            JobStatus::Canceled => "CANCELED",
        }
    }

    /// The status a stored text names.
    pub fn parse(text: &str) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the job has ended: nothing changes it any more.
    pub fn is_final(self) -> bool {
        matches!(self, JobStatus::Completed | JobStatus::Failed | JobStatus::Canceled)
    }

    /// Reads the status column of a row.
    pub(crate) fn from_row(row: &sqlx::any::AnyRow, column: &str) -> Result<JobStatus, sqlx::Error> {
        let text: String = row.try_get(column)?;
        JobStatus::parse(&text).ok_or_else(|| sqlx::Error::Decode(format!("{text:?} is not a job status").into()))
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status literal (`"RUNNING".into()`), as code and tests write records; text read from the
/// database goes through [`JobStatus::parse`]. Panics on text that names no status: a literal
/// that does is a bug of the code that wrote it.
impl From<&str> for JobStatus {
    fn from(text: &str) -> JobStatus {
        JobStatus::parse(text).unwrap_or_else(|| panic!("{text:?} is not a job status"))
    }
}

/// The kinds of durable job, each a table of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobKind {
    Download,
    Backtest,
    /// A part of a parameter sweep (`sweep_parts`).
    Sweep,
}

impl JobKind {
    /// Every kind of durable job.
    pub const ALL: [JobKind; 3] = [JobKind::Download, JobKind::Backtest, JobKind::Sweep];

    /// The name logs and the API use.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Download => "download",
            JobKind::Backtest => "backtest",
            JobKind::Sweep => "sweep",
        }
    }

    fn table(self) -> &'static str {
        match self {
            JobKind::Download => "download_jobs",
            JobKind::Backtest => "backtests",
            JobKind::Sweep => "sweep_parts",
        }
    }

    fn id_column(self) -> &'static str {
        match self {
            JobKind::Download => "request_id",
            JobKind::Backtest => "backtest_id",
            JobKind::Sweep => "part_id",
        }
    }
}

/// The PostgreSQL channel a queued job is announced on ([`Database::announce_jobs`]): workers in
/// other processes start it at once instead of at their next poll.
pub const JOB_CHANNEL: &str = "tradeops_jobs";

/// The PostgreSQL channel a worker announces each change of a job it runs on
/// ([`Database::announce_job_update`]; payload `backtest:ID` or `download:ID`).
pub const JOB_UPDATE_CHANNEL: &str = "tradeops_job_updates";

impl Database {
    /// Announces that a job was queued (PostgreSQL; nothing on SQLite, where the service that
    /// queued it is the only one that runs jobs and wakes its workers itself).
    pub async fn announce_jobs(&self) -> Result<(), StoreError> {
        if self.backend() == Backend::Postgres {
            let notify = format!("NOTIFY {JOB_CHANNEL}");
            sqlx::raw_sql(sqlx::AssertSqlSafe(notify)).execute(self.pool()?).await?;
        }
        Ok(())
    }

    /// Who holds job `id` of `kind` (`lease_owner`: the worker running it, or the last one that
    /// did), if it exists: for operations and tests.
    pub async fn job_holder(&self, kind: JobKind, id: &str) -> Result<Option<String>, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT lease_owner FROM {table} WHERE {key} = $1")))
            .bind(id)
            .fetch_optional(self.pool()?)
            .await?;
        Ok(match row {
            Some(row) => row.try_get("lease_owner")?,
            None => None,
        })
    }

    /// Announces that job `id` of `kind` changed (a worker's progress; PostgreSQL only): the
    /// engine's leader publishes it on its event stream.
    pub async fn announce_job_update(&self, kind: JobKind, id: &str) -> Result<(), StoreError> {
        if self.backend() == Backend::Postgres {
            // Ids are the service's own (UUIDs): nothing in them needs quoting but a quote.
            let notify = format!("NOTIFY {JOB_UPDATE_CHANNEL}, '{}:{}'", kind.name(), id.replace('\'', "''"));
            sqlx::raw_sql(sqlx::AssertSqlSafe(notify)).execute(self.pool()?).await?;
        }
        Ok(())
    }

    /// A listener for job changes announced by workers: PostgreSQL only.
    pub fn job_update_listener(&self) -> Option<ChangeListener> {
        ChangeListener::on(self, JOB_UPDATE_CHANNEL)
    }

    /// A listener for queued jobs: PostgreSQL only.
    pub fn job_listener(&self) -> Option<ChangeListener> {
        ChangeListener::on(self, JOB_CHANNEL)
    }
}

/// A worker's hold on a running job: who, and until when (epoch ms; `None` once the job is
/// final, so the lease is released).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub owner: String,
    pub expires_at: Option<i64>,
}

/// How a running job whose lease expired (its worker crashed or stalled) goes back to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Queued as it stands (progress kept): it continues where its work is idempotent.
    Resume,
    /// Queued with its progress reset: it runs again from the start.
    Rerun,
}

/// What a cancel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// The job was queued or running and is `CANCELED` now; the status it had.
    Canceled(JobStatus),
    /// The job had already ended; nothing changed.
    Final(JobStatus),
    NotFound,
}

#[async_trait]
pub trait JobRepository: Send + Sync {
    /// Takes a `QUEUED` job for `lease.owner`: true for exactly one of several claimants.
    async fn claim_job(&self, kind: JobKind, id: &str, lease: &Lease) -> Result<bool, StoreError>;
    /// Takes the oldest `QUEUED` job of `kind` for `lease.owner`: its id, or `None` when none is
    /// queued. Claimants never wait for one another: on PostgreSQL a row another claimant is
    /// taking is skipped (`FOR UPDATE SKIP LOCKED`), so N workers take N different jobs at
    /// once; on SQLite writes are serial anyway.
    async fn claim_next(&self, kind: JobKind, lease: &Lease) -> Result<Option<String>, StoreError>;
    /// Moves the lease of a job `lease.owner` still holds (it is `RUNNING` and theirs); false
    /// when they lost it (canceled, or taken back after it expired).
    async fn renew_lease(&self, kind: JobKind, id: &str, lease: &Lease) -> Result<bool, StoreError>;
    /// Cancels a `QUEUED` or `RUNNING` job, as of `now`.
    async fn cancel_job(&self, kind: JobKind, id: &str, now: i64) -> Result<Cancel, StoreError>;
    /// Requeues the `RUNNING` jobs whose lease expired before `now` (or that have none), oldest
    /// first; their ids.
    /// Requeues the running jobs of `kind` whose lease expired by `now` (every running job when
    /// `now` is `i64::MAX`), except those leased by `keep_owner` (the caller's own, which it
    /// renews itself); their ids.
    async fn requeue_expired(
        &self,
        kind: JobKind,
        now: i64,
        how: Recovery,
        keep_owner: &str,
    ) -> Result<Vec<String>, StoreError>;
    /// Requeues the running jobs of `kind` that `owner` holds, as `how` says (a worker stopping
    /// hands its jobs back instead of leaving them to its leases' expiry); their ids.
    async fn release_jobs(&self, kind: JobKind, owner: &str, how: Recovery) -> Result<Vec<String>, StoreError>;
}

#[async_trait]
impl JobRepository for Database {
    async fn claim_job(&self, kind: JobKind, id: &str, lease: &Lease) -> Result<bool, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET status = 'RUNNING', lease_owner = $1, lease_expires_at = $2 \
             WHERE {key} = $3 AND status = 'QUEUED'"
        )))
        .bind(&lease.owner)
        .bind(lease.expires_at)
        .bind(id)
        .execute(self.pool()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn claim_next(&self, kind: JobKind, lease: &Lease) -> Result<Option<String>, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let skip = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET status = 'RUNNING', lease_owner = $1, lease_expires_at = $2 \
             WHERE {key} = (SELECT {key} FROM {table} WHERE status = 'QUEUED' ORDER BY created_at, {key} LIMIT 1{skip}) \
             AND status = 'QUEUED' RETURNING {key}"
        )))
        .bind(&lease.owner)
        .bind(lease.expires_at)
        .fetch_optional(self.pool()?)
        .await?;
        Ok(match row {
            Some(row) => Some(row.try_get(key)?),
            None => None,
        })
    }

    async fn renew_lease(&self, kind: JobKind, id: &str, lease: &Lease) -> Result<bool, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET lease_expires_at = $1 WHERE {key} = $2 AND status = 'RUNNING' AND lease_owner = $3"
        )))
        .bind(lease.expires_at)
        .bind(id)
        .bind(&lease.owner)
        .execute(self.pool()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn cancel_job(&self, kind: JobKind, id: &str, now: i64) -> Result<Cancel, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let before = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT status FROM {table} WHERE {key} = $1")))
            .bind(id)
            .fetch_optional(self.pool()?)
            .await?;
        let Some(before) = before.map(|r| JobStatus::from_row(&r, "status")).transpose()? else {
            return Ok(Cancel::NotFound);
        };
        if before.is_final() {
            return Ok(Cancel::Final(before));
        }
        // Conditional on the status read: a job that ended in between is not canceled.
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET status = 'CANCELED', finished_at = $1, lease_expires_at = NULL \
             WHERE {key} = $2 AND status = $3"
        )))
        .bind(now)
        .bind(id)
        .bind(before.as_str())
        .execute(self.pool()?)
        .await?;
        if done.rows_affected() == 1 {
            return Ok(Cancel::Canceled(before));
        }
        self.cancel_job(kind, id, now).await
    }

    async fn requeue_expired(
        &self,
        kind: JobKind,
        now: i64,
        how: Recovery,
        keep_owner: &str,
    ) -> Result<Vec<String>, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let expired = |owner: &str| {
            format!(
                "status = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at < $1) \
                 AND (lease_owner IS NULL OR lease_owner <> {owner})"
            )
        };
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {key} FROM {table} WHERE {} ORDER BY created_at, {key}",
            expired("$2")
        )))
        .bind(now)
        .bind(keep_owner)
        .fetch_all(self.pool()?)
        .await?;
        let reset = match how {
            Recovery::Resume => "",
            Recovery::Rerun => ", progress = 0",
        };
        let mut requeued = Vec::new();
        for row in rows {
            let id: String = row.try_get(key)?;
            // Conditional again: a worker may have renewed or finished it since the read.
            let done = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET status = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL{reset} \
                 WHERE {key} = $2 AND {}",
                expired("$3")
            )))
            .bind(now)
            .bind(&id)
            .bind(keep_owner)
            .execute(self.pool()?)
            .await?;
            if done.rows_affected() == 1 {
                requeued.push(id);
            }
        }
        Ok(requeued)
    }

    async fn release_jobs(&self, kind: JobKind, owner: &str, how: Recovery) -> Result<Vec<String>, StoreError> {
        let (table, key) = (kind.table(), kind.id_column());
        let reset = match how {
            Recovery::Resume => "",
            Recovery::Rerun => ", progress = 0",
        };
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET status = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL{reset} \
             WHERE status = 'RUNNING' AND lease_owner = $1 RETURNING {key}"
        )))
        .bind(owner)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter().map(|row| Ok(row.try_get(key)?)).collect()
    }
}
