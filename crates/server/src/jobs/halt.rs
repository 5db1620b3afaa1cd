//! How a job stops before its end: failing or losing its lease ([`Halt`]), or **cancel** — a
//! queued job at once, a running one at its next progress point ([`cancel`]) — and the domain's
//! refusal of a cancel ([`CancelError`]).

use crate::domain::{DomainError, GuardSubject};
use tradeops_core::Clock;
use tradeops_store::{Cancel, JobKind, JobRepository, JobStatus, StoreError};

/// Why a running job stopped before its end.
#[derive(Debug, PartialEq)]
pub enum Halt {
    /// It failed: the reason its row records.
    Failed(String),
    /// Its worker no longer holds it (canceled, or taken back after its lease expired): it
    /// stops without writing anything more.
    Lost,
}

impl From<String> for Halt {
    fn from(reason: String) -> Halt {
        Halt::Failed(reason)
    }
}

impl From<&str> for Halt {
    fn from(reason: &str) -> Halt {
        Halt::Failed(reason.to_string())
    }
}

/// Why a cancel was refused.
#[derive(Debug)]
pub enum CancelError {
    NotFound,
    /// The job had already ended (`COMPLETED`, `FAILED` or `CANCELED`): nothing changed.
    Final(JobStatus),
    Store(StoreError),
}

/// The guard a cancel of a job that already ended names (`detail.guard`).
pub const JOB_FINAL_GUARD: &str = "job_final";

impl CancelError {
    /// The refusal as the domain states it, `what` naming the job (`download`, `backtest`):
    /// not found, or a guard refusal ([`JOB_FINAL_GUARD`]) for a job that already ended.
    pub fn refusal(self, what: &str, id: &str) -> DomainError {
        match self {
            CancelError::NotFound => DomainError::NotFound(format!("No {what} {id:?}")),
            CancelError::Final(status) => DomainError::GuardRefused {
                guard: JOB_FINAL_GUARD,
                reason: format!("the {what} {id:?} is already {status}: only a queued or running job can be canceled"),
                subject: GuardSubject::Job { status },
            },
            CancelError::Store(e) => e.into(),
        }
    }
}

/// Cancels a queued job at once; a running one is `CANCELED` now and its worker stops at its
/// next progress point (its writes, conditional on holding the job, no longer land).
pub async fn cancel(repo: &dyn JobRepository, clock: &dyn Clock, kind: JobKind, id: &str) -> Result<(), CancelError> {
    match repo.cancel_job(kind, id, clock.now().timestamp_millis()).await.map_err(CancelError::Store)? {
        Cancel::Canceled(was) => {
            tracing::info!(job = kind.name(), id, %was, "job canceled");
            Ok(())
        }
        Cancel::Final(status) => Err(CancelError::Final(status)),
        Cancel::NotFound => Err(CancelError::NotFound),
    }
}
