//! The cluster's front door: on PostgreSQL every `serve` process listens at once,
//! whether or not it runs the engine. The one that holds the engine's term is the **leader**:
//! its front hands each request to its own router, in process. Every other is a **follower**
//! (a hot standby): its front forwards each request — commands, reads of the engine's state,
//! the SSE stream, the console's files — to the leader's advertised address, and relays the
//! leader's answer as it is (status, headers, body, streamed), so a caller gets the leader's
//! result from any node and the leader alone authenticates, rate-limits, audits and acts on
//! them (the reads of the database, below, a follower answers itself). The one exception is the
//! emergency halt: a follower stores it first, so it is applied even while no leader answers
//! (it is changing) — see `Front::halt`.
//!
//! Reads need no engine: the plain reads the database answers alone ([`DATABASE_READS`]: the
//! settings and their history, the audit log, the tokens, who the caller is) a follower answers
//! itself, from the database, through the router of its standby service
//! ([`Front::serve_reads`]): with no leader at all (a node restarted alone, a failover) they
//! answer as the leader's would, and only commands and reads of the live engine's state wait
//! for a leader (CONTRACT §10: every node serves the whole API).
//!
//! When no leader can be reached (a failover in progress), a follower answers every other
//! request `SERVICE_UNAVAILABLE` (503, `Retry-After: 1`, `detail.reason`), and once it takes the
//! term over itself its front becomes the leader's: one listener throughout, nothing to rebind.
//! Every answer carries `X-Tradeops-Node` (who answered) and, forwarded, `X-Tradeops-Leader`.

use crate::domain::tokens::{Principal, TokenRegistry};
use crate::http::envelope::{ApiResponse, Meta, RequestContext, REQUEST};
use crate::http::error::{ApiError, ErrorCode};
use crate::http::middleware::{request_id, REQUEST_ID_HEADER};
use crate::http::routes::risk::{HaltResult, EMERGENCY_HALT};
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tower::ServiceExt;
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, TradingMode};
use tradeops_store::Database;

/// Who answered: this node's name.
pub const NODE_HEADER: HeaderName = HeaderName::from_static("x-tradeops-node");
/// The leader a follower forwarded to.
pub const LEADER_HEADER: HeaderName = HeaderName::from_static("x-tradeops-leader");
/// The node that forwarded a request (set by a follower).
pub const FORWARDED_BY_HEADER: HeaderName = HeaderName::from_static("x-tradeops-forwarded-by");
/// The cluster's shared secret, on a forwarded request.
const SECRET_HEADER: HeaderName = HeaderName::from_static("x-tradeops-cluster-secret");
/// The address of the client a follower forwards for (believed with the secret only).
const CLIENT_HEADER: HeaderName = HeaderName::from_static("x-tradeops-client");

/// A forwarded request's bound, but the event stream's (it lasts). A paused leader accepts
/// connections and never answers: this is how long a caller waits on one.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// A forwarded emergency halt's bound: stored first, it is answered here when the leader does
/// not answer by then.
const HALT_FORWARD_TIMEOUT: Duration = Duration::from_secs(2);
/// Marks an emergency halt a leader hands over to a peer to keep (its value: the request id at
/// the leader), sent with the cluster's secret.
const HAND_OVER_HEADER: HeaderName = HeaderName::from_static("x-tradeops-halt-hand-over");
/// How long a leader waits on each peer it hands an unstored halt to.
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(1);
/// The largest emergency halt body read (a reason of at most a few hundred characters).
const MAX_HALT_BODY: usize = 64 * 1024;
/// The largest body a follower forwards (the API's largest: a bar import).
const MAX_FORWARDED_BODY: usize = 64 * 1024 * 1024;
/// How long a follower trusts the leader's address it read before reading it again.
const LEADER_CACHE: Duration = Duration::from_millis(250);

/// The reads a follower answers itself from the database (with `GET`): what they show is stored
/// there and nowhere else — no engine's books, no market, no job in progress — so any node's
/// answer is the leader's. Exact paths: `/api/auth/tokens/{name}` only deletes.
pub const DATABASE_READS: [&str; 5] =
    ["/api/settings", "/api/settings/history", "/api/audit", "/api/auth/tokens", "/api/auth/me"];

/// The emergency halt's routes (the second a deprecated alias).
const HALT_PATHS: [&str; 2] = ["/api/risk/emergency-halt", "/api/emergency/liquidate"];

/// Headers that belong to one connection, never forwarded or relayed.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The engine's term as a follower reads it: its holder's node id (`None`: never taken, or
/// released) and the address the holder advertised (`None` until its service answers).
#[derive(Clone, Default)]
struct Term {
    holder: Option<String>,
    url: Option<String>,
}

/// How long a follower holds a request while no node answers as the leader (a lone node
/// building its service, a node restarted where its last process held the term, a failover):
/// long enough for a term to be taken and its service built, so that a caller waits rather than
/// being refused, and no longer than a forwarded request may take.
const HOLD_FOR_LEADER: Duration = FORWARD_TIMEOUT;
/// The same for the health endpoints, which answer fast with this node's own health body
/// (CONTRACT §10: health always answers) when no leader answers by then.
const HOLD_HEALTH: Duration = Duration::from_secs(1);
/// How often a held request looks for a leader again.
const HOLD_POLL: Duration = Duration::from_millis(20);
/// The health endpoints, which a follower answers itself when no leader can (see
/// [`Front::own_health`]).
const HEALTH_PATHS: [&str; 2] = ["/api/health", "/api/health/components"];

/// Why a request was not forwarded.
enum NotForwarded {
    /// No node leads yet: the term is free, unadvertised (its holder still builds its service)
    /// or names this node's address. Worth holding the request for (`starting`: the term is
    /// this node's, whose service is being built).
    NoLeader { message: &'static str, starting: bool },
    /// A leader is named but cannot be reached (`leader_unreachable`), or the database cannot
    /// say who leads (`database_unavailable`).
    Failed { reason: &'static str, message: String },
}

/// This node's front: its role, and what a follower forwards with.
pub struct Front {
    node: String,
    /// Where this node listens for the cluster (what it advertises once it leads).
    advertise: String,
    db: Database,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    role: RwLock<Role>,
    /// While following: the standby service's router, for the [`DATABASE_READS`] (none until
    /// the standby service is built).
    reads: RwLock<Option<Router>>,
    /// The engine's term as last read, and when.
    leader: tokio::sync::Mutex<Option<(Term, tokio::time::Instant)>>,
    /// The cluster's other `serve` processes (node id, advertised address): see
    /// [`Front::set_peers`].
    peers: RwLock<Vec<(String, String)>>,
    /// The trading mode last stored (the leader's: a follower's own answers carry it in `meta`).
    mode: RwLock<TradingMode>,
    /// The trading mode this node's configuration sets (`TRADEOPS_MODE`), which it applies when
    /// it takes the term: what its own answers carry while no node leads, so that a `LIVE`
    /// node never answers as `PAPER` while it starts.
    configured: Option<TradingMode>,
    /// How long a request is held while no node leads ([`HOLD_FOR_LEADER`]; health for at most
    /// [`HOLD_HEALTH`]).
    hold_for_leader: Duration,
    /// The API's tokens, to accept an emergency halt while no leader answers.
    tokens: TokenRegistry,
    auth_enabled: bool,
    /// The cluster's shared secret (`cluster_secret`): sent with what this node forwards,
    /// required of what it is forwarded.
    secret: String,
}

#[derive(Clone)]
enum Role {
    Follower,
    Leader(Router),
}

impl Front {
    /// A follower's front, as `node` listening at `advertise`, reading the leader's address
    /// from `db`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: String,
        advertise: String,
        db: Database,
        clock: Arc<dyn Clock>,
        (stored, configured): (Option<TradingMode>, Option<TradingMode>),
        tokens: TokenRegistry,
        auth_enabled: bool,
        secret: String,
    ) -> Arc<Front> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(1))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("a plain HTTP client builds");
        Arc::new(Front {
            node,
            advertise,
            db,
            clock,
            client,
            role: RwLock::new(Role::Follower),
            reads: RwLock::new(None),
            leader: tokio::sync::Mutex::new(None),
            peers: RwLock::new(Vec::new()),
            mode: RwLock::new(stored.or(configured).unwrap_or_default()),
            configured,
            hold_for_leader: HOLD_FOR_LEADER,
            tokens,
            auth_enabled,
            secret,
        })
    }

    /// The router the public listener serves: every request goes through [`dispatch`].
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new().fallback(dispatch).with_state(self.clone())
    }

    /// This node took the engine's term: from now on requests go to `router`, in process.
    pub fn lead(&self, router: Router) {
        *self.role.write().unwrap_or_else(|e| e.into_inner()) = Role::Leader(router);
        self.reads.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// While this node follows, the [`DATABASE_READS`] are answered by `router` (the standby
    /// service's, whose engine is detached), in process, leader or none.
    pub fn serve_reads(&self, router: Router) {
        *self.reads.write().unwrap_or_else(|e| e.into_inner()) = Some(router);
    }

    /// The router that answers `req` here while following: the standby service's for a read of
    /// the database, if it is built; `None` to forward.
    fn local_read(&self, req: &Request) -> Option<Router> {
        let read = req.method() == axum::http::Method::GET && DATABASE_READS.contains(&req.uri().path());
        read.then(|| self.reads.read().unwrap_or_else(|e| e.into_inner()).clone()).flatten()
    }

    /// A request a follower forwarded carries the client's address and the cluster's secret:
    /// with the right secret the request is taken as coming from that client (its budget, its
    /// audit row), as if the client had called the leader; the two headers are removed either
    /// way, so nobody else can claim an address.
    fn believe_forwarded(&self, mut req: Request) -> Request {
        let secret = req.headers_mut().remove(SECRET_HEADER);
        let client = req.headers_mut().remove(CLIENT_HEADER);
        let trusted = secret.is_some_and(|s| constant_time_eq(s.as_bytes(), self.secret.as_bytes()));
        if let (true, Some(ip)) = (trusted, client.and_then(|c| c.to_str().ok()?.parse::<std::net::IpAddr>().ok())) {
            let port = req.extensions().get::<ConnectInfo<SocketAddr>>().map_or(0, |c| c.0.port());
            req.extensions_mut().insert(ConnectInfo(SocketAddr::new(ip, port)));
        }
        req
    }

    /// Whether `req` was forwarded by a node of this cluster (it carries the cluster's secret).
    fn forwarded_here(&self, req: &Request) -> bool {
        req.headers().get(SECRET_HEADER).is_some_and(|s| constant_time_eq(s.as_bytes(), self.secret.as_bytes()))
    }

    /// The trading mode a follower's own answers carry.
    pub fn set_mode(&self, mode: TradingMode) {
        *self.mode.write().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// The mode this node's own answers carry while no node leads: the one it will trade in
    /// once it takes the term (its configuration's), else the stored one.
    fn leaderless_mode(&self) -> TradingMode {
        self.configured.unwrap_or_else(|| *self.mode.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The engine's term (holder and advertised address): read at most every
    /// [`LEADER_CACHE`], at once when `fresh` (the last one failed).
    async fn leader(&self, fresh: bool) -> Result<Term, String> {
        let mut cached = self.leader.lock().await;
        if let Some((term, at)) = cached.as_ref() {
            if !fresh && at.elapsed() < LEADER_CACHE {
                return Ok(term.clone());
            }
        }
        let lease = self.db.engine_lease().await.map_err(|e| e.to_string())?;
        let term = Term { holder: lease.node_id, url: lease.advertise_url };
        *cached = Some((term.clone(), tokio::time::Instant::now()));
        Ok(term)
    }

    /// This node's router, once it leads.
    fn leading(&self) -> Option<Router> {
        match &*self.role.read().unwrap_or_else(|e| e.into_inner()) {
            Role::Leader(router) => Some(router.clone()),
            Role::Follower => None,
        }
    }

    /// Forwards `req` to the leader and relays its answer.
    async fn forward(&self, req: Request) -> Response {
        let client = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        let (parts, body) = req.into_parts();
        let body = match axum::body::to_bytes(body, MAX_FORWARDED_BODY).await {
            Ok(body) => body,
            Err(_) => {
                return ApiError::new(ErrorCode::PayloadTooLarge, "The request body is too large to forward")
                    .into_response()
            }
        };
        if parts.method == axum::http::Method::POST && HALT_PATHS.contains(&parts.uri.path()) {
            return self.halt(parts, body, client).await;
        }
        // While no node leads, the request is held rather than refused (CONTRACT §10: every
        // node serves the whole API, and a lone node starting is no failover): it goes to
        // whoever leads first — this node's own service once it takes the term, or the leader
        // it advertises — and is refused only when none does within the hold.
        let health = HEALTH_PATHS.contains(&parts.uri.path());
        let hold = if health { HOLD_HEALTH.min(self.hold_for_leader) } else { self.hold_for_leader };
        let held_until = tokio::time::Instant::now() + hold;
        let mut fresh = false;
        loop {
            let not_forwarded = match self.try_forward(&parts, body.clone(), client, fresh).await {
                Ok(answer) => return answer,
                Err(not_forwarded) => not_forwarded,
            };
            if let Some(router) = self.leading() {
                let req = Request::from_parts(parts, Body::from(body));
                return match router.oneshot(req).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
            }
            if let NotForwarded::NoLeader { .. } = not_forwarded {
                if tokio::time::Instant::now() < held_until {
                    tokio::time::sleep(HOLD_POLL).await;
                    fresh = true;
                    continue;
                }
            }
            return match health {
                true => self.own_health(&parts, &not_forwarded).await,
                false => self.refusal(&not_forwarded).await,
            };
        }
    }

    /// The leader's answer to the request, or (`Err`) the refusal to send when no leader can
    /// be reached. A connection that fails is tried once more with the leader read again (it
    /// may have just changed).
    async fn try_forward(
        &self,
        parts: &axum::http::request::Parts,
        body: bytes::Bytes,
        client: Option<std::net::IpAddr>,
        fresh: bool,
    ) -> Result<Response, NotForwarded> {
        let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
        let streaming = parts.uri.path() == "/api/events";
        let mut last_error = String::new();
        for attempt in 0..2 {
            let term = match self.leader(fresh || attempt > 0).await {
                Ok(term) => term,
                Err(e) => {
                    return Err(NotForwarded::Failed {
                        reason: "database_unavailable",
                        message: format!("The engine's leader cannot be looked up: {e}"),
                    })
                }
            };
            let starting = term.holder.as_deref() == Some(self.node.as_str());
            let leader = match term.url {
                // The term names this node, or a holder at this node's own address (a process
                // here before a restart, gone since this one listens there): forwarding would
                // come back here. No leader answers until this node, or another, takes over.
                Some(url) if starting || url == self.advertise => {
                    return Err(NotForwarded::NoLeader {
                        message: "No node runs the trading engine at the moment: the engine's term names this \
                                  node's address, and this node does not lead yet (it is starting, or a failover \
                                  is in progress)",
                        starting,
                    });
                }
                Some(url) => url,
                None => {
                    let message = match (&term.holder, starting) {
                        (_, true) => {
                            "No node runs the trading engine at the moment: this node holds the engine's \
                                      term and is starting its service"
                        }
                        (Some(_), false) => {
                            "No node runs the trading engine at the moment: the engine's term \
                                             holder is starting its service (a failover is in progress)"
                        }
                        (None, false) => "No node runs the trading engine at the moment (a failover is in progress)",
                    };
                    return Err(NotForwarded::NoLeader { message, starting });
                }
            };
            let mut out = self.client.request(parts.method.clone(), format!("{leader}{path}"));
            for (name, value) in parts.headers.iter() {
                let ours = *name == SECRET_HEADER || *name == CLIENT_HEADER;
                if name != axum::http::header::HOST && !ours && !HOP_BY_HOP.contains(&name.as_str()) {
                    out = out.header(name, value);
                }
            }
            if let Some(ip) = client {
                out = out.header("x-forwarded-for", ip.to_string()).header(CLIENT_HEADER, ip.to_string());
            }
            out = out.header(SECRET_HEADER, self.secret.as_str());
            out = out.header(FORWARDED_BY_HEADER, self.node.as_str()).body(body.clone());
            if HALT_PATHS.contains(&parts.uri.path()) {
                out = out.timeout(HALT_FORWARD_TIMEOUT);
            } else if !streaming {
                out = out.timeout(FORWARD_TIMEOUT);
            }
            match out.send().await {
                Ok(answer) if parts.uri.path() == "/api/health/components" && answer.status().is_success() => {
                    return Ok(self.as_follower(answer, &leader).await)
                }
                Ok(answer) => return Ok(relay(answer, &leader)),
                Err(e) if e.is_connect() => {
                    last_error = format!("the engine's leader at {leader} cannot be reached: {e}");
                }
                Err(e) => {
                    return Err(NotForwarded::Failed {
                        reason: "leader_unreachable",
                        message: format!("The engine's leader at {leader} did not answer: {e}"),
                    })
                }
            }
        }
        Err(NotForwarded::Failed { reason: "leader_unreachable", message: last_error })
    }

    /// The refusal a request not forwarded is answered with: `SERVICE_UNAVAILABLE`, retry in
    /// a second; `no_engine_leader` in the mode this node will trade in (see
    /// [`Front::leaderless_mode`]).
    async fn refusal(&self, not_forwarded: &NotForwarded) -> Response {
        match not_forwarded {
            NotForwarded::NoLeader { message, .. } => {
                let ctx = RequestContext {
                    request_id: Meta::current().request_id,
                    mode: self.leaderless_mode(),
                    clock: self.clock.clone(),
                };
                REQUEST.scope(ctx, async { unavailable("no_engine_leader", message) }).await
            }
            NotForwarded::Failed { reason, message } => unavailable(reason, message),
        }
    }

    /// This node's own health while no leader answers for it (CONTRACT §10: health always
    /// answers, with the health body): the API answers (this node), the database as the term's
    /// read found it, and every part of the trading service — which runs on the leader only —
    /// `DOWN`, the engine `STARTING` when this node holds the term and builds its service.
    /// `/api/health` is 503 (overall `DOWN`, same body), as the leader's would be;
    /// `/api/health/components` needs a token, as everywhere.
    async fn own_health(&self, parts: &axum::http::request::Parts, not_forwarded: &NotForwarded) -> Response {
        use crate::events::HealthStatus;
        let (why, starting, database) = match not_forwarded {
            NotForwarded::NoLeader { message, starting } => (message.to_string(), *starting, HealthStatus::Healthy),
            NotForwarded::Failed { reason, message } => {
                let database =
                    if *reason == "database_unavailable" { HealthStatus::Down } else { HealthStatus::Healthy };
                (message.clone(), false, database)
            }
        };
        let engine = if starting { "STARTING" } else { "DOWN" };
        let status_of = |name: &str| match name {
            "api" => HealthStatus::Healthy,
            "database" => database,
            _ => HealthStatus::Down,
        };
        let ctx = RequestContext {
            request_id: Meta::current().request_id,
            mode: self.leaderless_mode(),
            clock: self.clock.clone(),
        };
        let now = format_ts(&self.clock.now());
        let components_path = parts.uri.path() == "/api/health/components";
        let caller = if components_path { self.caller(&parts.headers).await } else { None };
        REQUEST
            .scope(ctx, async move {
                if components_path {
                    if caller.is_none() {
                        return ApiError::new(ErrorCode::Unauthorized, "A valid bearer token is required")
                            .into_response();
                    }
                    let rows: Vec<crate::health::ComponentHealth> = crate::health::COMPONENTS
                        .iter()
                        .map(|name| {
                            let status = status_of(name);
                            let detail = match *name {
                                "cluster" => json!({"role": "follower", "node": self.node, "leader": null,
                                    "engine": engine, "reason": why}),
                                "api" => json!({"node": self.node}),
                                "database" => json!({"engine_term_read": database == HealthStatus::Healthy}),
                                _ => json!({"engine": engine, "reason": why}),
                            };
                            crate::health::ComponentHealth {
                                name: name.to_string(),
                                status,
                                latency_ms: None,
                                unprobed_reason: (status == HealthStatus::Down).then(|| why.clone()),
                                last_ok_at: (status == HealthStatus::Healthy).then(|| now.clone()),
                                detail,
                            }
                        })
                        .collect();
                    return ApiResponse::list(rows).into_response();
                }
                let components = crate::health::COMPONENTS.iter().map(|name| (*name, status_of(name))).collect();
                ApiResponse::ok(crate::http::routes::health::PlatformHealth {
                    status: HealthStatus::Down,
                    mode: self.leaderless_mode(),
                    trading_state: None,
                    components,
                })
                .with_status(axum::http::StatusCode::SERVICE_UNAVAILABLE)
                .into_response()
            })
            .await
    }

    /// The emergency halt through a follower: a caller allowed to halt, with a reason, has the
    /// halt **stored first** (`halt_requests`, for the leader running now — it looks every
    /// second — or the next one, before anything else), then forwarded. The leader's answer is
    /// relayed; when no leader answers (it is changing), this node answers itself: halted,
    /// persisted, applied by the next leader, and audited here. Anything else (no token, a bad
    /// reason) is the leader's to refuse, as forwarded.
    async fn halt(
        &self,
        parts: axum::http::request::Parts,
        body: bytes::Bytes,
        client: Option<std::net::IpAddr>,
    ) -> Response {
        let now = self.clock.now();
        let caller = self.caller(&parts.headers).await.filter(|p| p.role.allows(EMERGENCY_HALT.role));
        let reason = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_string))
            .filter(|r| crate::http::routes::radar::require_reason(r).is_ok());
        let request_ref = Meta::current().request_id;
        let stored = match (&caller, &reason) {
            (Some(caller), Some(reason)) => {
                match self.db.request_halt(reason, &caller.name, &self.node, &request_ref, now.timestamp_millis()).await
                {
                    Ok(id) => Some(id),
                    Err(e) => {
                        tracing::error!(error = %e, "an emergency halt could not be stored here: forwarded only");
                        None
                    }
                }
            }
            _ => None,
        };
        let answer = match self.try_forward(&parts, body, client, false).await {
            Ok(answer) => Ok(answer),
            Err(not_forwarded) => Err(self.refusal(&not_forwarded).await),
        };
        let (Some(id), Some(caller), Some(reason)) = (stored, caller, reason) else {
            return answer.unwrap_or_else(|refusal| refusal);
        };
        match answer {
            // A node that does not lead (it too found no leader) answers 503: as no answer.
            Ok(answer) if answer.status() != axum::http::StatusCode::SERVICE_UNAVAILABLE => {
                if !answer.status().is_success() {
                    return answer;
                }
                // Marked applied only once the leader stored it: a leader that answers
                // `persisted: false` holds it in memory only (its database link may be cut, and
                // its term taken over), so the stored request stays for whoever leads next.
                let (mut parts, body) = answer.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
                let stored = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .is_ok_and(|v| v["data"]["persisted"].as_bool() == Some(true));
                if stored {
                    let _ = self.db.mark_halt_applied(id, now.timestamp_millis()).await;
                    return Response::from_parts(parts, axum::body::Body::from(bytes));
                }
                tracing::warn!(
                    request = id,
                    "the leader holds the emergency halt in memory only: kept for the next leader"
                );
                // Durable all the same: stored here, for whoever leads next.
                let mut body = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default();
                body["data"]["persisted"] = json!(true);
                body["data"]["kept_by"] = json!(self.node);
                parts.headers.remove(axum::http::header::CONTENT_LENGTH);
                Response::from_parts(parts, axum::body::Body::from(body.to_string()))
            }
            Ok(_) | Err(_) => {
                tracing::warn!(request = id, actor = %caller.name, "emergency halt stored for the next engine leader: no leader answers now");
                let positions = tradeops_store::TradingRepository::positions(&self.db).await.unwrap_or_default();
                let request = json!({"reason": reason, "accepted_by": self.node, "halt_request": id});
                self.audit_halt(&caller, request, request_ref).await;
                ApiResponse::ok(HaltResult {
                    halted: true,
                    liquidation_requested: positions.iter().any(|p| p.quantity != 0),
                    timestamp: format_ts(&now),
                    persisted: true,
                    kept_by: Some(self.node.clone()),
                })
                .into_response()
            }
        }
    }

    /// The emergency halt's audit row written by this node (a halt it stored for the next
    /// leader): best effort, as the stored request is what carries the halt.
    async fn audit_halt(&self, caller: &Principal, request: serde_json::Value, request_id: String) {
        let now = self.clock.now();
        let entry = tradeops_store::AuditEntry {
            ts: now.timestamp_millis(),
            wall_ts: now.timestamp_millis(),
            actor: caller.name.clone(),
            role: Some(caller.role.to_string()),
            action: EMERGENCY_HALT.name.to_string(),
            target: "trading".into(),
            request: request.to_string(),
            outcome: "OK".into(),
            mode: Meta::current().mode.as_str().to_string(),
            request_id,
        };
        if let Err(e) = tradeops_store::AuditRepository::append_audit(&self.db, &entry).await {
            tracing::warn!(error = %e, "the stored halt's audit row was not written");
        }
    }

    /// The cluster's `serve` processes but this one, as the heartbeats last listed them (node
    /// id and advertised address), kept by the node's own loop: the peers a leader cut from
    /// the database hands an emergency halt to ([`Front::lead_halt`]).
    pub fn set_peers(&self, peers: Vec<(String, String)>) {
        *self.peers.write().unwrap_or_else(|e| e.into_inner()) = peers;
    }

    /// The emergency halt on the leader, from a client (a follower that forwards one stores it
    /// itself): its service acts on it and answers; when that answer is `persisted: false` (its
    /// link to the database is cut: the halt is in its memory only, and its term may be taken
    /// over before the link heals), the halt is handed to a peer, which stores it as a halt
    /// request for whoever leads next — so it outlives this node — and the answer says so
    /// (`persisted: true`, `kept_by` the peer). With no peer to take it, the answer stays
    /// `persisted: false` and the engine hands it over itself once its link heals.
    async fn lead_halt(&self, router: Router, req: Request) -> Response {
        let (parts, body) = req.into_parts();
        let headers = parts.headers.clone();
        let body = match axum::body::to_bytes(body, MAX_HALT_BODY).await {
            Ok(body) => body,
            Err(_) => {
                return ApiError::new(ErrorCode::PayloadTooLarge, "The request body is too large").into_response()
            }
        };
        let answer = match router.oneshot(Request::from_parts(parts, Body::from(body.clone()))).await {
            Ok(answer) => answer,
            Err(never) => match never {},
        };
        if !answer.status().is_success() {
            return answer;
        }
        let (mut parts, answer_body) = answer.into_parts();
        let bytes = axum::body::to_bytes(answer_body, 1 << 20).await.unwrap_or_default();
        let mut value = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(value) if value["data"]["persisted"] == false => value,
            _ => return Response::from_parts(parts, Body::from(bytes)),
        };
        let request_ref = parts.headers.get(&REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let Some(peer) = self.hand_over(&headers, &body, request_ref).await else {
            return Response::from_parts(parts, Body::from(bytes));
        };
        value["data"]["persisted"] = json!(true);
        value["data"]["kept_by"] = json!(peer);
        parts.headers.remove(axum::http::header::CONTENT_LENGTH);
        Response::from_parts(parts, Body::from(value.to_string()))
    }

    /// Hands an emergency halt this leader could not store to the first peer that stores it;
    /// that peer's node id.
    async fn hand_over(&self, headers: &HeaderMap, body: &bytes::Bytes, request_ref: &str) -> Option<String> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner()).clone();
        for (node, url) in peers {
            let mut out = self
                .client
                .post(format!("{url}{}", HALT_PATHS[0]))
                .timeout(HAND_OVER_TIMEOUT)
                .header(SECRET_HEADER, self.secret.as_str())
                .header(HAND_OVER_HEADER, request_ref)
                .header(FORWARDED_BY_HEADER, self.node.as_str())
                .header(axum::http::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if let Some(auth) = headers.get(axum::http::header::AUTHORIZATION) {
                out = out.header(axum::http::header::AUTHORIZATION, auth);
            }
            match out.send().await {
                Ok(answer) if answer.status().is_success() => {
                    let kept = answer.json::<serde_json::Value>().await.ok();
                    if let Some(kept_by) = kept.as_ref().and_then(|v| v["data"]["kept_by"].as_str()) {
                        tracing::warn!(peer = %node, "the emergency halt this leader could not store is kept by a peer for the next leader");
                        return Some(kept_by.to_string());
                    }
                }
                Ok(answer) => {
                    tracing::warn!(peer = %node, status = %answer.status(), "a peer did not keep the unstored emergency halt")
                }
                Err(e) => tracing::warn!(peer = %node, error = %e, "a peer did not keep the unstored emergency halt"),
            }
        }
        None
    }

    /// Whether `req` is an emergency halt a leader of this cluster hands over to be kept.
    fn handed_over(&self, req: &Request) -> bool {
        req.method() == axum::http::Method::POST
            && HALT_PATHS.contains(&req.uri().path())
            && req.headers().contains_key(HAND_OVER_HEADER)
            && self.forwarded_here(req)
    }

    /// A halt a leader cut from the database handed over ([`Front::lead_halt`]): stored here as
    /// a halt request for whoever leads next (the leader itself when its link heals), under the
    /// caller the token names (checked here, as on any node) and the leader that accepted it;
    /// audited. Answered with this node as `kept_by`; refused when it cannot be stored.
    async fn keep_handed_over(&self, req: Request) -> Response {
        let (parts, body) = req.into_parts();
        let body = axum::body::to_bytes(body, MAX_HALT_BODY).await.unwrap_or_default();
        let header = |name: &HeaderName| parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let (from, request_ref) = (header(&FORWARDED_BY_HEADER).to_string(), header(&HAND_OVER_HEADER).to_string());
        let Some(caller) = self.caller(&parts.headers).await.filter(|p| p.role.allows(EMERGENCY_HALT.role)) else {
            return ApiError::new(ErrorCode::Forbidden, "This token may not halt trading").into_response();
        };
        let reason = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_string))
            .filter(|r| crate::http::routes::radar::require_reason(r).is_ok());
        let Some(reason) = reason else {
            return ApiError::new(ErrorCode::ValidationError, "The halt handed over has no valid reason")
                .into_response();
        };
        let now = self.clock.now();
        match self.db.request_halt(&reason, &caller.name, &from, &request_ref, now.timestamp_millis()).await {
            Ok(id) => {
                tracing::warn!(request = id, leader = %from, "an emergency halt its leader could not store is kept here for the next leader");
                let request = json!({"reason": reason, "accepted_by": from, "kept_by": self.node, "halt_request": id});
                self.audit_halt(&caller, request, request_ref).await;
                ApiResponse::ok(HaltResult {
                    halted: true,
                    liquidation_requested: false,
                    timestamp: format_ts(&now),
                    persisted: true,
                    kept_by: Some(self.node.clone()),
                })
                .into_response()
            }
            Err(e) => unavailable("database_unavailable", &format!("The halt could not be stored here: {e}")),
        }
    }

    /// The leader's component health as this follower reports it: the same rows, but the
    /// `cluster` row's `role` is `follower` and `node` this node (`leader` stays the leader).
    async fn as_follower(&self, answer: reqwest::Response, leader: &str) -> Response {
        let status = answer.status();
        let mut body: serde_json::Value = match answer.json().await {
            Ok(body) => body,
            Err(e) => {
                return unavailable(
                    "leader_unreachable",
                    &format!("The engine's leader at {leader} did not answer: {e}"),
                )
            }
        };
        if let Some(rows) = body["data"].as_array_mut() {
            for row in rows.iter_mut().filter(|r| r["name"] == "cluster") {
                row["detail"]["role"] = json!("follower");
                row["detail"]["node"] = json!(self.node);
                row["detail"]["leader_url"] = json!(leader);
            }
        }
        let mut response = axum::Json(body).into_response();
        *response.status_mut() = status;
        if let Ok(v) = HeaderValue::from_str(leader) {
            response.headers_mut().insert(LEADER_HEADER, v);
        }
        response
    }

    /// Who calls, by the bearer token (tokens read again if they changed); everyone is `local`
    /// when authentication is off.
    async fn caller(&self, headers: &HeaderMap) -> Option<Principal> {
        if !self.auth_enabled {
            return Some(Principal { name: "local".into(), role: tradeops_core::Role::Admin });
        }
        let token = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")?.trim();
        let _ = self.tokens.refresh().await;
        self.tokens.resolve(token, self.clock.now().timestamp_millis())
    }
}

/// Every request: to this node's own router when it leads; else a read of the database to the
/// standby service's router, and anything else forwarded to the leader.
async fn dispatch(State(front): State<Arc<Front>>, req: Request) -> Response {
    let role = front.role.read().unwrap_or_else(|e| e.into_inner()).clone();
    let leading = matches!(role, Role::Leader(_));
    // The leader's own router, or a follower's standby router for a read of the database.
    let here = match role {
        Role::Leader(router) => Some(router),
        Role::Follower => front.local_read(&req),
    };
    let client_halt = req.method() == axum::http::Method::POST
        && HALT_PATHS.contains(&req.uri().path())
        && !front.forwarded_here(&req);
    let mut response = match here {
        _ if front.handed_over(&req) => {
            let ctx = RequestContext {
                request_id: request_id(&req),
                mode: *front.mode.read().unwrap_or_else(|e| e.into_inner()),
                clock: front.clock.clone(),
            };
            REQUEST.scope(ctx, front.keep_handed_over(req)).await
        }
        Some(router) if leading && client_halt => front.lead_halt(router, front.believe_forwarded(req)).await,
        Some(router) => match router.oneshot(front.believe_forwarded(req)).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        None => {
            let mode = *front.mode.read().unwrap_or_else(|e| e.into_inner());
            let ctx = RequestContext { request_id: request_id(&req), mode, clock: front.clock.clone() };
            let id = ctx.request_id.clone();
            let mut response = if front.forwarded_here(&req) {
                // A node of the cluster took this one for the leader, and it is not: forwarding
                // again could only go round (every hop adds headers until the request is refused
                // as too large). The caller is told no leader answers, and retries.
                let refusal = unavailable(
                    "no_engine_leader",
                    "No node runs the trading engine at the moment: this node was forwarded a request as the \
                     leader, and it does not lead (a failover is in progress)",
                );
                REQUEST.scope(ctx, async { refusal }).await
            } else {
                REQUEST.scope(ctx, front.forward(req)).await
            };
            if !response.headers().contains_key(&REQUEST_ID_HEADER) {
                if let Ok(v) = HeaderValue::from_str(&id) {
                    response.headers_mut().insert(REQUEST_ID_HEADER, v);
                }
            }
            response
        }
    };
    if let Ok(node) = HeaderValue::from_str(&front.node) {
        response.headers_mut().insert(NODE_HEADER, node);
    }
    response
}

/// The leader's answer as it is: status, headers (but those of its connection) and the body,
/// streamed (the event stream never ends).
fn relay(answer: reqwest::Response, leader: &str) -> Response {
    let status = answer.status();
    let mut headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(v) = HeaderValue::from_str(leader) {
        headers.insert(LEADER_HEADER, v);
    }
    let stream = futures::stream::unfold(answer, |mut answer| async move {
        match answer.chunk().await {
            Ok(Some(bytes)) => Some((Ok::<_, std::io::Error>(bytes), answer)),
            Ok(None) => None,
            Err(e) => Some((Err(std::io::Error::other(e)), answer)),
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// `SERVICE_UNAVAILABLE` from a follower that cannot reach a leader: retry in a second.
fn unavailable(reason: &str, message: &str) -> Response {
    ApiError::new(ErrorCode::ServiceUnavailable, message)
        .with_detail(json!({"reason": reason}))
        .with_retry_after(1)
        .into_response()
}

/// Whether `a` equals `b`, in time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    /// Where nothing listens: a forward there would fail to connect, not answer.
    const OWN: &str = "http://127.0.0.1:9";
    const OTHER: &str = "http://127.0.0.2:9";
    /// How long these fronts hold a request while no node leads.
    const HOLD: Duration = Duration::from_millis(300);

    async fn follower(dir: &tempfile::TempDir) -> (Arc<Front>, Database) {
        let db = Database::open(&format!("sqlite://{}/front.db", dir.path().display())).await.unwrap();
        let tokens = TokenRegistry::load(Arc::new(db.clone())).await.unwrap();
        let front = Front::new(
            "host:2:127.0.0.1:9".into(),
            OWN.into(),
            db.clone(),
            Arc::new(SystemClock),
            (None, Some(TradingMode::Demo)),
            tokens,
            false,
            "secret".into(),
        );
        let mut front = front;
        Arc::get_mut(&mut front).expect("not shared yet").hold_for_leader = HOLD;
        (front, db)
    }

    /// The engine's term names `node` at `url`.
    async fn leader_is(db: &Database, node: &str, url: &str) {
        let epoch = db.take_engine_epoch(node, 0).await.unwrap();
        assert!(db.advertise_engine(epoch, node, url).await.unwrap());
    }

    async fn answer(front: &Arc<Front>, req: axum::http::Request<axum::body::Body>) -> (u16, serde_json::Value) {
        let response = front.router().oneshot(req).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap_or_default())
    }

    fn get(path: &str) -> axum::http::request::Builder {
        axum::http::Request::get(path)
    }

    /// Restarted at the address of a leader that died there, a node would forward to itself
    /// (each hop adding headers until the request is refused as too large): it answers that no
    /// leader answers instead, at once.
    #[tokio::test]
    async fn a_node_never_forwards_to_its_own_address() {
        let dir = tempfile::tempdir().unwrap();
        let (front, db) = follower(&dir).await;
        leader_is(&db, "host:1:127.0.0.1:9", OWN).await;
        let (status, body) = answer(&front, get("/api/settings").body(Default::default()).unwrap()).await;
        assert_eq!((status, body["error"]["detail"]["reason"].as_str()), (503, Some("no_engine_leader")), "{body}");
    }

    /// A request another node forwarded here, taking this node for the leader, is not forwarded
    /// again: forwarding could only go round.
    #[tokio::test]
    async fn a_forwarded_request_is_not_forwarded_again() {
        let dir = tempfile::tempdir().unwrap();
        let (front, db) = follower(&dir).await;
        leader_is(&db, "host:3:127.0.0.2:9", OTHER).await;
        let forwarded = get("/api/settings").header(SECRET_HEADER, "secret").body(Default::default()).unwrap();
        let (status, body) = answer(&front, forwarded).await;
        assert_eq!((status, body["error"]["detail"]["reason"].as_str()), (503, Some("no_engine_leader")), "{body}");
        // Without the cluster's secret it is a client's request: forwarded (and here the leader
        // cannot be reached).
        let (status, body) = answer(&front, get("/api/settings").body(Default::default()).unwrap()).await;
        assert_eq!((status, body["error"]["detail"]["reason"].as_str()), (503, Some("leader_unreachable")), "{body}");
    }

    /// An emergency halt sent to a node that finds no leader is stored and answered as stored,
    /// for the next leader to apply.
    #[tokio::test]
    async fn a_halt_with_no_leader_to_forward_to_is_stored_and_answered() {
        let dir = tempfile::tempdir().unwrap();
        let (front, db) = follower(&dir).await;
        leader_is(&db, "host:1:127.0.0.1:9", OWN).await;
        let halt = axum::http::Request::post("/api/risk/emergency-halt")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(r#"{"reason": "the leader's address is this node's"}"#))
            .unwrap();
        let (status, body) = answer(&front, halt).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!((body["data"]["halted"].as_bool(), body["data"]["persisted"].as_bool()), (Some(true), Some(true)));
        assert_eq!(db.pending_halts().await.unwrap().len(), 1, "for the next leader");
    }

    /// A lone node starting (its term taken, its service still being built) holds a request
    /// rather than refusing it as leaderless, and answers it with its own service the moment it
    /// leads (CONTRACT §10: every node serves the whole API).
    #[tokio::test]
    async fn a_request_while_this_node_starts_is_held_until_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let (mut front, db) = follower(&dir).await;
        Arc::get_mut(&mut front).unwrap().hold_for_leader = Duration::from_secs(30);
        // This node has taken the term and not advertised it yet: its service is being built.
        db.take_engine_epoch(&front.node, 0).await.unwrap();
        let waiting = {
            let front = front.clone();
            tokio::spawn(async move {
                let put = axum::http::Request::put("/api/settings").body(Default::default()).unwrap();
                answer(&front, put).await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished(), "held, not refused, while no node leads");
        let service = Router::new().route(
            "/api/settings",
            axum::routing::put(|| async { axum::Json(json!({"data": {"served_by": "the new leader"}})) }),
        );
        front.lead(service);
        let (status, body) = waiting.await.unwrap();
        assert_eq!((status, body["data"]["served_by"].as_str()), (200, Some("the new leader")), "{body}");
    }

    /// While no node leads, health still answers with a health body (CONTRACT §10): `/api/health`
    /// 503 `DOWN` with every component, the API and the database up, the engine's parts down;
    /// the component rows say the engine is `STARTING` on this node, which holds the term. Its
    /// answers and refusals carry the mode this node is configured to trade in, not `PAPER`.
    #[tokio::test]
    async fn with_no_leader_health_answers_a_health_body_in_the_configured_mode() {
        let dir = tempfile::tempdir().unwrap();
        let (front, db) = follower(&dir).await;
        db.take_engine_epoch(&front.node, 0).await.unwrap();
        let (status, body) = answer(&front, get("/api/health").body(Default::default()).unwrap()).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!((body["data"]["status"].as_str(), body["data"]["mode"].as_str()), (Some("DOWN"), Some("DEMO")));
        assert_eq!(body["meta"]["mode"], "DEMO", "{body}");
        let components = &body["data"]["components"];
        assert_eq!((components["api"].as_str(), components["database"].as_str()), (Some("HEALTHY"), Some("HEALTHY")));
        assert_eq!(components["execution_broker"], "DOWN", "{body}");
        assert_eq!(components.as_object().unwrap().len(), crate::health::COMPONENTS.len(), "{body}");

        let (status, body) = answer(&front, get("/api/health/components").body(Default::default()).unwrap()).await;
        assert_eq!(status, 200, "{body}");
        let rows = body["data"].as_array().unwrap();
        let risk = rows.iter().find(|r| r["name"] == "risk_manager").unwrap();
        assert_eq!((risk["status"].as_str(), risk["detail"]["engine"].as_str()), (Some("DOWN"), Some("STARTING")));
        let cluster = rows.iter().find(|r| r["name"] == "cluster").unwrap();
        assert_eq!(cluster["detail"]["role"], "follower", "{cluster}");

        // A write held for the whole hold is refused as leaderless, in the configured mode.
        let put = axum::http::Request::put("/api/settings").body(Default::default()).unwrap();
        let (status, body) = answer(&front, put).await;
        assert_eq!((status, body["error"]["detail"]["reason"].as_str()), (503, Some("no_engine_leader")), "{body}");
        assert_eq!(body["meta"]["mode"], "DEMO", "{body}");
    }

    /// A leader cut from the database answers a halt `persisted: false`: its front hands the
    /// halt to a peer, which stores it as a halt request for whoever leads next, and the answer
    /// says where it is kept. With no peer that answers, the answer stays `persisted: false`.
    #[tokio::test]
    async fn a_halt_a_leader_cannot_store_is_kept_by_a_peer() {
        let dir = tempfile::tempdir().unwrap();
        let (mut leader, db) = follower(&dir).await;
        Arc::get_mut(&mut leader).unwrap().node = "leader-node".into();
        let (peer, _) = follower(&dir).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer_url = format!("http://{}", listener.local_addr().unwrap());
        let service = peer.router();
        tokio::spawn(async move { axum::serve(listener, service).await });
        // The leader's service: halted in memory, its database out of reach.
        let unstored = Router::new().route(
            "/api/risk/emergency-halt",
            axum::routing::post(|| async {
                axum::Json(json!({"data": {"halted": true, "liquidation_requested": true,
                    "timestamp": "2026-11-23T12:00:00.000Z", "persisted": false, "kept_by": null}}))
            }),
        );
        leader.lead(unstored);
        let halt = || {
            axum::http::Request::post("/api/risk/emergency-halt")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(r#"{"reason": "the leader is cut from the database"}"#))
                .unwrap()
        };

        leader.set_peers(vec![("gone".into(), OWN.into()), (peer.node.clone(), peer_url)]);
        let (status, body) = answer(&leader, halt()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"]["persisted"], true, "{body}");
        assert_eq!(body["data"]["kept_by"].as_str(), Some(peer.node.as_str()), "{body}");
        let pending = db.pending_halts().await.unwrap();
        assert_eq!(pending.len(), 1, "kept for the next leader");
        assert_eq!(
            (pending[0].node_id.as_str(), pending[0].reason.as_str()),
            ("leader-node", "the leader is cut from the database")
        );

        leader.set_peers(vec![("gone".into(), OWN.into())]);
        let (status, body) = answer(&leader, halt()).await;
        assert_eq!((status, body["data"]["persisted"].as_bool()), (200, Some(false)), "{body}");
        assert_eq!(body["data"]["kept_by"], serde_json::Value::Null, "{body}");
        assert_eq!(db.pending_halts().await.unwrap().len(), 1, "nothing more kept");
    }
}
