use super::*;
use serde_json::json;

#[test]
fn defaults_follow_the_contract() {
    let s = Settings::default();
    assert!(s.validate().is_ok());
    assert_eq!(s.runtime.trading_mode, TradingMode::Paper);
    assert_eq!(s.runtime.market_calendar, MarketCalendarKind::AlwaysOpen);
    let k = &s.risk_controls;
    assert_eq!(k.max_daily_loss, Decimal::new(500, 0));
    assert_eq!((k.max_position_size, k.max_trades_per_day), (2000, 20));
    assert_eq!((k.active_watchlist_limit, k.open_position_limit), (10, 3));
}

#[test]
fn patch_changes_only_named_fields_and_reports_them() {
    let s = Settings::default();
    let out = s.apply_patch(&json!({"risk_controls": {"max_daily_loss": 750.25, "max_position_size": 2000}})).unwrap();
    assert_eq!(out.updated, vec!["risk_controls.max_daily_loss"]);
    assert_eq!(out.settings.risk_controls.max_daily_loss, Decimal::new(75025, 2));
    assert_eq!(out.settings.momentum_radar, s.momentum_radar);
}

#[test]
fn patch_refuses_unknown_groups_and_fields_with_paths() {
    let errs =
        Settings::default().apply_patch(&json!({"nope": {}, "risk_controls": {"max_dialy_loss": 1}})).unwrap_err();
    let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, vec!["nope", "risk_controls.max_dialy_loss"]);
}

#[test]
fn patch_refuses_wrong_types_with_the_path() {
    for (patch, path) in [
        (json!({"risk_controls": {"max_position_size": "lots"}}), "risk_controls.max_position_size"),
        (json!({"risk_controls": {"max_position_size": -5}}), "risk_controls.max_position_size"),
        (json!({"runtime": {"trading_mode": "YOLO"}}), "runtime.trading_mode"),
        (json!({"momentum_radar": {"universe": ["OK", "NOT OK"]}}), "momentum_radar.universe[1]"),
        (json!({"analytics": 5}), "analytics"),
    ] {
        let errs = Settings::default().apply_patch(&patch).unwrap_err();
        assert_eq!(errs[0].field, path, "{patch}");
    }
}

#[test]
fn validation_lists_every_problem() {
    let errs = Settings::default()
        .apply_patch(&json!({
            "risk_controls": {"max_daily_loss": 0, "open_position_limit": 0, "max_order_value": 10.005},
            "momentum_radar": {"min_price": 30.0}
        }))
        .unwrap_err();
    let fields: BTreeSet<_> = errs.iter().map(|e| e.field.as_str()).collect();
    for f in [
        "risk_controls.max_daily_loss",
        "risk_controls.open_position_limit",
        "risk_controls.max_order_value",
        "momentum_radar.max_price",
    ] {
        assert!(fields.contains(f), "{f} missing from {errs:?}");
    }
}

#[test]
fn persisted_settings_missing_new_fields_take_defaults() {
    let old = json!({"risk_controls": {"max_daily_loss": 100}});
    let s = Settings::from_json(&old).unwrap();
    assert_eq!(s.risk_controls.max_daily_loss, Decimal::new(100, 0));
    assert_eq!(s.analytics, AnalyticsSettings::default());
}

#[test]
fn guards_for_live_switch_and_raised_limits() {
    let paper = Settings::default();
    let mut live = paper.clone();
    live.runtime.trading_mode = TradingMode::Live;
    assert_eq!(paper.guards_for(&live), vec![SettingsGuard::SwitchToLive]);

    let mut looser = live.clone();
    looser.risk_controls.max_daily_loss += Decimal::ONE;
    looser.risk_controls.duplicate_order_window_seconds -= 1;
    looser.risk_controls.max_trades_per_day -= 1; // tighter: no guard
    assert_eq!(
        live.guards_for(&looser),
        vec![SettingsGuard::RiskLimitRaisedWhileLive(vec![
            "risk_controls.max_daily_loss",
            "risk_controls.duplicate_order_window_seconds"
        ])]
    );

    let mut paper_looser = paper.clone();
    paper_looser.risk_controls.max_daily_loss += Decimal::ONE;
    assert!(paper.guards_for(&paper_looser).is_empty(), "raising limits in PAPER needs no guard");
}

use std::collections::BTreeSet;

proptest::proptest! {
    /// A patch is accepted exactly when every value is in its documented range: never an
    /// invalid limit in effect, never a valid one refused.
    #[test]
    fn patch_accepted_exactly_when_in_range(cents in -10_000i64..200_000_000_000, size in -10i64..20_000_000, collar in -1.0f64..200.0, sub_cent in proptest::bool::ANY) {
        let loss = if sub_cent { cents as f64 / 1000.0 } else { cents as f64 / 100.0 };
        let patch = json!({"risk_controls": {"max_daily_loss": loss, "max_position_size": size, "price_collar_pct": collar}});
        let loss_ok = cents > 0 && loss <= 1e9 && (!sub_cent || cents % 10 == 0);
        let expected = loss_ok && (1..=10_000_000).contains(&size) && (0.01..=100.0).contains(&collar);
        let result = Settings::default().apply_patch(&patch);
        proptest::prop_assert_eq!(result.is_ok(), expected, "{} → {:?}", patch, result.err());
        if let Ok(out) = result {
            proptest::prop_assert_eq!(out.settings.risk_controls.max_daily_loss, Decimal::from_f64_retain(loss).unwrap().round_dp(3).normalize());
        }
    }
}
