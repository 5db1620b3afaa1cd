//! `tradeops serve`: the service composed and run until stopped — on SQLite the one service of
//! its database file; on PostgreSQL a node of a cluster, which listens at once through its
//! front (forwarding to the engine's leader while another node leads) and builds its own
//! service once it holds the engine's term. What it prints on start (the address, the console's
//! and the API docs' URLs, a new admin token once) is what an operator reads first.

use crate::app::{shutdown_signal, Application};
use crate::clock::SystemClock;
use crate::config::{redact, Config};
use crate::domain::tokens::TokenRegistry;
use crate::http::front::Front;
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;
use tradeops_core::{Clock, Settings, TradingMode};
use tradeops_store::{Database, SettingsRepository};

/// Serves until SIGINT or SIGTERM: on SQLite the one service of its database file, on
/// PostgreSQL a node of a cluster.
pub async fn run(config: Config) -> anyhow::Result<()> {
    if tradeops_store::Backend::from_url(&config.database_url).map_err(|e| anyhow::anyhow!("{e}"))?
        == tradeops_store::Backend::Postgres
    {
        return serve_cluster_node(config).await;
    }
    let shutdown = shutdown_signal().context("installing signal handlers")?;
    let app = Application::build(config, Arc::new(SystemClock)).await.context("starting tradeops")?;
    let addr = app.local_addr();
    let base = format!("http://{addr}");
    let state = app.state();
    // Start-up lines tolerate a closed stdout: losing them must not stop the service.
    let say = |line: String| {
        let _ = writeln!(std::io::stdout(), "{line}");
    };
    say(format!(
        "tradeops {} listening on {base}  (mode {}, database {}, cache {})",
        env!("CARGO_PKG_VERSION"),
        state.settings.mode(),
        state.db.backend().name(),
        state.cache.backend()
    ));
    say(format!("  console: {base}/   API docs: {base}/api/docs   metrics: {base}/metrics"));
    if let Some(token) = app.bootstrap_token() {
        say(format!("  admin token (shown once, keep it): {token}"));
        say(format!("  sign in directly: {base}/#token={token}"));
    }
    if !state.config.auth.enabled {
        say("  authentication is disabled (loopback only); every caller acts as `local`".into());
    }
    app.run_until_stopped(shutdown).await
}

/// `serve` on PostgreSQL: a node of a cluster (docs/operating.md, Cluster). It listens at once
/// through its front ([`crate::http::front`]): while another node leads, every request is
/// forwarded there and this node waits to take the engine's term over (a hot standby); once it
/// holds the term its service answers in process, its address advertised for the others. When
/// its term is taken over (it was paused past the lease) it stops, exit status 1, to be
/// restarted as a follower.
async fn serve_cluster_node(config: Config) -> anyhow::Result<()> {
    let shutdown = shutdown_signal().context("installing signal handlers")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = move || {
        let mut stop = stop_rx.clone();
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let listener =
        tokio::net::TcpListener::bind(config.bind).await.with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr()?;
    let advertise = config.advertise_url.clone().unwrap_or_else(|| advertise_url(addr));
    let node = format!("{}:{addr}", crate::app::host_and_process());
    let db = Database::open(&config.database_url)
        .await
        .with_context(|| format!("opening the database {}", redact(&config.database_url)))?;
    // Until a leader stores its settings, this node's own answers carry the mode it is
    // configured to trade in (CONTRACT §3: every response carries the current trading mode).
    let modes = (latest_mode(&db).await, config.mode);
    let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let secret = db
        .cluster_secret(&crate::domain::tokens::generate_token())
        .await
        .context("reading the cluster's shared secret")?;
    let front = Front::new(
        node.clone(),
        advertise.clone(),
        db.clone(),
        clock.clone(),
        modes,
        tokens,
        config.auth.enabled,
        secret,
    );
    {
        let (front, db, node, clock) = (front.clone(), db.clone(), node.clone(), clock.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                if let Some(mode) = latest_mode(&db).await {
                    front.set_mode(mode);
                }
                // The peers a leader cut from the database hands a halt to: kept from the last
                // read, since that is exactly when the database cannot be read.
                if let Ok(members) = db.cluster_members().await {
                    let fresh_since =
                        clock.now().timestamp_millis() - crate::cluster::MEMBER_STALE_AFTER.as_millis() as i64;
                    let peers = members
                        .into_iter()
                        .filter(|m| m.kind == "serve" && m.node_id != node && m.heartbeat_at >= fresh_since)
                        .filter_map(|m| Some((m.node_id, m.advertise_url?)))
                        .collect();
                    front.set_peers(peers);
                }
            }
        });
    }
    // A member of the cluster from now on, following or leading.
    let heartbeat = tokio::spawn(crate::cluster::heartbeat(
        db.clone(),
        node.clone(),
        "serve",
        Some(advertise.clone()),
        clock.clone(),
    ));
    let server = {
        let service = front.router().into_make_service_with_connect_info::<std::net::SocketAddr>();
        let stopped = stopped();
        tokio::spawn(async move { axum::serve(listener, service).with_graceful_shutdown(stopped).await })
    };
    let say = |line: String| {
        let _ = writeln!(std::io::stdout(), "{line}");
    };
    say(format!(
        "tradeops {} listening on http://{addr}  (cluster node {node}, database postgresql; forwarding to the engine's leader until it leads)",
        env!("CARGO_PKG_VERSION")
    ));
    // The service itself listens inside, on loopback (its own health probe calls it there).
    let inside = Config { bind: std::net::SocketAddr::from(([127, 0, 0, 1], 0)), ..config };
    // While it waits for the term, its front answers the reads of the database itself.
    let standby: Box<dyn FnOnce(axum::Router) + Send> = {
        let front = front.clone();
        Box::new(move |reads| front.serve_reads(reads))
    };
    let overrides = crate::app::Overrides { node_id: Some(node.clone()), standby: Some(standby), ..Default::default() };
    let app = tokio::select! {
        app = Application::build_with(inside, clock, overrides) => app.context("starting tradeops")?,
        _ = stopped() => {
            server.abort();
            heartbeat.abort();
            crate::cluster::leave(&db, &node).await;
            return Ok(());
        }
    };
    let (_, epoch) = app.term();
    // Answer here first, then advertise: a request that reaches this node after it says it leads
    // (or after a follower read the new address) is served, never refused as leaderless.
    front.lead(app.router());
    if !db.advertise_engine(epoch, &node, &advertise).await.unwrap_or(false) {
        tracing::warn!(epoch, "this node's address could not be advertised: followers answer 503 until it is");
    }
    say(format!(
        "  leads the engine (epoch {epoch}), advertised as {advertise}; mode {}, cache {}",
        app.state().settings.mode(),
        app.state().cache.backend()
    ));
    if let Some(token) = app.bootstrap_token() {
        say(format!("  admin token (shown once, keep it): {token}"));
    }
    let taken_over = {
        let stop = stopped();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let result = app
            .run_behind(front.clone(), async move {
                stop.await;
                let _ = done_tx.send(());
            })
            .await;
        result?;
        done_rx.await.is_err()
    };
    server.abort();
    heartbeat.abort();
    crate::cluster::leave(&db, &node).await;
    db.close().await;
    if taken_over {
        anyhow::bail!("this node's engine term was taken over by another node: restart it to follow");
    }
    Ok(())
}

/// The trading mode of the newest stored settings (what a follower's own answers carry).
async fn latest_mode(db: &Database) -> Option<TradingMode> {
    let stored = db.latest_settings().await.ok()??;
    let doc: serde_json::Value = serde_json::from_str(&stored.settings).ok()?;
    Some(Settings::from_json(&doc).ok()?.runtime.trading_mode)
}

/// `http://ADDR`, or `http://HOST:PORT` when bound to every interface.
fn advertise_url(addr: std::net::SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://{}:{}", crate::app::host_name(), addr.port())
    } else {
        format!("http://{addr}")
    }
}
