//! The cluster's front door (issue 25.2): on PostgreSQL every `serve` process listens at once,
//! whether or not it runs the engine. The one that holds the engine's term is the **leader**:
//! its front hands each request to its own router, in process. Every other is a **follower**
//! (a hot standby): its front forwards each request — reads, commands, the SSE stream, the
//! console's files — to the leader's advertised address, and relays the leader's answer as it
//! is (status, headers, body, streamed), so a caller gets the leader's result from any node and
//! the leader alone authenticates, rate-limits, audits and acts. The one exception is the
//! emergency halt while no leader answers (it is changing): see [`Front::halt_requested`].
//!
//! When no leader can be reached (a failover in progress), a follower answers
//! `SERVICE_UNAVAILABLE` (503, `Retry-After: 1`, `detail.reason`), and once it takes the term
//! over itself its front becomes the leader's: one listener throughout, nothing to rebind.
//! Every answer carries `X-Tradeops-Node` (who answered) and, forwarded, `X-Tradeops-Leader`.

use crate::http::envelope::{RequestContext, REQUEST};
use crate::http::error::{ApiError, ErrorCode};
use crate::http::middleware::{request_id, REQUEST_ID_HEADER};
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
use tradeops_core::{Clock, TradingMode};
use tradeops_store::Database;

/// Who answered: this node's name.
pub const NODE_HEADER: HeaderName = HeaderName::from_static("x-tradeops-node");
/// The leader a follower forwarded to.
pub const LEADER_HEADER: HeaderName = HeaderName::from_static("x-tradeops-leader");
/// The node that forwarded a request (set by a follower).
pub const FORWARDED_BY_HEADER: HeaderName = HeaderName::from_static("x-tradeops-forwarded-by");

/// A forwarded request's bound, but the event stream's (it lasts).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest body a follower forwards (the API's largest: a bar import).
const MAX_FORWARDED_BODY: usize = 64 * 1024 * 1024;
/// How long a follower trusts the leader's address it read before reading it again.
const LEADER_CACHE: Duration = Duration::from_millis(250);

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

/// This node's front: its role, and what a follower forwards with.
pub struct Front {
    node: String,
    db: Database,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    role: RwLock<Role>,
    /// The leader's address as last read, and when.
    leader: tokio::sync::Mutex<Option<(Option<String>, tokio::time::Instant)>>,
    /// The trading mode last seen (a follower's own refusals carry it in `meta`).
    mode: RwLock<TradingMode>,
}

#[derive(Clone)]
enum Role {
    Follower,
    Leader(Router),
}

impl Front {
    /// A follower's front, as `node`, reading the leader's address from `db`.
    pub fn new(node: String, db: Database, clock: Arc<dyn Clock>, mode: TradingMode) -> Arc<Front> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(1))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("a plain HTTP client builds");
        Arc::new(Front {
            node,
            db,
            clock,
            client,
            role: RwLock::new(Role::Follower),
            leader: tokio::sync::Mutex::new(None),
            mode: RwLock::new(mode),
        })
    }

    /// The router the public listener serves: every request goes through [`dispatch`].
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new().fallback(dispatch).with_state(self.clone())
    }

    /// This node took the engine's term: from now on requests go to `router`, in process.
    pub fn lead(&self, router: Router) {
        *self.role.write().unwrap_or_else(|e| e.into_inner()) = Role::Leader(router);
    }

    /// Whether this node leads.
    pub fn leads(&self) -> bool {
        matches!(*self.role.read().unwrap_or_else(|e| e.into_inner()), Role::Leader(_))
    }

    /// The trading mode a follower's own answers carry.
    pub fn set_mode(&self, mode: TradingMode) {
        *self.mode.write().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// The leader's advertised address: read from the engine's term at most every
    /// [`LEADER_CACHE`], at once when `fresh` (the last one failed).
    async fn leader_url(&self, fresh: bool) -> Result<Option<String>, String> {
        let mut cached = self.leader.lock().await;
        if let Some((url, at)) = cached.as_ref() {
            if !fresh && at.elapsed() < LEADER_CACHE {
                return Ok(url.clone());
            }
        }
        let lease = self.db.engine_lease().await.map_err(|e| e.to_string())?;
        let url = lease.node_id.and(lease.advertise_url);
        *cached = Some((url.clone(), tokio::time::Instant::now()));
        Ok(url)
    }

    /// Forwards `req` to the leader and relays its answer; a connection that fails is tried
    /// once more with the leader read again (it may have just changed).
    async fn forward(&self, req: Request) -> Response {
        let client_addr = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        let (parts, body) = req.into_parts();
        let body = match axum::body::to_bytes(body, MAX_FORWARDED_BODY).await {
            Ok(body) => body,
            Err(_) => {
                return ApiError::new(ErrorCode::PayloadTooLarge, "The request body is too large to forward")
                    .into_response()
            }
        };
        let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
        let streaming = parts.uri.path() == "/api/events";
        let mut last_error = String::new();
        for attempt in 0..2 {
            let leader = match self.leader_url(attempt > 0).await {
                Ok(Some(url)) => url,
                Ok(None) => {
                    return unavailable(
                        "no_engine_leader",
                        "No node runs the trading engine at the moment (a failover is in progress)",
                    )
                }
                Err(e) => {
                    return unavailable(
                        "database_unavailable",
                        &format!("The engine's leader cannot be looked up: {e}"),
                    )
                }
            };
            let mut out = self.client.request(parts.method.clone(), format!("{leader}{path}"));
            for (name, value) in parts.headers.iter() {
                if name != axum::http::header::HOST && !HOP_BY_HOP.contains(&name.as_str()) {
                    out = out.header(name, value);
                }
            }
            if let Some(ip) = client_addr {
                out = out.header("x-forwarded-for", ip.to_string());
            }
            out = out.header(FORWARDED_BY_HEADER, self.node.as_str()).body(body.clone());
            if !streaming {
                out = out.timeout(FORWARD_TIMEOUT);
            }
            match out.send().await {
                Ok(answer) => return relay(answer, &leader),
                Err(e) if e.is_connect() => {
                    last_error = format!("the engine's leader at {leader} cannot be reached: {e}");
                    continue;
                }
                Err(e) => {
                    return unavailable(
                        "leader_unreachable",
                        &format!("The engine's leader at {leader} did not answer: {e}"),
                    )
                }
            }
        }
        unavailable("leader_unreachable", &last_error)
    }
}

/// Every request: to this node's own router when it leads, else forwarded to the leader.
async fn dispatch(State(front): State<Arc<Front>>, req: Request) -> Response {
    let role = front.role.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut response = match role {
        Role::Leader(router) => match router.oneshot(req).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        Role::Follower => {
            let mode = *front.mode.read().unwrap_or_else(|e| e.into_inner());
            let ctx = RequestContext { request_id: request_id(&req), mode, clock: front.clock.clone() };
            let id = ctx.request_id.clone();
            let mut response = REQUEST.scope(ctx, front.forward(req)).await;
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
