//! The `tradeops` command line: `serve`, `migrate`, `token create`.

use crate::app::{shutdown_signal, Application};
use crate::auth::{generate_token, TokenRegistry};
use crate::clock::SystemClock;
use crate::config::{redact, Config};
use crate::routes::auth::validate_token_name;
use crate::telemetry;
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tradeops_core::{Clock, Role};
use tradeops_store::Database;

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
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let config = Config::load(cli.config.as_deref(), &env)?;
    telemetry::init(&config.log);
    match cli.command {
        Command::Serve => serve(config).await,
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
            let stored = crate::routes::data::import_bars(&db, &symbol, timeframe, &body)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {}", file.display(), e.message))?;
            println!("{stored} {} bars of {symbol} stored", timeframe.as_str());
            Ok(())
        }
        Command::Token { command: TokenCommand::Create { name, role } } => {
            validate_token_name(&name).map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let role: Role = role.parse().map_err(|e: String| anyhow::anyhow!("--role {e}"))?;
            let db = Database::open(&config.database_url).await?;
            let tokens =
                TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let secret = generate_token();
            tokens
                .create(&name, role, &secret, "cli", SystemClock.now().timestamp_millis())
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            println!("{secret}");
            eprintln!("token {name:?} ({role}) created; the secret above is shown only once");
            Ok(())
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
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
