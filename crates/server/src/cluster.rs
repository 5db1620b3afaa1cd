//! The engine's term among several services on one database: [`Election`], and the term as its
//! engine sees it, [`Term`]. One service at a time runs the trading engine — the holder of the
//! current term in the `engine_leases` row. It renews the term every [`RENEW_EVERY`] while it
//! lives; a service waiting to run the engine takes the next term when the current one is
//! released (its holder stopped gracefully) or when it has watched it go unrenewed long enough.
//! Every duration is measured on one process's own monotonic clock (`tokio::time::Instant`),
//! never by comparing clocks across machines.
//!
//! **Two senders cannot overlap** (docs/ARCHITECTURE.md, "The engine's term on the clock"):
//! - the holder counts each successful renewal from the instant it was *sent*: its [`Term`] lets
//!   trading calls start until `sent + LEASE − MARGIN`, and a call still unanswered at
//!   `sent + LEASE` is abandoned (what has not left the process by then never leaves);
//! - a waiting service counts from the instant it first *read* that renewal (after its commit,
//!   so after it was sent) and takes over no sooner than `LEASE + MAX_DRIFT` later;
//! - the take is conditional on the term being the one it read, renewed no further
//!   (`Database::take_engine_term_after`): a renewal that commits later makes the take fail,
//!   and one that comes after the take fails itself. So the holder's last successful renewal
//!   is always one the taker saw, and its window ends before the taker's term begins whenever
//!   each clock's rate is off by less than `MAX_DRIFT / (2·LEASE + MAX_DRIFT)` (4 %).
//!
//! On PostgreSQL the holder also holds an advisory lock on a connection of its own
//! ([`LeaderLock`]). It is a hint about liveness, never a proof: a lock freed because a proxy cut
//! the holder's connection does not mean the holder stopped. A waiting service that finds the
//! lock free while the renewals stand still (the holder was killed, or cut off from the
//! database) takes over after `LEASE + MAX_DRIFT` — the holder's window has passed by then
//! whatever happened to it; while the lock is held (the holder paused, or its renewals slow
//! under load) it waits [`PATIENCE`] instead, so a slow holder pauses its sending for a moment
//! rather than loses its term.
//!
//! Renewals go through the pool, not the lock's connection, on purpose: safety rests only on the
//! renewals the taker reads and the conditional take, never on the lock, so which connection
//! carries a renewal cannot fool it. A lock freed while renewals still commit (only the lock's
//! connection was cut) changes nothing — the renewals move the term on, and the taker never
//! sees it stand still; renewals that stop while the lock lives (the pool cut) make the taker
//! wait [`PATIENCE`]. Keeping the lock's connection apart also keeps a renewal from queueing
//! behind a lock check that hangs.
//!
//! Writes are also fenced to their term (`Database::fenced`), so a holder whose term was taken
//! writes nothing more, and its engine stops (it also checks the term every second).
//!
//! On SQLite (one service per file: its instance lock) there is nobody to wait for: the term is
//! taken at once, nothing renews it, and it is valid until the service stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tradeops_core::Clock;
use tradeops_store::{Backend, Database, EngineLease, LeaderLock, StoreError};

/// How often the holder renews its term: three renewals fit in the window
/// (`LEASE − MARGIN`), so a renewal slowed by a busy database (up to two periods) does not
/// pause the holder's sending.
pub const RENEW_EVERY: Duration = Duration::from_millis(150);

/// How long one successful renewal vouches for its holder, from the instant it was sent. A
/// waiting service never takes over sooner than `LEASE + MAX_DRIFT` after it read the renewal;
/// the holder abandons any trading call still unanswered at `sent + LEASE`.
pub const LEASE: Duration = Duration::from_millis(600);

/// What the holder keeps back of the lease: no trading call starts from `sent + LEASE − MARGIN`
/// on, and one started before may take up to `MARGIN` to leave the process (the check, the
/// adapter building and writing its request) before it is abandoned.
pub const MARGIN: Duration = Duration::from_millis(150);

/// What a waiting service adds to the lease for the two monotonic clocks running at different
/// rates: it allows each clock a rate error of `MAX_DRIFT / (2·LEASE + MAX_DRIFT)` = 4 %, against the
/// 0.05 % an NTP-slewed `CLOCK_MONOTONIC` may drift.
pub const MAX_DRIFT: Duration = Duration::from_millis(50);

/// How long a waiting service lets a term go unrenewed while its holder's advisory lock is held
/// (the holder paused, or its renewals slow under load) before it takes over (plus
/// [`MAX_DRIFT`]): far past the holder's window, so a holder that is only slow stops sending for
/// a moment and then goes on, rather than being taken over.
pub const PATIENCE: Duration = Duration::from_secs(3);

/// How often a waiting service reads the term (and tries the holder's lock).
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How often a process of the cluster records that it lives (`cluster_members`).
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// A member whose heartbeat is older than this is shown stale (the `cluster` health component
/// is `DEGRADED` while one is).
pub const MEMBER_STALE_AFTER: Duration = Duration::from_secs(5);
/// A member whose heartbeat is older than this is forgotten.
pub const MEMBER_FORGOTTEN_AFTER: Duration = Duration::from_secs(60);

/// How long a term may go unrenewed, as a waiting service watches it, before it is taken over:
/// `LEASE + MAX_DRIFT` when the holder's session is gone (its lock free), else
/// `patience + MAX_DRIFT` (never less than the lease).
pub fn takeover_after(session_gone: bool, patience: Duration) -> Duration {
    if session_gone {
        LEASE + MAX_DRIFT
    } else {
        patience.max(LEASE) + MAX_DRIFT
    }
}

/// Why this service's engine may not send to the broker now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotValid {
    /// A newer engine took the term over (or this one released it): for good.
    Over,
    /// No renewal vouches for the term now (the database did not answer in time): sending
    /// resumes once a renewal succeeds, unless the term turns out to be over.
    Expired,
}

/// This service's term as its engine sees it: over or not (a write refused for a newer term,
/// the renewal told it was taken), and — where another service may take it over — the window
/// the last successful renewal opened on this process's monotonic clock. The venue asks
/// [`Term::valid`] before every trading call. Shared by the election (which renews it) and the
/// engine's runner (which ends it when a fenced write is refused).
#[derive(Debug, Default)]
pub struct Term {
    over: AtomicBool,
    /// `None`: the term cannot be taken over (SQLite, one service per file), valid until it
    /// ends. Else when the last successful renewal (or the take) was sent, if any.
    renewed: Option<std::sync::Mutex<Option<Instant>>>,
}

impl Term {
    /// A term nobody can take over: valid until it ends (SQLite; engines of tests and replays).
    pub fn sole() -> Term {
        Term::default()
    }

    /// A term valid only within the window of a successful renewal (PostgreSQL): not valid until
    /// the first ([`Term::renewed`]).
    pub fn leased() -> Term {
        Term { over: AtomicBool::new(false), renewed: Some(std::sync::Mutex::new(None)) }
    }

    pub fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// Ends the term; whether it was still running.
    pub fn end(&self) -> bool {
        !self.over.swap(true, Ordering::AcqRel)
    }

    /// A renewal sent at `sent` succeeded: the window runs to `sent + LEASE − MARGIN` (never
    /// moved back by a renewal answered late).
    pub fn renewed(&self, sent: Instant) {
        if let Some(renewed) = &self.renewed {
            let mut last = renewed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_none_or(|last| last < sent) {
                *last = Some(sent);
            }
        }
    }

    /// Whether a trading call may start at `now`, and if so by when it must be answered (the
    /// end of the lease, `sent + LEASE`; `None`: no bound, the term cannot be taken over).
    pub fn valid(&self, now: Instant) -> Result<Option<Instant>, NotValid> {
        if self.is_over() {
            return Err(NotValid::Over);
        }
        let Some(renewed) = &self.renewed else { return Ok(None) };
        let last = *renewed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match last {
            Some(sent) if now < sent + (LEASE - MARGIN) => Ok(Some(sent + LEASE)),
            _ => Err(NotValid::Expired),
        }
    }
}

/// What a waiting service has watched of the term: the term as last read and since when (on its
/// own clock) it has not moved — from the first read that showed it, which comes after the
/// renewal was committed, hence after it was sent.
#[derive(Default)]
struct Watch {
    seen: Option<(EngineLease, Instant)>,
}

impl Watch {
    /// Notes the term as read at `now`: how long it has stood still, or `None` when it moved
    /// (or is read for the first time) — watched from `now` on.
    fn observe(&mut self, lease: &EngineLease, now: Instant) -> Option<Duration> {
        match &self.seen {
            Some((seen, since)) if seen.epoch == lease.epoch && seen.renew_seq == lease.renew_seq => {
                Some(now.saturating_duration_since(*since))
            }
            _ => {
                self.seen = Some((lease.clone(), now));
                None
            }
        }
    }

    /// What was watched does not count (the database could not be read, or the take failed).
    fn forget(&mut self) {
        self.seen = None;
    }
}

/// Records every [`HEARTBEAT_EVERY`] that this process (`node`, a `serve` answering the others
/// at `advertise`, or a `worker`) lives, on PostgreSQL (returns at once on SQLite: one process,
/// nothing to list). A heartbeat the database cannot take is tried again at the next period.
pub async fn heartbeat(
    db: Database,
    node: String,
    kind: &'static str,
    advertise: Option<String>,
    clock: Arc<dyn Clock>,
) {
    if db.backend() == Backend::Sqlite {
        return;
    }
    let started = clock.now().timestamp_millis();
    let forget = MEMBER_FORGOTTEN_AFTER.as_millis() as i64;
    loop {
        let now = clock.now().timestamp_millis();
        if let Err(e) = db.heartbeat_member(&node, kind, advertise.as_deref(), started, now, now - forget).await {
            tracing::debug!(error = %e, "the cluster heartbeat was not recorded; tried again");
        }
        tokio::time::sleep(HEARTBEAT_EVERY).await;
    }
}

/// Removes this process from the members (it stops).
pub async fn leave(db: &Database, node: &str) {
    if db.backend() == Backend::Postgres {
        if let Err(e) = db.leave_cluster(node).await {
            tracing::debug!(error = %e, "not removed from the cluster's members: forgotten after a minute");
        }
    }
}

/// This service's part in the election of the engine's term: one election, one [`Term`].
#[derive(Clone)]
pub struct Election {
    db: Database,
    node_id: String,
    clock: Arc<dyn Clock>,
    /// How long a term whose holder's lock is held may go unrenewed ([`PATIENCE`]).
    patience: Duration,
    renew_every: Duration,
    /// The advisory lock's connection (PostgreSQL): held by the holder, tried by a waiter.
    lock: Arc<Mutex<Option<LeaderLock>>>,
    /// The term this election takes, renewed by [`Election::hold`].
    term: Arc<Term>,
}

impl Election {
    /// On `db` (unfenced), as `node_id`.
    pub fn new(db: Database, node_id: String, clock: Arc<dyn Clock>) -> Election {
        let lock = Arc::new(Mutex::new(LeaderLock::for_database(&db)));
        let term = Arc::new(match db.backend() {
            Backend::Sqlite => Term::sole(),
            Backend::Postgres => Term::leased(),
        });
        Election { db, node_id, clock, patience: PATIENCE, renew_every: RENEW_EVERY, lock, term }
    }

    /// The same with another patience and renewal period (tests). The lease, its margin and
    /// the drift allowed are constants: they are what makes two senders impossible.
    pub fn with_timing(self, patience: Duration, renew_every: Duration) -> Election {
        Election { patience, renew_every, ..self }
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The term this election takes, as its engine checks it before every trading call.
    pub fn term(&self) -> Arc<Term> {
        self.term.clone()
    }

    /// Waits until this service holds the engine's term, and returns its epoch: at once on
    /// SQLite, and when nobody holds it (a new database, or its holder released it), else once
    /// the holder's renewals have stood still for [`takeover_after`]. A database that cannot be
    /// read is waited for, and what was watched before it went away does not count. The term's
    /// window opens from when the take was sent.
    pub async fn acquire(&self) -> Result<i64, StoreError> {
        if self.db.backend() == Backend::Sqlite {
            return self.db.take_engine_epoch(&self.node_id, self.clock.now().timestamp_millis()).await;
        }
        let mut watch = Watch::default();
        let mut told = false;
        let mut lock = self.lock.lock().await;
        loop {
            let mut wait = WATCH_EVERY;
            match self.db.engine_lease().await {
                Ok(lease) => {
                    let quiet = watch.observe(&lease, Instant::now());
                    // The holder's lock free while its renewals stand still: its session is gone
                    // (killed, or cut off from the database — not proof that it stopped).
                    let mut free = false;
                    if let Some(lock) = lock.as_mut() {
                        if lease.node_id.is_some() && quiet.is_some() {
                            free = lock.try_take().await.unwrap_or(false);
                        } else {
                            lock.release().await;
                        }
                    }
                    let after = takeover_after(free, self.patience);
                    let stale = quiet.is_some_and(|quiet| quiet >= after);
                    if lease.node_id.is_none() || stale {
                        let sent = Instant::now();
                        let now = self.clock.now().timestamp_millis();
                        if let Some(epoch) = self.db.take_engine_term_after(&lease, &self.node_id, now).await? {
                            self.term.renewed(sent);
                            if stale {
                                tracing::warn!(
                                    epoch,
                                    previous = lease.node_id.as_deref().unwrap_or("-"),
                                    "the engine's term went unrenewed for {:?}{}: taken over",
                                    quiet.unwrap_or_default(),
                                    if free { " and its holder's session is gone" } else { "" }
                                );
                            }
                            if let Some(lock) = lock.as_mut() {
                                let _ = lock.try_take().await;
                            }
                            return Ok(epoch);
                        }
                        if let Some(lock) = lock.as_mut() {
                            lock.release().await;
                        }
                        watch.forget();
                    } else if let Some(quiet) = quiet {
                        // Read again when the takeover falls due, not up to a period later.
                        wait = wait.min(after - quiet);
                    } else if !told {
                        tracing::info!(
                            holder = lease.node_id.as_deref().unwrap_or("-"),
                            epoch = lease.epoch,
                            "another service runs the trading engine: waiting to take its term over"
                        );
                        told = true;
                    }
                }
                Err(e) if e.is_unavailable() => watch.forget(),
                Err(e) => return Err(e),
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Renews term `epoch` until it is no longer this service's (another took it over): ends
    /// the [`Term`] and returns then (at once on SQLite, where nobody waits to take it over).
    /// Each renewal that succeeds moves the term's window on, counted from when it was sent; one
    /// the database does not answer within the window is given up and tried again at the next
    /// period — meanwhile the window runs out and the engine sends nothing, and the term may be
    /// taken over, which the renewal that finally answers says.
    pub async fn hold(&self, epoch: i64) {
        if self.db.backend() == Backend::Sqlite {
            return;
        }
        let mut failing = false;
        loop {
            tokio::time::sleep(self.renew_every).await;
            let sent = Instant::now();
            let now = self.clock.now().timestamp_millis();
            let renewal = self.db.renew_engine_term(epoch, &self.node_id, now);
            let answer = match tokio::time::timeout(LEASE - MARGIN, renewal).await {
                Ok(answer) => answer,
                Err(_) => Err(StoreError::Unavailable(format!("no answer within {:?}", LEASE - MARGIN))),
            };
            match answer {
                Ok(true) => {
                    self.term.renewed(sent);
                    self.keep_lock().await;
                    if std::mem::take(&mut failing) {
                        tracing::info!(epoch, "the engine's term is renewed again: the engine sends again");
                    }
                }
                Ok(false) => {
                    self.term.end();
                    tracing::error!(epoch, "this service's term as the engine's holder was taken over");
                    return;
                }
                Err(e) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(epoch, error = %e, "the engine's term cannot be renewed: the engine sends nothing to the broker once its window passes; tried again every {:?}", self.renew_every);
                    }
                }
            }
        }
    }

    /// Keeps the holder's advisory lock: takes it when it is not held (it was still held by a
    /// predecessor that was paused, or its connection failed and was dropped with it). A lock
    /// connection that does not answer within a renewal period is dropped (opened again at the
    /// next renewal), so it never holds the renewals up.
    async fn keep_lock(&self) {
        let mut lock = self.lock.lock().await;
        if let Some(lock) = lock.as_mut() {
            let kept = tokio::time::timeout(self.renew_every, async {
                if !lock.still_held().await {
                    let _ = lock.try_take().await;
                }
            })
            .await;
            if kept.is_err() {
                lock.drop_connection();
            }
        }
    }

    /// Whether this service holds the advisory lock (PostgreSQL; health and tests).
    pub async fn holds_lock(&self) -> bool {
        self.lock.lock().await.as_ref().is_some_and(LeaderLock::held)
    }

    /// Gives term `epoch` up (the service stops, its engine stopped): a waiting service takes
    /// the next one at once.
    pub async fn release(&self, epoch: i64) {
        self.term.end();
        if let Err(e) = self.db.release_engine_term(epoch, &self.node_id).await {
            tracing::warn!(epoch, error = %e, "the engine's term could not be released: another service takes it after the lease");
        }
        if let Some(lock) = self.lock.lock().await.as_mut() {
            lock.release().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term_read(renew_seq: i64) -> EngineLease {
        EngineLease { epoch: 7, node_id: Some("a".into()), renew_seq, renewed_at: None, advertise_url: None }
    }

    #[test]
    fn the_constants_leave_room_for_slow_renewals_drift_and_a_one_second_failover() {
        // A renewal answered up to a period late does not pause the holder's sending.
        assert!(RENEW_EVERY * 2 < LEASE - MARGIN);
        // Each clock may run 4 % off: (LEASE + MAX_DRIFT)(1 − ρ) ≥ LEASE (1 + ρ).
        let rho = 0.04;
        assert!((LEASE + MAX_DRIFT).as_secs_f64() * (1.0 - rho) >= LEASE.as_secs_f64() * (1.0 + rho));
        // After kill -9: the last renewal read up to a watch period after it was sent, the
        // holder killed up to a renewal period after that; the takeover leaves ~100 ms of the
        // second for the new engine's restore.
        assert!(LEASE + MAX_DRIFT + WATCH_EVERY + RENEW_EVERY <= Duration::from_millis(900));
        assert_eq!(takeover_after(true, PATIENCE), LEASE + MAX_DRIFT);
        assert_eq!(takeover_after(false, PATIENCE), PATIENCE + MAX_DRIFT);
        assert_eq!(takeover_after(false, Duration::ZERO), LEASE + MAX_DRIFT, "never less than the lease");
    }

    #[tokio::test(start_paused = true)]
    async fn a_leased_term_lets_calls_start_only_within_the_window_of_its_last_renewal() {
        let term = Term::leased();
        assert_eq!(term.valid(Instant::now()), Err(NotValid::Expired), "nothing vouches for it yet");
        let sent = Instant::now();
        term.renewed(sent);
        assert_eq!(term.valid(Instant::now()), Ok(Some(sent + LEASE)), "answered by the end of the lease");
        tokio::time::advance(LEASE - MARGIN - Duration::from_millis(1)).await;
        assert!(term.valid(Instant::now()).is_ok());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(term.valid(Instant::now()), Err(NotValid::Expired), "the window ends at sent + LEASE − MARGIN");

        // Not over: a renewal that succeeds again opens a new window.
        let again = Instant::now();
        term.renewed(again);
        assert_eq!(term.valid(Instant::now()), Ok(Some(again + LEASE)));
        term.renewed(sent);
        assert_eq!(term.valid(Instant::now()), Ok(Some(again + LEASE)), "a renewal answered late moves nothing back");

        assert!(term.end());
        assert_eq!(term.valid(Instant::now()), Err(NotValid::Over));
        term.renewed(Instant::now());
        assert_eq!(term.valid(Instant::now()), Err(NotValid::Over), "over for good");
    }

    #[tokio::test(start_paused = true)]
    async fn a_sole_term_is_valid_without_renewals_until_it_ends() {
        let term = Term::sole();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(term.valid(Instant::now()), Ok(None));
        term.end();
        assert_eq!(term.valid(Instant::now()), Err(NotValid::Over));
    }

    /// The holder's window against the waiter's watch, on one clock: however late the waiter
    /// reads the renewal, it takes over only once nothing of the holder can still leave.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_service_takes_over_only_after_the_holder_s_window_and_lease_have_passed() {
        for (session_gone, read_after) in [(true, 0), (true, 1), (true, 99), (true, 400), (false, 0), (false, 99)] {
            let term = Term::leased();
            let mut watch = Watch::default();
            let sent = Instant::now();
            term.renewed(sent);
            // The renewal commits and the waiter reads it `read_after` ms after it was sent.
            tokio::time::advance(Duration::from_millis(read_after)).await;
            assert_eq!(watch.observe(&term_read(1), Instant::now()), None, "a renewal it had not seen");
            let takeover = loop {
                tokio::time::advance(Duration::from_millis(1)).await;
                let quiet = watch.observe(&term_read(1), Instant::now()).expect("the same renewal");
                if quiet >= takeover_after(session_gone, PATIENCE) {
                    break Instant::now();
                }
                // While the waiter may not take over, the holder may be sending.
            };
            assert_eq!(term.valid(takeover), Err(NotValid::Expired), "gone {session_gone}, read after {read_after} ms");
            assert!(takeover >= sent + LEASE + MAX_DRIFT, "every call of the holder was abandoned by then");
            // Its window closed a margin before the lease ended.
            assert_eq!(term.valid(sent + LEASE - MARGIN), Err(NotValid::Expired));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_the_waiter_reads_starts_its_watch_again() {
        let mut watch = Watch::default();
        assert_eq!(watch.observe(&term_read(1), Instant::now()), None);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(watch.observe(&term_read(1), Instant::now()), Some(Duration::from_millis(500)));
        assert_eq!(watch.observe(&term_read(2), Instant::now()), None, "renewed: watched from now");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(watch.observe(&term_read(2), Instant::now()), Some(Duration::from_millis(100)));
        watch.forget();
        assert_eq!(watch.observe(&term_read(2), Instant::now()), None, "what was watched no longer counts");
    }
}
