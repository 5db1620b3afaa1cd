//! `GET/PUT /api/settings`: validation, guards, versions, persistence.

use crate::helpers::*;
use serde_json::json;

#[tokio::test]
async fn defaults_have_all_five_groups_and_contract_limits() {
    let app = spawn_app().await;
    let data = app.get("/api/settings").await.assert_ok(200).clone();
    for group in ["runtime", "momentum_radar", "strategy_allocator", "risk_controls", "analytics"] {
        assert!(data[group].is_object(), "{group} missing: {data}");
    }
    assert_eq!(data["runtime"]["trading_mode"], "PAPER");
    assert_eq!(data["runtime"]["market_data_broker"], "simulated");
    assert_eq!(data["runtime"]["execution_broker"], "paper");
    assert_eq!(data["runtime"]["market_calendar"], "ALWAYS_OPEN");
    let risk = &data["risk_controls"];
    assert_eq!(risk["max_daily_loss"], 500.0);
    assert_eq!(risk["max_position_size"], 2000);
    assert_eq!(risk["max_trades_per_day"], 20);
    assert_eq!(risk["active_watchlist_limit"], 10);
    assert_eq!(risk["open_position_limit"], 3);
}

#[tokio::test]
async fn partial_update_reports_changes_and_survives_restart() {
    let app = spawn_app().await;
    let reply = app
        .put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_daily_loss": 750.25, "open_position_limit": 3}, "runtime": {"trading_mode": "DEMO"}}))
        .await;
    let data = reply.assert_ok(200).clone();
    assert_eq!(data["updated"], json!(["runtime.trading_mode", "risk_controls.max_daily_loss"]));
    assert_eq!(data["effective_settings"]["risk_controls"]["max_daily_loss"], 750.25);
    assert_eq!(data["version"], 2);
    // the mode change is in effect for the very next response
    let next = app.get("/api/settings").await;
    assert_eq!(next.body["meta"]["mode"], "DEMO");
    assert_eq!(next.headers["x-trading-mode"], "DEMO");

    let app = app.restart().await;
    let after = app.get("/api/settings").await;
    assert_eq!(after.data()["risk_controls"]["max_daily_loss"], 750.25);
    assert_eq!(after.body["meta"]["mode"], "DEMO");
    assert_eq!(app.settings_version().await, 2);
}

#[tokio::test]
async fn no_op_update_creates_no_version() {
    let app = spawn_app().await;
    let reply = app.put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_daily_loss": 500}})).await;
    assert_eq!(reply.assert_ok(200)["updated"], json!([]));
    assert_eq!(app.settings_version().await, 1);
}

#[tokio::test]
async fn invalid_updates_name_the_field_and_change_nothing() {
    let app = spawn_app().await;
    let before = app.get("/api/settings").await.data().clone();
    for (body, field) in [
        (json!({"risk_controls": {"max_dialy_loss": 1}}), "risk_controls.max_dialy_loss"),
        (json!({"riskcontrols": {}}), "riskcontrols"),
        (json!({"risk_controls": {"max_daily_loss": "a lot"}}), "risk_controls.max_daily_loss"),
        (json!({"risk_controls": {"max_daily_loss": -5}}), "risk_controls.max_daily_loss"),
        (json!({"risk_controls": {"max_daily_loss": 10.001}}), "risk_controls.max_daily_loss"),
        (json!({"risk_controls": {"max_position_size": 1.5}}), "risk_controls.max_position_size"),
        (json!({"runtime": {"trading_mode": "paper-ish"}}), "runtime.trading_mode"),
        (json!({"runtime": {"market_calendar": "LSE"}}), "runtime.market_calendar"),
        (json!({"momentum_radar": {"min_price": 50, "max_price": 20}}), "momentum_radar.max_price"),
        (json!({"momentum_radar": {"universe": ["AAPL", "AAPL"]}}), "momentum_radar.universe"),
        (json!({"strategy_allocator": {"default_strategy_id": "yolo"}}), "strategy_allocator.default_strategy_id"),
        (json!({"analytics": {"confidence_level": 1.5}}), "analytics.confidence_level"),
        // Not an object of groups: the body itself is what is wrong.
        (json!([1, 2, 3]), "body"),
    ] {
        let reply = app.put_settings(ADMIN_TOKEN, body.clone()).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], field, "{body} → {}", reply.body);
        assert!(reply.body["error"]["detail"]["reason"].as_str().is_some_and(|r| !r.is_empty()));
    }
    assert_eq!(app.get("/api/settings").await.data(), &before);
    assert_eq!(app.settings_version().await, 1);
}

#[tokio::test]
async fn every_problem_is_listed() {
    let app = spawn_app().await;
    let reply = app
        .put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_daily_loss": 0, "open_position_limit": 0}, "analytics": {"min_sample_size": 0}}))
        .await;
    reply.assert_error(400, "VALIDATION_ERROR");
    let fields: Vec<_> = reply.body["error"]["detail"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        fields,
        vec!["risk_controls.max_daily_loss", "risk_controls.open_position_limit", "analytics.min_sample_size"]
    );
}

#[tokio::test]
async fn switching_to_live_is_guarded() {
    let app = spawn_app().await;
    let operator = app.token("ops", "operator").await;
    let live = json!({"runtime": {"trading_mode": "LIVE"}});

    let reply = app.put_settings(&operator, live.clone()).await;
    reply.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(reply.body["error"]["detail"]["guard"], "admin_role");

    let reply = app.put_settings(ADMIN_TOKEN, live.clone()).await;
    reply.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(reply.body["error"]["detail"]["guard"], "X-Confirm-Live");

    let reply = app.put_settings_confirmed(ADMIN_TOKEN, &live).await;
    reply.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(reply.body["error"]["detail"]["guard"], "live_capable_broker");
    assert_eq!(app.get("/api/settings").await.data()["runtime"]["trading_mode"], "PAPER");
}

/// While LIVE, every sensitive action needs `X-Confirm-Live`, and raising a risk limit needs
/// an admin too. LIVE is reached here as a persisted mode with the alpaca execution broker
/// against a stand-in Alpaca (not Alpaca's paper endpoint, so LIVE-capable); the same persisted
/// LIVE with the paper broker is refused at start, in one line.
#[tokio::test]
async fn live_mode_requires_confirmation_and_guards_raised_limits() {
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    let alpaca = crate::alpaca::StandIn::start(rust_decimal::Decimal::from(100_000), market).await;
    let app = spawn_app_with(|c| alpaca.configure(c)).await;
    let operator = app.token("ops", "operator").await;
    force_live_mode(&app).await;
    let mut app = app.restart().await;
    assert_eq!(app.get("/api/health").await.body["meta"]["mode"], "LIVE");

    let tighten = json!({"risk_controls": {"max_daily_loss": 400}});
    app.put_settings(&operator, tighten.clone()).await.assert_error(428, "CONFIRMATION_REQUIRED");
    app.put_settings_confirmed(&operator, &tighten).await.assert_ok(200);

    let raise = json!({"risk_controls": {"max_daily_loss": 900}});
    let reply = app.put_settings_confirmed(&operator, &raise).await;
    reply.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(reply.body["error"]["detail"]["fields"], json!(["risk_controls.max_daily_loss"]));
    app.put_settings_confirmed(ADMIN_TOKEN, &raise).await.assert_ok(200);

    let audit = app.get("/api/audit?action=settings.update").await;
    let outcomes: Vec<_> =
        audit.data().as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes, vec!["OK", "SETTINGS_UPDATE_BLOCKED", "OK", "CONFIRMATION_REQUIRED"]);
    assert!(audit.data().as_array().unwrap().iter().all(|r| r["mode"] == "LIVE"));

    // The same persisted LIVE with the paper broker: the service refuses to start, in one line.
    app.stop().await;
    let paper = test_config(app.config.database_url.clone());
    let clock: std::sync::Arc<dyn tradeops_core::Clock> = std::sync::Arc::new(tradeops_server::clock::SystemClock);
    let overrides =
        tradeops_server::app::Overrides { market_clock: None, extra_routes: axum::Router::new(), ..Default::default() };
    let refused = match tradeops_server::Application::build_with(paper, clock, overrides).await {
        Ok(_) => panic!("a persisted LIVE with the paper broker must not start"),
        Err(e) => format!("{e:#}"),
    };
    assert!(refused.contains("LIVE needs the alpaca execution broker"), "{refused}");
    assert_eq!(refused.lines().count(), 1, "one line: {refused}");
}

/// Writes a settings version with `trading_mode: LIVE` straight into the database.
async fn force_live_mode(app: &TestApp) {
    let latest = app.get("/api/settings").await.data().clone();
    let mut live = latest.clone();
    live["runtime"]["trading_mode"] = json!("LIVE");
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    use tradeops_store::SettingsRepository;
    let version = db.latest_settings().await.unwrap().unwrap().version + 1;
    db.append_settings(&tradeops_store::SettingsVersion {
        version,
        settings: live.to_string(),
        updated: "[\"runtime.trading_mode\"]".into(),
        actor: "test".into(),
        created_at: 0,
    })
    .await
    .unwrap();
    db.close().await;
}

#[tokio::test]
async fn history_lists_versions_newest_first_with_pages() {
    let app = spawn_app().await;
    for loss in [510, 520, 530] {
        app.put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_daily_loss": loss}})).await.assert_ok(200);
    }
    let page = app.get("/api/settings/history?limit=2").await;
    let rows = page.assert_ok(200).as_array().unwrap().clone();
    assert_eq!(rows.iter().map(|r| r["version"].as_i64().unwrap()).collect::<Vec<_>>(), vec![4, 3]);
    assert_eq!(rows[0]["actor"], "admin");
    assert_eq!(rows[0]["updated"], json!(["risk_controls.max_daily_loss"]));
    assert_eq!(rows[0]["settings"]["risk_controls"]["max_daily_loss"], 530.0);
    assert_eq!(page.body["meta"]["count"], 2);
    let cursor = page.body["meta"]["next_cursor"].as_str().unwrap().to_string();
    let last = app.get(&format!("/api/settings/history?limit=2&cursor={cursor}")).await;
    let versions: Vec<_> = last.data().as_array().unwrap().iter().map(|r| r["version"].as_i64().unwrap()).collect();
    assert_eq!(versions, vec![2, 1]);
    assert!(last.body["meta"]["next_cursor"].is_null());
    app.get("/api/settings/history?limit=0").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/settings/history?cursor=abc").await.assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn configured_mode_is_applied_at_start_as_an_audited_version() {
    let app = spawn_app_with(|c| c.mode = Some(tradeops_core::TradingMode::Demo)).await;
    assert_eq!(app.get("/api/health").await.data()["mode"], "DEMO");
    let history = app.get("/api/settings/history").await;
    assert_eq!(history.data()[0]["actor"], "config");
    assert_eq!(history.data()[0]["updated"], json!(["runtime.trading_mode"]));
}
