//! Tokens, roles and the rate limit.

use crate::helpers::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn missing_or_invalid_token_is_unauthorized() {
    let app = spawn_app().await;
    app.call(Method::GET, "/api/settings", None, None).await.assert_error(401, "UNAUTHORIZED");
    app.call(Method::GET, "/api/settings", Some("tro_nope"), None).await.assert_error(401, "UNAUTHORIZED");
    let reply =
        app.raw(app.client.get(app.url("/api/settings")).header("authorization", "Basic YWRtaW46YWRtaW4=")).await;
    reply.assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn role_boundaries() {
    let app = spawn_app().await;
    let viewer = app.token("console-viewer", "viewer").await;
    let operator = app.token("desk-operator", "operator").await;

    // viewer: reads only
    app.get_as("/api/settings", &viewer).await.assert_ok(200);
    app.get_as("/api/health/components", &viewer).await.assert_ok(200);
    app.put_settings(&viewer, json!({"analytics": {"min_sample_size": 30}})).await.assert_error(403, "FORBIDDEN");
    app.get_as("/api/audit", &viewer).await.assert_error(403, "FORBIDDEN");
    app.get_as("/api/auth/tokens", &viewer).await.assert_error(403, "FORBIDDEN");

    // operator: sensitive actions and the audit log, not tokens
    app.put_settings(&operator, json!({"analytics": {"min_sample_size": 30}})).await.assert_ok(200);
    app.get_as("/api/audit", &operator).await.assert_ok(200);
    app.get_as("/api/auth/tokens", &operator).await.assert_error(403, "FORBIDDEN");
    let reply =
        app.call(Method::POST, "/api/auth/tokens", Some(&operator), Some(json!({"name": "x", "role": "admin"}))).await;
    reply.assert_error(403, "FORBIDDEN");
    assert_eq!(reply.body["error"]["detail"]["required_role"], "admin");
    app.call(Method::DELETE, "/api/auth/tokens/console-viewer", Some(&operator), None)
        .await
        .assert_error(403, "FORBIDDEN");

    let me = app.get_as("/api/auth/me", &operator).await;
    assert_eq!(me.assert_ok(200)["name"], "desk-operator");
    assert_eq!(me.data()["role"], "operator");
}

#[tokio::test]
async fn token_list_never_shows_secrets() {
    let app = spawn_app().await;
    let secret = app.token("ops", "operator").await;
    let reply = app.get("/api/auth/tokens").await;
    let rows = reply.assert_ok(200).as_array().unwrap().clone();
    let names: Vec<_> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["admin", "ops"]);
    assert!(!reply.body.to_string().contains(&secret));
    assert!(!reply.body.to_string().contains(ADMIN_TOKEN));
    // a used token shows when it was last used
    app.get_as("/api/auth/me", &secret).await.assert_ok(200);
    let rows = app.get("/api/auth/tokens").await;
    assert!(rows.data()[1]["last_used_at"].is_string(), "{}", rows.body);
}

#[tokio::test]
async fn token_names_are_validated_and_unique() {
    let app = spawn_app().await;
    app.token("ops", "operator").await;
    let post = |body| app.call(Method::POST, "/api/auth/tokens", Some(ADMIN_TOKEN), Some(body));
    let dup = post(json!({"name": "ops", "role": "viewer"})).await;
    dup.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(dup.body["error"]["detail"]["field"], "name");
    post(json!({"name": "bad name!", "role": "viewer"})).await.assert_error(400, "VALIDATION_ERROR");
    post(json!({"name": "", "role": "viewer"})).await.assert_error(400, "VALIDATION_ERROR");
    let role = post(json!({"name": "x", "role": "superuser"})).await;
    role.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(role.body["error"]["detail"]["field"], "role");
}

#[tokio::test]
async fn revoked_token_is_refused_at_once_and_name_reusable() {
    let app = spawn_app().await;
    let secret = app.token("temp", "operator").await;
    app.get_as("/api/settings", &secret).await.assert_ok(200);
    let reply = app.call(Method::DELETE, "/api/auth/tokens/temp", Some(ADMIN_TOKEN), None).await;
    assert_eq!(reply.assert_ok(200)["revoked"], true);
    app.get_as("/api/settings", &secret).await.assert_error(401, "UNAUTHORIZED");
    app.call(Method::DELETE, "/api/auth/tokens/temp", Some(ADMIN_TOKEN), None).await.assert_error(404, "NOT_FOUND");
    // revocation survives a restart
    let app = app.restart().await;
    app.get_as("/api/settings", &secret).await.assert_error(401, "UNAUTHORIZED");
    let again = app.token("temp", "viewer").await;
    app.get_as("/api/settings", &again).await.assert_ok(200);
}

#[tokio::test]
async fn rate_limit_refuses_with_retry_after() {
    let app = spawn_app_with(|c| {
        c.auth.rate_limit_per_second = 1;
        c.auth.rate_limit_burst = 3;
    })
    .await;
    for _ in 0..3 {
        app.get("/api/settings").await.assert_ok(200);
    }
    let reply = app.get("/api/settings").await;
    reply.assert_error(429, "RATE_LIMITED");
    assert_eq!(reply.headers.get("retry-after").unwrap(), "1");
    // health stays public and unlimited
    app.call(Method::GET, "/api/health", None, None).await.assert_ok(200);
}

#[tokio::test]
async fn auth_disabled_acts_as_local_admin() {
    let app = spawn_app_with(|c| c.auth.enabled = false).await;
    let me = app.call(Method::GET, "/api/auth/me", None, None).await;
    assert_eq!(me.assert_ok(200)["name"], "local");
    assert_eq!(me.data()["auth_enabled"], false);
    app.call(Method::PUT, "/api/settings", None, Some(json!({"analytics": {"min_sample_size": 25}})))
        .await
        .assert_ok(200);
    let audit = app.call(Method::GET, "/api/audit", None, None).await;
    assert_eq!(audit.data()[0]["actor"], "local");
}

#[tokio::test]
async fn configured_admin_token_is_reactivated_at_start_after_revocation() {
    let app = spawn_app().await;
    // Another admin first: the last active admin token cannot be revoked.
    let backup = app.token("backup-admin", "admin").await;
    app.call(Method::DELETE, "/api/auth/tokens/admin", Some(&backup), None).await.assert_ok(200);
    app.get("/api/settings").await.assert_error(401, "UNAUTHORIZED");
    let app = app.restart().await;
    app.get("/api/settings").await.assert_ok(200);
    let names: Vec<_> =
        app.get("/api/auth/tokens").await.data().as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, vec![json!("admin"), json!("backup-admin")]);
}

/// The names of the active admin tokens, read as `token`.
async fn active_admins(app: &TestApp, token: &str) -> Vec<String> {
    let reply = app.get_as("/api/auth/tokens", token).await;
    let rows = reply.assert_ok(200).as_array().unwrap().clone();
    rows.iter().filter(|t| t["role"] == "admin").map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn revoking_the_last_admin_token_is_refused_and_audited() {
    let app = spawn_app().await;
    let viewer = app.token("wall-screen", "viewer").await;
    let refused = app.call(Method::DELETE, "/api/auth/tokens/admin", Some(ADMIN_TOKEN), None).await;
    refused.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    let detail = &refused.body["error"]["detail"];
    assert_eq!(detail["guard"], "last_admin_token");
    assert!(detail["reason"].as_str().unwrap().contains("last active admin token"), "{detail}");
    // Nothing changed: the admin still works, and the other tokens too.
    assert_eq!(active_admins(&app, ADMIN_TOKEN).await, vec!["admin"]);
    app.get_as("/api/auth/me", &viewer).await.assert_ok(200);
    let audit = app.get("/api/audit?action=token.revoke").await;
    let row = &audit.data()[0];
    assert_eq!((row["target"].as_str(), row["outcome"].as_str()), (Some("admin"), Some("SETTINGS_UPDATE_BLOCKED")));
    assert_eq!(row["actor"], "admin");

    // With a second admin, either can go, but not both.
    let second = app.token("second-admin", "admin").await;
    app.call(Method::DELETE, "/api/auth/tokens/admin", Some(&second), None).await.assert_ok(200);
    app.call(Method::DELETE, "/api/auth/tokens/second-admin", Some(&second), None)
        .await
        .assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(active_admins(&app, &second).await, vec!["second-admin"]);
    // Other roles are not guarded.
    app.call(Method::DELETE, "/api/auth/tokens/wall-screen", Some(&second), None).await.assert_ok(200);
}

/// Two revokes racing for the last two admin tokens: one wins, the other is refused (or, when
/// its caller's own token went first, unauthorized); one admin always stays.
#[tokio::test]
async fn concurrent_revokes_of_the_last_two_admins_leave_one() {
    let app = spawn_app().await;
    let mut keeper = ADMIN_TOKEN.to_string();
    let mut keeper_name = "admin".to_string();
    for round in 0..6 {
        let (a, b) = (format!("a{round}"), format!("b{round}"));
        let create = |name: String| {
            let body = json!({"name": name, "role": "admin"});
            app.call(Method::POST, "/api/auth/tokens", Some(&keeper), Some(body))
        };
        let a_secret = create(a.clone()).await.assert_ok(201)["token"].as_str().unwrap().to_string();
        let b_secret = create(b.clone()).await.assert_ok(201)["token"].as_str().unwrap().to_string();
        app.call(Method::DELETE, &format!("/api/auth/tokens/{keeper_name}"), Some(&a_secret), None)
            .await
            .assert_ok(200);
        let (a_path, b_path) = (format!("/api/auth/tokens/{a}"), format!("/api/auth/tokens/{b}"));
        let (x, y) = tokio::join!(
            app.call(Method::DELETE, &a_path, Some(&b_secret), None),
            app.call(Method::DELETE, &b_path, Some(&a_secret), None),
        );
        let statuses = [x.status.as_u16(), y.status.as_u16()];
        assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "round {round}: {statuses:?}");
        assert!(statuses.iter().all(|s| [200, 401, 409].contains(s)), "round {round}: {statuses:?}");
        (keeper, keeper_name) = if x.status == 200 { (b_secret, b) } else { (a_secret, a) };
        assert_eq!(active_admins(&app, &keeper).await, vec![keeper_name.clone()], "round {round}");
    }
}

#[tokio::test]
async fn rate_limited_callers_are_audited_by_name() {
    let clock = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts("2026-11-25T15:00:00Z").unwrap());
    let app = spawn_app_with_clock(clock.clone(), |c| {
        c.auth.rate_limit_per_second = 1;
        c.auth.rate_limit_burst = 2;
    })
    .await;
    for _ in 0..3 {
        app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": 21}})).await;
    }
    app.get("/api/audit").await.assert_error(429, "RATE_LIMITED");
    // The budget refills on the service clock: one request a second.
    clock.advance(chrono::Duration::milliseconds(999));
    app.get("/api/audit").await.assert_error(429, "RATE_LIMITED");
    clock.advance(chrono::Duration::milliseconds(1));
    let audit = app.get("/api/audit").await;
    let newest = &audit.data()[0];
    assert_eq!(newest["outcome"], "RATE_LIMITED");
    assert_eq!(newest["actor"], "admin");
    assert_eq!(newest["role"], "admin");
}

#[tokio::test]
async fn anonymous_callers_are_rate_limited_by_address_and_refused_bodies_cut() {
    let app = spawn_app_with(|c| {
        c.auth.anonymous_rate_limit_per_second = 1;
        c.auth.anonymous_rate_limit_burst = 3;
    })
    .await;
    let big = json!({"analytics": {"note": "x".repeat(20_000)}});
    let codes: Vec<String> =
        futures::future::join_all((0..5).map(|_| app.call(Method::PUT, "/api/settings", None, Some(big.clone()))))
            .await
            .iter()
            .map(|r| r.code().to_string())
            .collect();
    assert_eq!(codes.iter().filter(|c| *c == "UNAUTHORIZED").count(), 3, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| *c == "RATE_LIMITED").count(), 2, "{codes:?}");
    // A known caller's refusal keeps its own row, with the body cut.
    let viewer = app.token("watcher", "viewer").await;
    app.put_settings(&viewer, big).await.assert_error(403, "FORBIDDEN");
    let audit = app.get("/api/audit?actor=watcher").await;
    let row = &audit.data()[0];
    assert_eq!(row["request"]["truncated"], true);
    assert!(row["request"]["prefix"].as_str().unwrap().len() <= 4096);
    assert!(row["request"]["bytes"].as_u64().unwrap() > 20_000);
}

/// A token row as the store keeps it, written straight to the store (as the CLI does).
fn stored_token(name: &str, role: &str, at: i64) -> tradeops_store::TokenRecord {
    tradeops_store::TokenRecord {
        name: name.into(),
        role: role.into(),
        token_hash: format!("hash-{name}"),
        created_at: at,
        created_by: "test".into(),
        last_used_at: None,
        revoked_at: None,
    }
}

/// The same race between processes (the CLI and a service, two nodes), which no lock in one
/// service can order: two connections revoke the last two admin tokens at once, on the test's
/// backend. The store serialises token writes on its version row, so one is refused.
#[tokio::test]
async fn racing_revokes_from_separate_connections_keep_one_admin() {
    use tradeops_store::{Database, Revocation, TokenRepository};
    let (db, url) = TestDb::new().await;
    let (first, second) = (Database::open(&url).await.unwrap(), Database::connect(&url).await.unwrap());
    for round in 0..20 {
        let (a, b) = (format!("a{round}"), format!("b{round}"));
        first.insert_token(&stored_token(&a, "admin", round)).await.unwrap();
        first.insert_token(&stored_token(&b, "admin", round)).await.unwrap();
        for old in first.active_tokens().await.unwrap().into_iter().filter(|t| t.name != a && t.name != b) {
            assert_eq!(first.revoke_token(&old.name, round).await.unwrap(), Revocation::Revoked);
        }
        let (x, y) = tokio::join!(first.revoke_token(&a, round), second.revoke_token(&b, round));
        let outcomes = [x.unwrap(), y.unwrap()];
        assert_eq!(outcomes.iter().filter(|o| **o == Revocation::Revoked).count(), 1, "round {round}: {outcomes:?}");
        assert_eq!(first.active_tokens().await.unwrap().len(), 1, "round {round}");
    }
    first.close().await;
    second.close().await;
    drop(db);
}

/// On PostgreSQL a token write is announced to listeners when it commits, so services reload at
/// once rather than at their next poll.
#[tokio::test]
async fn postgres_announces_committed_token_writes() {
    use tradeops_store::{Database, TokenRepository};
    let (db, url) = TestDb::new().await;
    let store = Database::open(&url).await.unwrap();
    let Some(mut listener) = store.token_change_listener() else {
        let why = "token change notifications are PostgreSQL's: TRADEOPS_TEST_DATABASE_URL is not set";
        skip("postgres_announces_committed_token_writes", why, REQUIRE_SERVICES);
        return;
    };
    assert!(!listener.next().await.unwrap(), "the first call connects: changes before it are unknown");
    store.insert_token(&stored_token("only-admin", "admin", 1)).await.unwrap();
    // A hang guard, not a timing assertion: the announcement arrives within milliseconds.
    let bound = std::time::Duration::from_secs(10);
    let next = tokio::time::timeout(bound, listener.next()).await.expect("the create was announced");
    assert!(next.unwrap());
    store.insert_token(&stored_token("viewer", "viewer", 2)).await.unwrap();
    let next = tokio::time::timeout(bound, listener.next()).await.expect("the second create was announced");
    assert!(next.unwrap());
    store.close().await;
    drop(db);
}
