//! Baseline for `bench/http.sh`: a bare axum handler returning a constant JSON body of about
//! the size of `GET /api/health`, on the same runtime settings as the service.
//! `cargo run --release --example bare_axum -- 127.0.0.1:8091`

use axum::routing::get;
use axum::Router;

const BODY: &str = r#"{"ok":true,"data":{"status":"HEALTHY","mode":"PAPER","components":{"api":"HEALTHY","cache":"HEALTHY","data_broker":"DISABLED","database":"HEALTHY","execution_broker":"DISABLED","risk_manager":"HEALTHY"}},"meta":{"mode":"PAPER","timestamp":"2026-11-21T09:46:05.316Z","request_id":"99e30687-0729-433a-b1d8-a46be384c85e"}}"#;

#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8091".into());
    let app = Router::new().route("/", get(|| async { ([("content-type", "application/json")], BODY) }));
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("bare axum listening on http://{addr}");
    axum::serve(listener, app).await.expect("serve");
}
