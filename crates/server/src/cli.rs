//! The `tradeops` command line: `serve`, `worker`, `migrate`, `token create|revoke|list`, `data import`,
//! `reference import` (float and sector per symbol, through the same
//! [`crate::domain::reference`] service as `PUT /api/market/reference`, audited with actor `cli`;
//! a running service on the same database picks it up within
//! [`crate::domain::reference::RELOAD_EVERY`]).
//!
//! Token commands work on the database through the same [`TokenRegistry`] token actions and
//! repositories as the service (never its routes), are audited like the API's token actions
//! (actor `cli`), and reach a running service on the same database within its token poll
//! ([`crate::domain::tokens::TOKEN_POLL_EVERY`]), without a restart.

use crate::app::{shutdown_signal, Application};
use crate::clock::SystemClock;
use crate::config::{redact, Config};
use crate::domain::tokens::{validate_token_name, TokenRegistry};
use crate::domain::DomainError;
use crate::http::guard::{Action, TOKEN_CREATE, TOKEN_REVOKE};
use crate::telemetry;
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::{Clock, Role, Settings, TradingMode};
use tradeops_store::{AuditEntry, AuditRepository, Database, SettingsRepository, TokenRepository};

#[derive(Parser, Debug)]
#[command(name = "tradeops", version, about = "Momentum day trading service and operator console backend")]
pub struct Cli {
    /// Configuration file over the embedded defaults (also TRADEOPS_CONFIG).
    #[arg(long, global = true, env = "TRADEOPS_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve,
    /// Run downloads and backtests only, beside services on the same PostgreSQL database
    /// (set `jobs.run = false` on the services to leave every job to workers).
    Worker,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Historical data.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Reference data of symbols (float, sector).
    Reference {
        #[command(subcommand)]
        command: ReferenceCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum ReferenceCommand {
    /// Import float and sector per symbol from a CSV file with the header `symbol,float,sector`
    /// (the same format as `PUT /api/market/reference`). Replaces every imported row unless
    /// `--merge`; a bad row names its line and field, and nothing is stored.
    Import {
        /// Keep the imported rows of symbols this file does not name.
        #[arg(long)]
        merge: bool,
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Store bars from a CSV file (the same format as `POST /api/data/import`).
    Import {
        #[arg(long)]
        symbol: String,
        /// 1d or 1m.
        #[arg(long, default_value = "1d")]
        timeframe: String,
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a token and print its secret once.
    Create {
        #[arg(long)]
        name: String,
        /// viewer, operator or admin.
        #[arg(long)]
        role: String,
    },
    /// Revoke the active token named N (refused for the last active admin token).
    Revoke {
        #[arg(long)]
        name: String,
    },
    /// List every token: name, role, created, last used, revoked (never the secret).
    List,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let config = Config::load(cli.config.as_deref(), &env)?;
    telemetry::init(&config.log);
    match cli.command {
        Command::Serve => serve(config).await,
        Command::Worker => {
            let shutdown = shutdown_signal()?;
            let worker = crate::worker::Worker::build(config, Arc::new(SystemClock)).await?;
            worker.run_until_stopped(shutdown).await
        }
        Command::Migrate => {
            Database::open(&config.database_url).await?;
            println!("migrations applied to {}", redact(&config.database_url));
            Ok(())
        }
        Command::Data { command: DataCommand::Import { symbol, timeframe, file } } => {
            let symbol = tradeops_core::Symbol::parse(&symbol).map_err(|e| anyhow::anyhow!("--symbol {e}"))?;
            let timeframe = tradeops_core::market::Timeframe::parse(&timeframe)
                .ok_or_else(|| anyhow::anyhow!("--timeframe must be 1d or 1m"))?;
            let body = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let db = Database::open(&config.database_url).await?;
            let stored = crate::jobs::downloads::import_bars(&db, &symbol, timeframe, &body).await.map_err(|e| {
                anyhow::anyhow!("{}: {}", file.display(), crate::http::error::ApiError::from(e).message)
            })?;
            println!("{stored} {} bars of {symbol} stored", timeframe.as_str());
            Ok(())
        }
        Command::Reference { command: ReferenceCommand::Import { merge, file } } => {
            reference_import(&config, merge, &file).await
        }
        Command::Token { command } => {
            let db = Database::open(&config.database_url).await?;
            match command {
                TokenCommand::Create { name, role } => token_create(&db, &name, &role).await,
                TokenCommand::Revoke { name } => token_revoke(&db, &name).await,
                TokenCommand::List => token_list(&db).await,
            }
        }
    }
}

async fn reference_import(config: &Config, merge: bool, file: &std::path::Path) -> anyhow::Result<()> {
    use crate::domain::reference::{parse_csv, ImportMode, ReferenceService};
    let body = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let db = Database::open(&config.database_url).await?;
    let mode = if merge { ImportMode::Merge } else { ImportMode::Replace };
    let service = ReferenceService::new(Arc::new(db.clone()), Default::default());
    let imported = match parse_csv(&body) {
        Ok(rows) => service.import(rows, mode, SystemClock.now()).await,
        Err(e) => Err(e),
    };
    let request = serde_json::json!({"file": file.display().to_string(), "bytes": body.len(), "mode": mode});
    audit(&db, crate::http::guard::REFERENCE_IMPORT, "reference", request, &imported).await;
    let done = imported.map_err(|e| anyhow::anyhow!("{}: {e} ({})", file.display(), e.code().as_str()))?;
    println!(
        "{} symbols imported ({}); {} symbols have imported reference data",
        done.imported,
        if merge { "merge" } else { "replace" },
        done.total
    );
    Ok(())
}

async fn token_create(db: &Database, name: &str, role: &str) -> anyhow::Result<()> {
    validate_token_name(name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let role: Role = role.parse().map_err(|e: String| anyhow::anyhow!("--role {e}"))?;
    let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let created = tokens.create_named(name, role, "cli", SystemClock.now().timestamp_millis()).await;
    audit(db, TOKEN_CREATE, name, serde_json::json!({"name": name, "role": role}), &created).await;
    let secret = created.map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("{secret}");
    eprintln!("token {name:?} ({role}) created; the secret above is shown only once");
    Ok(())
}

async fn token_revoke(db: &Database, name: &str) -> anyhow::Result<()> {
    validate_token_name(name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
    let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let revoked = tokens.revoke_named(name, SystemClock.now().timestamp_millis()).await;
    audit(db, TOKEN_REVOKE, name, serde_json::json!({}), &revoked).await;
    revoked.map_err(|e| anyhow::anyhow!("{e} ({})", e.code().as_str()))?;
    println!("token {name:?} revoked");
    Ok(())
}

/// Prints every token as a table; times are RFC 3339 UTC, `-` when never.
async fn token_list(db: &Database) -> anyhow::Result<()> {
    let when = |ms: Option<i64>| ms.map(|ms| format_ts(&from_epoch_ms(ms))).unwrap_or_else(|| "-".into());
    let mut rows = vec![["NAME".to_string(), "ROLE".into(), "CREATED".into(), "LAST USED".into(), "REVOKED".into()]];
    for t in db.all_tokens().await? {
        rows.push([t.name, t.role, when(Some(t.created_at)), when(t.last_used_at), when(t.revoked_at)]);
    }
    let widths: Vec<usize> = (0..5).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let mut out = std::io::stdout().lock();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// Writes the audit row of a token command (actor `cli`, no role: whoever runs it has the
/// database itself); a row that cannot be written is reported, not fatal.
async fn audit<T>(
    db: &Database,
    action: Action,
    target: &str,
    request: serde_json::Value,
    outcome: &Result<T, DomainError>,
) {
    let mode = match db.latest_settings().await {
        Ok(Some(v)) => serde_json::from_str(&v.settings)
            .ok()
            .and_then(|doc| Settings::from_json(&doc).ok())
            .map(|s| s.runtime.trading_mode)
            .unwrap_or_default(),
        _ => TradingMode::default(),
    };
    // The CLI runs beside the service, not its market: its rows carry the wall time (the same
    // as market time in PAPER and LIVE).
    let now = SystemClock.now().timestamp_millis();
    let entry = AuditEntry {
        ts: now,
        wall_ts: now,
        actor: "cli".into(),
        role: None,
        action: action.name.to_string(),
        target: target.to_string(),
        request: request.to_string(),
        outcome: match outcome {
            Ok(_) => "OK".to_string(),
            Err(e) => e.code().as_str().to_string(),
        },
        mode: mode.as_str().to_string(),
        request_id: format!("cli-{}", uuid::Uuid::new_v4().simple()),
    };
    if let Err(e) = db.append_audit(&entry).await {
        eprintln!("warning: could not write the audit row: {e}");
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
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

/// `serve` on PostgreSQL: a node of a cluster (docs/OPERATIONS.md, Cluster). It listens at once
/// through its front ([`crate::http::front`]): while another node leads, every request is
/// forwarded there and this node waits to take the engine's term over (a hot standby); once it
/// holds the term its service answers in process, its address advertised for the others. When
/// its term is taken over (it was paused past the lease) it stops, exit status 1, to be
/// restarted as a follower.
async fn serve_cluster_node(config: Config) -> anyhow::Result<()> {
    use crate::http::front::Front;
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
    let mode = latest_mode(&db).await.unwrap_or(TradingMode::Paper);
    let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let secret = db
        .cluster_secret(&crate::domain::tokens::generate_token())
        .await
        .context("reading the cluster's shared secret")?;
    let front = Front::new(node.clone(), db.clone(), clock.clone(), mode, tokens, config.auth.enabled, secret);
    {
        let (front, db) = (front.clone(), db.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                if let Some(mode) = latest_mode(&db).await {
                    front.set_mode(mode);
                }
            }
        });
    }
    // A member of the cluster from now on, following or leading.
    let heartbeat = tokio::spawn(crate::cluster::heartbeat(db.clone(), node.clone(), "serve", clock.clone()));
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
    let overrides = crate::app::Overrides { node_id: Some(node.clone()), ..Default::default() };
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
