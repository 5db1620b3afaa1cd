//! The real databases a store test runs on: SQLite always, and PostgreSQL too when
//! `TRADEOPS_TEST_DATABASE_URL` is set (a fresh database each test, dropped after; required
//! where `TRADEOPS_REQUIRE_SERVICES` is set, so CI cannot skip it silently).

use crate::Database;

/// The databases to test on, each with what keeps it alive.
pub(crate) async fn databases() -> Vec<(Database, Option<tempfile::TempDir>, Option<(Database, String)>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
    let mut all = vec![(sqlite, Some(dir), None)];
    if let Some(pg) = postgres().await {
        all.push(pg);
    }
    all
}

/// A fresh PostgreSQL database, when one is configured.
pub(crate) async fn postgres() -> Option<(Database, Option<tempfile::TempDir>, Option<(Database, String)>)> {
    let Some(admin_url) = std::env::var("TRADEOPS_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
        assert!(
            std::env::var("TRADEOPS_REQUIRE_SERVICES").is_err(),
            "TRADEOPS_REQUIRE_SERVICES=1 but TRADEOPS_TEST_DATABASE_URL is not set"
        );
        eprintln!("PostgreSQL part skipped: set TRADEOPS_TEST_DATABASE_URL");
        return None;
    };
    let name = format!("tradeops_fence_{}", uuid::Uuid::new_v4().simple());
    let admin = Database::connect(&admin_url).await.expect("PostgreSQL reachable");
    admin.execute_raw(&format!("CREATE DATABASE {name}")).await.unwrap();
    let (base, query) = admin_url.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((&admin_url, None));
    let url =
        format!("{}/{name}{}", &base[..base.rfind('/').unwrap()], query.map(|q| format!("?{q}")).unwrap_or_default());
    Some((Database::open(&url).await.unwrap(), None, Some((admin, name))))
}

pub(crate) async fn drop_postgres(admin: Option<(Database, String)>) {
    if let Some((admin, name)) = admin {
        let _ = admin.execute_raw(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
        admin.close().await;
    }
}
