//! A TCP proxy for fault injection: [`Link`] listens on 127.0.0.1 and forwards every connection
//! to one upstream address (PostgreSQL, the broker stand-in), in both directions, under a state
//! the test sets at any moment and that applies at once to every connection, open or new:
//! - `Open`: bytes pass;
//! - `BlackHole`: connections stay open (and new ones are accepted) but no byte passes either
//!   way — what a cut network link looks like to both ends; bytes read meanwhile are held and
//!   pass once the link heals, as TCP would retransmit them;
//! - `Delay(d)`: each chunk waits `d` before it passes;
//! - `Reset`: every open connection is closed at once and new ones are closed on arrival.
//!
//! It runs on a runtime thread of its own, so a test's own blocking waits never stall it.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a link lets through (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Open,
    BlackHole,
    Delay(Duration),
    Reset,
}

/// One proxied link to an upstream address.
pub struct Link {
    pub addr: SocketAddr,
    state: watch::Sender<LinkState>,
    /// Ends the proxy's runtime (its listener and every connection) when dropped.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Link {
    /// Starts a link to `upstream`, open.
    pub fn start(upstream: SocketAddr) -> Link {
        let (state, rx) = watch::channel(LinkState::Open);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (tx_addr, rx_addr) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx_addr.send(listener.local_addr().unwrap()).unwrap();
                tokio::select! {
                    _ = accept(listener, upstream, rx) => {}
                    _ = stopped => {}
                }
            });
        });
        let addr = rx_addr.recv().unwrap();
        Link { addr, state, _stop: stop }
    }

    /// Starts a link to the host and port of `url` (`scheme://[user@]host:port/...`); the link
    /// and `url` with its host and port replaced by the link's.
    pub fn to_url(url: &str) -> (Link, String) {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let (user, hostport) = authority.rsplit_once('@').map_or((None, authority), |(u, h)| (Some(u), h));
        let upstream: SocketAddr = hostport
            .replace("localhost", "127.0.0.1")
            .parse()
            .unwrap_or_else(|e| panic!("{hostport}: an address with a port ({e})"));
        let link = Link::start(upstream);
        let user = user.map(|u| format!("{u}@")).unwrap_or_default();
        let slash = if path.is_empty() && !rest.contains('/') { "" } else { "/" };
        let url = format!("{scheme}://{user}{}{slash}{path}", link.addr);
        (link, url)
    }

    pub fn set(&self, state: LinkState) {
        self.state.send_replace(state);
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, state: watch::Receiver<LinkState>) {
    loop {
        let Ok((client, _)) = listener.accept().await else { return };
        if *state.borrow() == LinkState::Reset {
            drop(client);
            continue;
        }
        tokio::spawn(connection(client, upstream, state.clone()));
    }
}

/// One connection: upstream reached (once the link lets anything through), then both directions
/// pumped until either end closes or the link resets.
async fn connection(client: TcpStream, upstream: SocketAddr, mut state: watch::Receiver<LinkState>) {
    // A black-holed link connects nowhere yet: the client's connection just stays open.
    if state.wait_for(|s| *s != LinkState::BlackHole).await.is_err() || *state.borrow() == LinkState::Reset {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let mut reset = state.clone();
    tokio::select! {
        _ = pump(client_read, server_write, state.clone()) => {}
        _ = pump(server_read, client_write, state.clone()) => {}
        _ = reset.wait_for(|s| *s == LinkState::Reset) => {}
    }
}

/// Copies `from` to `to` chunk by chunk, each chunk waiting while the link is black-holed and
/// delayed while it is slow.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut state: watch::Receiver<LinkState>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Ok(now) = state.wait_for(|s| *s != LinkState::BlackHole).await.map(|s| *s) else { return };
        match now {
            LinkState::Reset => return,
            LinkState::Delay(d) => tokio::time::sleep(d).await,
            LinkState::Open | LinkState::BlackHole => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The proxy itself: bytes pass, are held while black-holed and pass once healed, wait while
/// delayed, and a reset closes what is open and refuses what comes.
#[test]
fn a_link_passes_holds_delays_and_resets() {
    use std::io::{Read, Write};
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in echo.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let link = Link::start(upstream);
    let mut conn = std::net::TcpStream::connect(link.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 5];
    conn.write_all(b"hello").unwrap();
    conn.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");

    link.set(LinkState::BlackHole);
    conn.write_all(b"held!").unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    assert!(conn.read(&mut buf).is_err(), "nothing passes a black hole");
    link.set(LinkState::Open);
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"held!", "what was held passes once healed");

    link.set(LinkState::Delay(Duration::from_millis(200)));
    let started = tokio::time::Instant::now();
    conn.write_all(b"slow.").unwrap();
    conn.read_exact(&mut buf).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(350), "delayed both ways");

    link.set(LinkState::Reset);
    let closed = conn.read(&mut buf);
    assert!(matches!(closed, Ok(0) | Err(_)), "a reset closes the connection: {closed:?}");
    let mut again = std::net::TcpStream::connect(link.addr).unwrap();
    again.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = again.write_all(b"x");
    assert!(matches!(again.read(&mut buf), Ok(0) | Err(_)), "new connections are closed on arrival");
}
