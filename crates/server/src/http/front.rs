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

/// The engine's leader as its term names it: node id and advertised address (`None`: no term
/// holder has an address yet).
type Leader = Option<(String, String)>;

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
    /// The leader (its node id and address) as last read, and when.
    leader: tokio::sync::Mutex<Option<(Leader, tokio::time::Instant)>>,
    /// The trading mode last seen (a follower's own refusals carry it in `meta`).
    mode: RwLock<TradingMode>,
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
        mode: TradingMode,
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
            mode: RwLock::new(mode),
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

    /// The leader's node id and advertised address: read from the engine's term at most every
    /// [`LEADER_CACHE`], at once when `fresh` (the last one failed).
    async fn leader(&self, fresh: bool) -> Result<Leader, String> {
        let mut cached = self.leader.lock().await;
        if let Some((url, at)) = cached.as_ref() {
            if !fresh && at.elapsed() < LEADER_CACHE {
                return Ok(url.clone());
            }
        }
        let lease = self.db.engine_lease().await.map_err(|e| e.to_string())?;
        let leader = lease.node_id.zip(lease.advertise_url);
        *cached = Some((leader.clone(), tokio::time::Instant::now()));
        Ok(leader)
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
        self.try_forward(&parts, body, client).await.unwrap_or_else(|refusal| refusal)
    }

    /// The leader's answer to the request, or (`Err`) the refusal to send when no leader can
    /// be reached. A connection that fails is tried once more with the leader read again (it
    /// may have just changed).
    async fn try_forward(
        &self,
        parts: &axum::http::request::Parts,
        body: bytes::Bytes,
        client: Option<std::net::IpAddr>,
    ) -> Result<Response, Response> {
        let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
        let streaming = parts.uri.path() == "/api/events";
        let mut last_error = String::new();
        for attempt in 0..2 {
            let leader = match self.leader(attempt > 0).await {
                // The term names this node, or a holder at this node's own address (a process
                // here before a restart, gone since this one listens there): forwarding would
                // come back here. No leader answers until this node, or another, takes over.
                Ok(Some((node, url))) if node == self.node || url == self.advertise => {
                    return Err(unavailable(
                        "no_engine_leader",
                        "No node runs the trading engine at the moment: the engine's term names this node's \
                         address, and this node does not lead (a failover is in progress)",
                    ))
                }
                Ok(Some((_, url))) => url,
                Ok(None) => {
                    return Err(unavailable(
                        "no_engine_leader",
                        "No node runs the trading engine at the moment (a failover is in progress)",
                    ))
                }
                Err(e) => {
                    return Err(unavailable(
                        "database_unavailable",
                        &format!("The engine's leader cannot be looked up: {e}"),
                    ))
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
                    return Err(unavailable(
                        "leader_unreachable",
                        &format!("The engine's leader at {leader} did not answer: {e}"),
                    ))
                }
            }
        }
        Err(unavailable("leader_unreachable", &last_error))
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
        let answer = self.try_forward(&parts, body, client).await;
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
                parts.headers.remove(axum::http::header::CONTENT_LENGTH);
                Response::from_parts(parts, axum::body::Body::from(body.to_string()))
            }
            Ok(_) | Err(_) => {
                tracing::warn!(request = id, actor = %caller.name, "emergency halt stored for the next engine leader: no leader answers now");
                let positions = tradeops_store::TradingRepository::positions(&self.db).await.unwrap_or_default();
                let entry = tradeops_store::AuditEntry {
                    ts: now.timestamp_millis(),
                    wall_ts: now.timestamp_millis(),
                    actor: caller.name.clone(),
                    role: Some(caller.role.to_string()),
                    action: EMERGENCY_HALT.name.to_string(),
                    target: "trading".into(),
                    request: json!({"reason": reason, "accepted_by": self.node, "halt_request": id}).to_string(),
                    outcome: "OK".into(),
                    mode: Meta::current().mode.as_str().to_string(),
                    request_id: request_ref,
                };
                if let Err(e) = tradeops_store::AuditRepository::append_audit(&self.db, &entry).await {
                    tracing::warn!(error = %e, "the stored halt's audit row was not written");
                }
                ApiResponse::ok(HaltResult {
                    halted: true,
                    liquidation_requested: positions.iter().any(|p| p.quantity != 0),
                    timestamp: format_ts(&now),
                    persisted: true,
                })
                .into_response()
            }
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
    // The leader's own router, or a follower's standby router for a read of the database.
    let here = match role {
        Role::Leader(router) => Some(router),
        Role::Follower => front.local_read(&req),
    };
    let mut response = match here {
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

    async fn follower(dir: &tempfile::TempDir) -> (Arc<Front>, Database) {
        let db = Database::open(&format!("sqlite://{}/front.db", dir.path().display())).await.unwrap();
        let tokens = TokenRegistry::load(Arc::new(db.clone())).await.unwrap();
        let front = Front::new(
            "host:2:127.0.0.1:9".into(),
            OWN.into(),
            db.clone(),
            Arc::new(SystemClock),
            TradingMode::Paper,
            tokens,
            false,
            "secret".into(),
        );
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
}
