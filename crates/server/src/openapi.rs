//! The OpenAPI document, generated from the handlers' annotations (utoipa), served at
//! `GET /api/openapi.json` with an offline Swagger UI at `/api/docs`.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "tradeops API",
        version = "1.0.0",
        description = "Momentum day trading of US equities: the operator console's backend.\n\n\
Every `/api` response is an envelope: `{ok: true, data, meta}` or `{ok: false, error: {code, message, detail}, meta}`, \
with `meta.mode`, `meta.timestamp` and `meta.request_id`, and headers `X-Request-Id` and `X-Trading-Mode`. \
List endpoints add `meta.count` and, when paginated, `meta.next_cursor` (null on the last page). \
Timestamps are RFC 3339 UTC with milliseconds. Money is a JSON number, exact to the cent internally.\n\n\
Authentication: `Authorization: Bearer <token>`; roles viewer < operator < admin. `GET /api/health`, this document \
and `/api/docs` are public. Sensitive actions need operator (tokens: admin) and, while LIVE, header `X-Confirm-Live: true`; \
every one, refusals included, is audited. Refusals before identification (no or an invalid token: UNAUTHORIZED; a spent \
budget: RATE_LIMITED) are audited in aggregate: one row per source address, action, outcome and minute, with \
`request` = `{source, count, first, last}` and `target` = the source. Requests without a valid token have a budget per \
client address (IPv6: per /64; default 5/s, burst 20), tokens their own (default 20/s, burst 40); over it: \
RATE_LIMITED with Retry-After.\n\n\
Errors: VALIDATION_ERROR 400, UNAUTHORIZED 401, FORBIDDEN 403, NOT_FOUND 404, POSITION_NOT_FOUND 404, \
METHOD_NOT_ALLOWED 405, ORDER_NOT_CANCELLABLE 409, DUPLICATE_ORDER_BLOCKED 409, MARKET_CLOSED 409, \
EMERGENCY_HALT_ACTIVE 409, SETTINGS_UPDATE_BLOCKED 409, PAYLOAD_TOO_LARGE 413 (bodies over 64 KiB), RISK_BLOCKED 422, \
CONFIRMATION_REQUIRED 428, RATE_LIMITED 429 (Retry-After), INTERNAL_ERROR 500, BROKER_UNAVAILABLE 503."
    ),
    paths(
        crate::routes::health::health,
        crate::routes::health::components,
        crate::routes::settings::get_settings,
        crate::routes::settings::put_settings,
        crate::routes::settings::history,
        crate::routes::auth::create_token,
        crate::routes::auth::list_tokens,
        crate::routes::auth::revoke_token,
        crate::routes::auth::me,
        crate::routes::audit::list_audit,
        crate::routes::system::version,
        crate::routes::radar::momentum,
        crate::routes::radar::watch,
        crate::routes::radar::block,
        crate::routes::radar::unblock,
        crate::routes::radar::blocks,
        crate::routes::watchlist::list,
        crate::routes::watchlist::stop,
        crate::routes::watchlist::restart,
        crate::routes::orders::create,
        crate::routes::orders::list,
        crate::routes::orders::detail,
        crate::routes::orders::cancel,
        crate::routes::positions::list,
        crate::routes::positions::close,
        crate::routes::positions::halt,
        crate::routes::risk::state,
        crate::routes::risk::violations,
        crate::routes::risk::emergency_halt,
        crate::routes::risk::emergency_liquidate,
        crate::routes::risk::resume,
        crate::routes::risk::resume_strategies,
        crate::routes::account::dashboard,
        crate::routes::account::summary,
        crate::routes::account::performance,
        crate::routes::events::events,
        crate::routes::data::download,
        crate::routes::data::list,
        crate::routes::data::one,
        crate::routes::data::import,
        crate::routes::strategies::list,
        crate::routes::backtests::run,
        crate::routes::backtests::list,
        crate::routes::backtests::one,
        crate::routes::trades::list,
        crate::routes::trades::one,
        crate::routes::trades::recommendations,
        crate::routes::market::bars,
    ),
    components(schemas(crate::error::ErrorCode, crate::envelope::ErrorBody)),
    modifiers(&BearerAuth),
    tags(
        (name = "health", description = "Platform and component health"),
        (name = "settings", description = "Runtime settings, versioned"),
        (name = "auth", description = "Tokens and roles"),
        (name = "audit", description = "Who did what"),
        (name = "system", description = "Service metadata"),
        (name = "radar", description = "Momentum radar, watching and blocking symbols"),
        (name = "watchlist", description = "Symbols a strategy trades"),
        (name = "orders", description = "Orders and executions"),
        (name = "positions", description = "Open positions"),
        (name = "risk", description = "Risk state, violations, emergency halt"),
        (name = "account", description = "Account and dashboard"),
        (name = "events", description = "The live event stream (Server-Sent Events)"),
        (name = "data", description = "Historical data downloads and imports"),
        (name = "strategies", description = "Built-in strategies and their parameters"),
        (name = "backtests", description = "Backtests on the live engine"),
        (name = "trades", description = "Completed trades, their deep dives and recommendations"),
        (name = "market", description = "Market data from the data broker, for charts"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document as served.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}
