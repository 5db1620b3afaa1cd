//! The OpenAPI document, generated from the handlers' annotations (utoipa), served at
//! `GET /api/openapi.json` with an offline Swagger UI at `/api/docs`.

use crate::http::stated_rules::StatedRules;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Ref, RefOr};
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
METHOD_NOT_ALLOWED 405, ORDER_NOT_CANCELLABLE 409, DUPLICATE_ORDER_BLOCKED 409, MARKET_CLOSED 409, OUTSIDE_REGULAR_SESSION 409, \
EMERGENCY_HALT_ACTIVE 409, SETTINGS_UPDATE_BLOCKED 409, PAYLOAD_TOO_LARGE 413 (bodies over 64 KiB), RISK_BLOCKED 422, \
CONFIRMATION_REQUIRED 428, RATE_LIMITED 429 (Retry-After), INTERNAL_ERROR 500, BROKER_UNAVAILABLE 503, \
SERVICE_UNAVAILABLE 503 (Retry-After). Every operation declares the statuses it can answer; a VALIDATION_ERROR names \
the refused field by its path in `detail.field` and says what it accepts in `detail.reason`."
    ),
    paths(
        crate::http::routes::health::health,
        crate::http::routes::health::components,
        crate::http::routes::settings::get_settings,
        crate::http::routes::settings::put_settings,
        crate::http::routes::settings::history,
        crate::http::routes::auth::create_token,
        crate::http::routes::auth::list_tokens,
        crate::http::routes::auth::revoke_token,
        crate::http::routes::auth::me,
        crate::http::routes::audit::list_audit,
        crate::http::routes::system::version,
        crate::http::routes::radar::momentum,
        crate::http::routes::radar::watch,
        crate::http::routes::radar::block,
        crate::http::routes::radar::unblock,
        crate::http::routes::radar::blocks,
        crate::http::routes::watchlist::list,
        crate::http::routes::watchlist::stop,
        crate::http::routes::watchlist::restart,
        crate::http::routes::orders::create,
        crate::http::routes::orders::list,
        crate::http::routes::orders::detail,
        crate::http::routes::orders::cancel,
        crate::http::routes::orders::preview,
        crate::http::routes::positions::list,
        crate::http::routes::positions::close,
        crate::http::routes::positions::halt,
        crate::http::routes::risk::state,
        crate::http::routes::risk::violations,
        crate::http::routes::risk::emergency_halt,
        crate::http::routes::risk::emergency_liquidate,
        crate::http::routes::risk::resume,
        crate::http::routes::risk::resume_strategies,
        crate::http::routes::account::dashboard,
        crate::http::routes::account::summary,
        crate::http::routes::account::performance,
        crate::http::routes::events::events,
        crate::http::routes::data::download,
        crate::http::routes::data::list,
        crate::http::routes::data::one,
        crate::http::routes::data::cancel,
        crate::http::routes::data::import,
        crate::http::routes::strategies::list,
        crate::http::routes::backtests::run,
        crate::http::routes::backtests::create,
        crate::http::routes::backtests::list,
        crate::http::routes::backtests::one,
        crate::http::routes::backtests::cancel,
        crate::http::routes::sweeps::sweep,
        crate::http::routes::sweeps::sweeps,
        crate::http::routes::sweeps::one_sweep,
        crate::http::routes::sweeps::cancel_sweep,
        crate::http::routes::trades::list,
        crate::http::routes::trades::one,
        crate::http::routes::trades::recommendations,
        crate::http::routes::market::bars,
        crate::http::routes::market::quote,
        crate::http::routes::market::session,
        crate::http::routes::market::import_reference,
        crate::http::routes::market::reference,
        crate::http::routes::notifications::channels,
        crate::http::routes::notifications::test,
        crate::http::routes::notifications::deliveries,
    ),
    components(schemas(
        crate::http::error::ErrorCode,
        crate::http::envelope::ErrorBody,
        crate::http::string_schemas::ReasonText,
        crate::http::string_schemas::TradingDay,
        crate::http::string_schemas::IdCursor,
        crate::http::string_schemas::OrderCursor,
        crate::http::string_schemas::WatchlistStatus,
        crate::http::string_schemas::WatchlistSort,
        crate::http::string_schemas::ScopeTypeName
    )),
    modifiers(&BearerAuth, &CommonResponses, &StatedRules),
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
        (name = "market", description = "Market data from the data broker, for charts, and imported reference data (float, sector)"),
        (name = "notifications", description = "Messages to the operator's phone and team chat: channels, tests, deliveries"),
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

/// The refusals an operation can answer besides its own, declared once here rather than in
/// every annotation: each is a shared response (`#/components/responses/…`) with the error
/// envelope's schema, added to an operation that does not declare that status itself.
struct CommonResponses;

/// Which operations answer each shared refusal.
#[derive(Clone, Copy)]
enum Answered {
    /// Every operation.
    Always,
    /// Operations that take parameters or a body.
    WithInput,
    /// Operations that need a token.
    Secured,
    /// Actions (every method but GET), which need operator or admin.
    Actions,
}

/// (status, shared response name, when, description)
const COMMON: &[(&str, &str, Answered, &str)] = &[
    (
        "400",
        "ValidationError",
        Answered::WithInput,
        "VALIDATION_ERROR: `detail.field` names the refused field by its path, `detail.reason` says what it accepts",
    ),
    ("401", "Unauthorized", Answered::Secured, "UNAUTHORIZED: no, an invalid or a revoked token"),
    ("403", "Forbidden", Answered::Actions, "FORBIDDEN: the token's role may not do this"),
    ("413", "PayloadTooLarge", Answered::Actions, "PAYLOAD_TOO_LARGE: a body over 64 KiB"),
    (
        "428",
        "ConfirmationRequired",
        Answered::Actions,
        "CONFIRMATION_REQUIRED: trading is LIVE and header X-Confirm-Live: true is missing",
    ),
    (
        "429",
        "RateLimited",
        Answered::Always,
        "RATE_LIMITED: the token's (or, without one, the address's) request budget is spent; see Retry-After",
    ),
    ("500", "InternalError", Answered::Always, "INTERNAL_ERROR: a bug, logged with the request id"),
    (
        "503",
        "ServiceUnavailable",
        Answered::Always,
        "SERVICE_UNAVAILABLE (the database) or BROKER_UNAVAILABLE; see Retry-After",
    ),
];

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (_, name, _, description) in COMMON {
            let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
            let response =
                ResponseBuilder::new().description(*description).content("application/json", content).build();
            components.responses.insert(name.to_string(), RefOr::T(response));
        }
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                (false, item.get.as_mut()),
                (true, item.put.as_mut()),
                (true, item.post.as_mut()),
                (true, item.delete.as_mut()),
            ];
            for (action, operation) in operations {
                if let Some(operation) = operation {
                    add_common(operation, action);
                    // An optional body is absent or an object, never `null` (the server refuses
                    // a body that is not an object).
                    if let Some(body) = operation.request_body.as_mut() {
                        for content in body.content.values_mut() {
                            if let Some(schema) = content.schema.as_mut() {
                                not_null(schema);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A query parameter is absent or has a value, never `null` (utoipa marks `Option` fields
/// nullable).
fn not_null(schema: &mut RefOr<Schema>) {
    let is_null = |item: &RefOr<Schema>| matches!(item, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
    match schema {
        RefOr::T(Schema::OneOf(one_of)) => {
            one_of.items.retain(|item| !is_null(item));
            if one_of.items.len() == 1 {
                *schema = one_of.items.remove(0);
            }
        }
        RefOr::T(Schema::Object(object)) => {
            if let SchemaType::Array(types) = &object.schema_type {
                let kept: Vec<Type> = types.iter().filter(|t| **t != Type::Null).cloned().collect();
                object.schema_type =
                    if kept.len() == 1 { SchemaType::Type(kept[0].clone()) } else { SchemaType::Array(kept) };
            }
        }
        _ => {}
    }
}

fn add_common(operation: &mut Operation, action: bool) {
    for parameter in operation.parameters.iter_mut().flatten() {
        if let Some(schema) = parameter.schema.as_mut() {
            not_null(schema);
        }
    }
    let secured = operation.security.as_ref().is_some_and(|s| !s.is_empty());
    let input = operation.parameters.as_ref().is_some_and(|p| !p.is_empty()) || operation.request_body.is_some();
    for (status, name, when, _) in COMMON {
        let applies = match when {
            Answered::Always => true,
            Answered::WithInput => input || action,
            Answered::Secured => secured,
            Answered::Actions => action && secured,
        };
        if applies {
            let shared = RefOr::Ref(Ref::new(format!("#/components/responses/{name}")));
            operation.responses.responses.entry(status.to_string()).or_insert(shared);
        }
    }
}

/// The document as served.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}
