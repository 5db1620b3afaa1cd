//! Rules of the request types that their derived schemas cannot carry, stated in the served
//! document where JSON Schema can say them, so a client (or a contract test) that builds a
//! schema-valid request is not refused with VALIDATION_ERROR (CONTRACT §2) for a rule it could
//! not read. The rules JSON Schema cannot state (across fields, or against stored state) are
//! listed in docs/api.md, "Rules the schema cannot state".

use serde_json::{json, Value};
use utoipa::openapi::schema::{AdditionalProperties, Object, ObjectBuilder, Schema, Type};
use utoipa::openapi::{Components, OpenApi, Ref, RefOr};
use utoipa::Modify;

pub struct StatedRules;

/// The name of the partial settings object `PUT /api/settings` takes, and a run's overrides.
const SETTINGS_PATCH: &str = "SettingsPatch";

impl Modify for StatedRules {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        // The composed run requests as the one object their bodies are, before their fields'
        // rules are stated on it.
        crate::http::runs::inline_composed(components);
        components.schemas.insert(SETTINGS_PATCH.into(), RefOr::T(settings_patch()));

        // A run's settings overrides are a `PUT /api/settings` body, validated the same way.
        for schema in ["BacktestRequest", "DeskRequest", "SweepRequest"] {
            let property = object(components, schema).properties.get_mut("settings").expect("a run's settings");
            let description = match property {
                RefOr::T(Schema::Object(object)) => object.description.clone(),
                _ => None,
            };
            let mut patch = Ref::from_schema_name(SETTINGS_PATCH);
            patch.description = description.unwrap_or_default();
            *property = RefOr::Ref(patch);
        }

        // `Settings::validate` accepts only the strategies that trade live.
        let strategy = property(components, "StrategyAllocatorSettings", "default_strategy_id");
        strategy.enum_values = Some(tradeops_core::settings::LIVE_STRATEGIES.iter().map(|s| json!(s)).collect());

        // The radar's universe names each symbol once.
        if let Some(RefOr::T(Schema::Array(universe))) =
            object(components, "MomentumRadarSettings").properties.get_mut("universe")
        {
            universe.unique_items = true;
        }

        // The tick rule of an order's prices (`check_price`): whole cents at or above $1, at most
        // four decimal places below it.
        for (schema, field) in [
            ("CreateOrder", "limit_price"),
            ("CreateOrder", "stop_price"),
            ("StopLossLeg", "stop_price"),
            ("StopLossLeg", "limit_price"),
            ("TakeProfitLeg", "limit_price"),
        ] {
            extend(
                property(components, schema, field),
                "anyOf",
                json!([
                    {"exclusiveMaximum": 1, "multipleOf": 0.0001},
                    {"minimum": 1, "multipleOf": 0.01}
                ]),
            );
        }
        // The risk gate's order sanity: `limit_price` with `LIMIT` and `STOP_LIMIT` only,
        // `stop_price` with `STOP` and `STOP_LIMIT` only (`order_type` defaults to `MARKET`); exit
        // legs protect a `BUY`; the take-profit rests one-cancels-other with the stop, so it
        // needs one. One keyword per object: extensions are a hash map, and the snapshot needs
        // one order.
        let with_type = |types: [&str; 2], field: &str| {
            json!({
                "if": {"required": ["order_type"], "properties": {"order_type": {"enum": types}}},
                "then": {"required": [field]},
                "else": {"not": {"required": [field]}}
            })
        };
        extend(
            object(components, "CreateOrder"),
            "allOf",
            json!([
                {"dependentRequired": {"take_profit": ["stop_loss"]}},
                with_type(["LIMIT", "STOP_LIMIT"], "limit_price"),
                with_type(["STOP", "STOP_LIMIT"], "stop_price"),
                {"anyOf": [{"not": {"required": ["stop_loss"]}}, {"properties": {"side": {"const": "BUY"}}}]}
            ]),
        );

        // A sweep's grid names at least one parameter: an empty grid has nothing to sweep.
        // Each of its values is a list of 1 to 1,000 numbers or a range with a positive step.
        let grid = property(components, "SweepRequest", "grid");
        grid.min_properties = Some(1);
        extend(
            grid,
            "additionalProperties",
            json!({"oneOf": [
                {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 1000},
                {
                    "type": "object",
                    "required": ["from", "to", "step"],
                    "properties": {
                        "from": {"type": "number"},
                        "to": {"type": "number"},
                        "step": {"type": "number", "exclusiveMinimum": 0}
                    },
                    "additionalProperties": false
                }
            ]}),
        );

        // A desk replay's `symbols` choose among downloaded days; the simulated market replays
        // its whole universe (`DeskRequest::source`).
        extend(
            object(components, "DeskRequest"),
            "anyOf",
            json!([
                {"not": {"required": ["symbols"]}},
                {"required": ["source"], "properties": {"source": {"const": "downloaded"}}}
            ]),
        );

        let put_settings = openapi
            .paths
            .paths
            .get_mut("/api/settings")
            .and_then(|item| item.put.as_mut())
            .and_then(|op| op.request_body.as_mut())
            .expect("PUT /api/settings takes a body");
        for content in put_settings.content.values_mut() {
            content.schema = Some(RefOr::Ref(Ref::from_schema_name(SETTINGS_PATCH)));
        }
        // An imported file has at least its header line.
        for (path, put) in [("/api/data/import", false), ("/api/market/reference", true)] {
            let item = openapi.paths.paths.get_mut(path).expect("an import path");
            let operation = if put { item.put.as_mut() } else { item.post.as_mut() };
            let body = operation.and_then(|op| op.request_body.as_mut()).expect("an import body");
            if let Some(content) = body.content.get_mut("text/csv") {
                if let Some(RefOr::T(Schema::Object(text))) = content.schema.as_mut() {
                    text.min_length = Some(1);
                }
            }
        }
    }
}

/// Any of the settings groups, each with any of its fields; a group is an object, never `null`.
fn settings_patch() -> Schema {
    let mut patch = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "A partial settings object: any of the groups, each with any of its fields; what is left out keeps \
             its value. The rules across fields (`momentum_radar.max_price` above `min_price`, \
             `risk_controls.alert_critical_loss_pct` above `alert_warning_loss_pct`) are checked on the result.",
        ))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (group, schema) in [
        ("runtime", "RuntimeSettings"),
        ("momentum_radar", "MomentumRadarSettings"),
        ("strategy_allocator", "StrategyAllocatorSettings"),
        ("risk_controls", "RiskControls"),
        ("analytics", "AnalyticsSettings"),
    ] {
        patch = patch.property(group, Ref::from_schema_name(schema));
    }
    Schema::Object(patch.build())
}

fn object<'a>(components: &'a mut Components, name: &str) -> &'a mut Object {
    match components.schemas.get_mut(name) {
        Some(RefOr::T(Schema::Object(object))) => object,
        _ => panic!("schema {name} is not an object"),
    }
}

fn property<'a>(components: &'a mut Components, name: &str, field: &str) -> &'a mut Object {
    match object(components, name).properties.get_mut(field) {
        Some(RefOr::T(Schema::Object(object))) => object,
        _ => panic!("{name}.{field} is not an inline schema"),
    }
}

/// Adds a keyword utoipa's `Object` has no field for (it serialises its extensions in place).
fn extend(object: &mut Object, keyword: &str, value: Value) {
    object.extensions.get_or_insert_with(Default::default).insert(keyword.into(), value);
}
