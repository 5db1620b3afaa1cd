//! The operator console as the service serves it: built into the binary, compressed, cached by
//! entity tag, under a policy that loads nothing from elsewhere; and the market bars it charts.

use crate::helpers::*;
use reqwest::header;
use std::io::Read;
use tradeops_core::Clock;
use tradeops_server::http::console::{transfer_sizes, ASSETS};

#[tokio::test]
async fn the_console_is_served_at_the_root_from_the_binary() {
    let app = spawn_app().await;
    let page = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    let html = page.text().await.unwrap();
    for asset in ["/assets/app.js", "/assets/app.css", "/assets/theme.js"] {
        assert!(html.contains(asset), "index.html loads {asset}");
        let reply = app.client.get(app.url(asset)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{asset}");
    }
    // Nothing is fetched from another origin: no absolute URLs to load anything from.
    for asset in ASSETS {
        let text = String::from_utf8_lossy(asset.bytes);
        for needle in ["src=\"http", "href=\"http", "import(\"http", "url(http", "from\"http"] {
            assert!(!text.contains(needle), "{} references an external resource ({needle})", asset.name);
        }
    }
    // Only the console's own files are served; index.html only at the root.
    assert!(app.client.get(app.url("/assets/nope.js")).send().await.unwrap().status() == 404);
    let reply = app.get("/assets/index.html").await;
    reply.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn assets_are_gzip_compressed_and_revalidated_by_entity_tag() {
    let app = spawn_app().await;
    let js =
        app.client.get(app.url("/assets/app.js")).header(header::ACCEPT_ENCODING, "gzip, br").send().await.unwrap();
    assert_eq!(js.headers()[header::CONTENT_ENCODING], "gzip");
    assert_eq!(js.headers()[header::CACHE_CONTROL], "no-cache");
    let etag = js.headers()[header::ETAG].to_str().unwrap().to_string();
    let body = js.bytes().await.unwrap();
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut plain).unwrap();
    let embedded = ASSETS.iter().find(|a| a.name == "app.js").unwrap().bytes;
    assert_eq!(plain, embedded, "the gzip body is the built bundle");

    let plain_reply = app.client.get(app.url("/assets/app.js")).send().await.unwrap();
    assert!(plain_reply.headers().get(header::CONTENT_ENCODING).is_none(), "no gzip unless asked for");
    assert_eq!(plain_reply.bytes().await.unwrap().len(), embedded.len());

    let again = app.client.get(app.url("/assets/app.js")).header(header::IF_NONE_MATCH, &etag).send().await.unwrap();
    assert_eq!(again.status(), 304);
    assert!(again.bytes().await.unwrap().is_empty());
}

/// The console's budget: the first load transfers under 500 KB compressed (every asset, gzip).
#[test]
fn the_first_load_transfers_under_500_kb_compressed() {
    let sizes = transfer_sizes();
    let total: usize = sizes.iter().map(|(_, _, gz)| gz).sum();
    assert!(total < 500 * 1024, "console assets are {total} bytes compressed: {sizes:?}");
}

#[tokio::test]
async fn market_bars_end_at_the_markets_present() {
    let app = spawn_app().await;
    let symbol = app.market_symbols(1).await.remove(0).0;
    let now = app.market.now();
    let reply = app.get(&format!("/api/market/bars?symbol={symbol}")).await;
    let bars = reply.assert_ok(200).as_array().unwrap().clone();
    assert!(bars.len() > 100, "a day's minutes up to 10:01 New York: {}", bars.len());
    let last = tradeops_core::time::parse_ts(bars.last().unwrap()["timestamp"].as_str().unwrap()).unwrap();
    assert!(last + chrono::Duration::minutes(1) <= now, "only closed bars: last starts {last}, now {now}");
    assert!(bars.windows(2).all(|w| w[0]["timestamp"].as_str() < w[1]["timestamp"].as_str()));
    for b in &bars {
        let (o, h, l, c) = (
            b["open"].as_f64().unwrap(),
            b["high"].as_f64().unwrap(),
            b["low"].as_f64().unwrap(),
            b["close"].as_f64().unwrap(),
        );
        assert!(l <= o.min(c) && h >= o.max(c), "{b}");
    }
    // A range reaching into the future stops at the present.
    let future =
        app.get(&format!("/api/market/bars?symbol={symbol}&start=2026-11-20T15:00:00Z&end=2026-11-21T00:00:00Z")).await;
    assert_eq!(future.assert_ok(200).as_array().unwrap().len(), 1, "15:00 is the only closed minute since");

    app.get("/api/market/bars?symbol=NOPE").await.assert_error(404, "NOT_FOUND");
    let bad = app.get(&format!("/api/market/bars?symbol={symbol}&start=yesterday")).await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.body["error"]["detail"]["field"], "start");
    let long = app.get(&format!("/api/market/bars?symbol={symbol}&start=2026-01-01T00:00:00Z")).await;
    long.assert_error(400, "VALIDATION_ERROR");
    let anonymous = app.client.get(app.url(&format!("/api/market/bars?symbol={symbol}"))).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
}
