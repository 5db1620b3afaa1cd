//! One simulated trading day of one symbol.
//!
//! [`day_plan`] decides the day in O(1) from (seed, symbol, date): its kind (ordinary, mover,
//! loser or news-driven runner), previous close, open, close, total volume and the waypoints
//! the price passes through (a runner's news jump, high of day, pullback and second push).
//! [`DayGenerator`] then walks the day one minute at a time: between waypoints the log price is
//! a Brownian bridge whose per-minute volatility follows a GARCH(1,1) process (volatility
//! clustering) scaled by phase and time of day; volume is allocated to phases exactly and, within
//! a phase, by the U-shaped profile with noise that grows with the size of the move. The walk is
//! causal, so the live feed (one step per minute) and history (all steps at once) are identical.
//!
//! The regular session meets trading halts ([`crate::halt`]): a minute whose walk would close
//! outside its LULD band closes at the band and a 5-minute volatility pause follows, and some
//! runner days have one news halt. A halted minute has no bar ([`Minute::Halted`]); its volume
//! goes to the reopening bar, which opens where the walk has gone meanwhile. The walk itself
//! goes on underneath (the same random draws every minute), so the day's waypoints and volume
//! hold whatever the halts.

use crate::halt::{band_width, Band, HaltWindow, NewsHalt, ReferencePrice, NO_PAUSE_BEFORE_CLOSE, PAUSE_MINUTES};
use crate::profile::{
    regular_remaining, regular_weight, DayClock, PhaseShares, NORMAL_SHARES, REGULAR_MINUTES, RUNNER_SHARES,
};
use crate::rng::{mix, unit, Rng};
use crate::universe::{SymbolProfile, Universe};
use chrono::{Datelike, Duration, NaiveDate};
use tradeops_core::market::{Bar, Price, SymbolHalt};
use tradeops_core::radar::AVERAGE_VOLUME_DAYS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DayKind {
    Normal,
    /// A moderate move up or down (3–10%).
    Mover,
    /// A selloff (5–20% down).
    Loser,
    /// News: a pre-market gap of 10–150%, 12–50× its recent volume, squeeze, pullback, second
    /// push, and a close that keeps most of the gap.
    Runner,
}

/// News-driven runners each day beside the designated one (fewer when two land on one name).
const NEWS_RUNNERS: u64 = 32;
/// Names news considers for each of them: it finds the one that suits a runner best.
const NEWS_CANDIDATES: u64 = 6;
const LOSER_SHARE: f64 = 0.03;
const MOVER_SHARE: f64 = 0.08;
/// Share of runner days with a news halt in the regular session.
const NEWS_HALT_SHARE: f64 = 1.0 / 3.0;

/// Days since 2000-01-01: the time axis of the long-run price level.
fn day_index(date: NaiveDate) -> i64 {
    (date - NaiveDate::from_ymd_opt(2000, 1, 1).expect("valid")).num_days()
}

fn date_key(date: NaiveDate) -> u64 {
    (date.year() as u64) << 16 | (date.ordinal() as u64)
}

/// How likely news finds a symbol: low floats and tradeable prices attract the runners.
fn runner_affinity(p: &SymbolProfile) -> f64 {
    let float = (20e6 / p.float as f64).clamp(0.15, 4.0);
    let price = if (1.0..=15.0).contains(&p.base_price) { 1.5 } else { 0.5 };
    float * price
}

/// The day's designated runner: of eight candidates among the first 100 symbols (present in
/// every universe of 100 or more), the one news is most likely to find.
fn designated_runner(u: &Universe, dk: u64) -> usize {
    let pool = u.len().clamp(1, 100) as u64;
    (0..8u64)
        .map(|n| (mix(&[u.seed, dk, 0x0052_554E, n]) % pool) as usize)
        .max_by(|a, b| runner_affinity(&u.symbols[*a]).total_cmp(&runner_affinity(&u.symbols[*b])).then(b.cmp(a)))
        .unwrap_or(0)
}

/// How well `p` suits a news-driven runner on `date`: the low-float, low-priced names momentum
/// traders scan for (float up to 20 million, a price level of $1–$12 that a gap leaves
/// tradeable) far more than others.
fn news_affinity(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> f64 {
    let float = if p.float <= 20_000_000 { 1.0 } else { 0.05 };
    let price = if (1.0..=12.0).contains(&anchor(u, p, date)) { 1.0 } else { 0.05 };
    float * price
}

/// Whether news finds `p` on `date`: each of [`NEWS_RUNNERS`] stories considers
/// [`NEWS_CANDIDATES`] names of the whole universe and lands on the best suited (ties to the
/// first drawn), so every day has about the same handful of runners the radar can show.
fn news_finds(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> bool {
    let (dk, n) = (date_key(date), u.len().max(1) as u64);
    (0..NEWS_RUNNERS).any(|story| {
        let candidates: Vec<usize> =
            (0..NEWS_CANDIDATES).map(|c| (mix(&[u.seed, dk, 0x004E_4557, story, c]) % n) as usize).collect();
        candidates.contains(&p.index)
            && candidates.iter().copied().reduce(|best, c| {
                if news_affinity(u, &u.symbols[c], date) > news_affinity(u, &u.symbols[best], date) {
                    c
                } else {
                    best
                }
            }) == Some(p.index)
    })
}

/// The kind of `p`'s day. At least one runner every day (the designated one), plus those news
/// finds, mostly among low floats and low prices.
pub fn day_kind(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> DayKind {
    let dk = date_key(date);
    if p.index == designated_runner(u, dk) || news_finds(u, p, date) {
        return DayKind::Runner;
    }
    match unit(&[u.seed, p.key, dk, 2]) {
        x if x < LOSER_SHARE => DayKind::Loser,
        x if x < LOSER_SHARE + MOVER_SHARE => DayKind::Mover,
        _ => DayKind::Normal,
    }
}

/// Smooth random level: value noise at 10 scales (1 day to ~3 years), so the long-run price
/// wanders like a random walk over months and reverts over years. O(1) for any date.
fn anchor(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> f64 {
    let d = day_index(date) as f64;
    let mut level = p.base_price.ln();
    for k in 0..10u32 {
        let span = (1u64 << k) as f64;
        let x = d / span;
        let (i, frac) = (x.floor(), x - x.floor());
        let node = |n: f64| (unit(&[u.seed, p.key, k as u64, n as i64 as u64]) * 2.0 - 1.0) * 3f64.sqrt();
        let v = node(i) * (1.0 - frac) + node(i + 1.0) * frac;
        level += p.daily_vol * 0.45 * span.sqrt() * v;
    }
    level.exp().clamp(0.05, 5_000.0)
}

/// The regular close of `date` (also the day's last price): the level times the day's move.
pub fn close_of(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> f64 {
    let level = anchor(u, p, date);
    let dk = date_key(date);
    let draw = |n: u64| unit(&[u.seed, p.key, dk, 10 + n]);
    let factor = match day_kind(u, p, date) {
        DayKind::Normal => 1.0,
        DayKind::Mover => {
            let size = 0.03 + 0.07 * draw(0);
            if draw(1) < 0.6 {
                1.0 + size
            } else {
                1.0 - size
            }
        }
        DayKind::Loser => 1.0 - (0.05 + 0.15 * draw(0)),
        DayKind::Runner => 1.0 + runner_gap(draw(2)) * (0.6 + 0.6 * draw(3)),
    };
    level * factor
}

/// Gap of a runner: 10% to 150%, most between 15% and 50%.
fn runner_gap(x: f64) -> f64 {
    (0.10 + 0.25 * (-(1.0 - x).ln())).min(1.5)
}

/// Total shares traded on `date` (exact: the day's minute volumes sum to it). O(1).
pub fn daily_volume(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> u64 {
    let mut multiple = volume_multiple(u, p, date);
    if day_kind(u, p, date) == DayKind::Runner {
        // A runner trades its multiple of what the name has traded lately (its previous
        // AVERAGE_VOLUME_DAYS calendar days, earlier runs included), so a name that ran last
        // week still stands out in relative volume when news finds it again.
        let days = AVERAGE_VOLUME_DAYS as i64;
        let lately: f64 = (1..=days).map(|k| volume_multiple(u, p, date - Duration::days(k))).sum();
        multiple *= (lately / days as f64).max(1.0);
    }
    ((p.avg_volume as f64) * multiple).round().max(1_000.0) as u64
}

/// The day's volume over the symbol's typical volume, before a runner's recent history.
fn volume_multiple(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> f64 {
    let dk = date_key(date);
    let noise = (0.3 * (unit(&[u.seed, p.key, dk, 20]) - 0.5) * 3.4).exp();
    match day_kind(u, p, date) {
        DayKind::Normal => noise,
        DayKind::Mover => (2.0 + 2.0 * unit(&[u.seed, p.key, dk, 21])) * noise,
        DayKind::Loser => (2.5 + 2.5 * unit(&[u.seed, p.key, dk, 21])) * noise,
        // 12–50×, skewed low; news leaves no room for an ordinary day's noise.
        DayKind::Runner => 12.0 + 38.0 * unit(&[u.seed, p.key, dk, 21]).powi(2),
    }
}

/// Everything decided about a day before walking it.
#[derive(Clone, Debug, PartialEq)]
pub struct DayPlan {
    pub date: NaiveDate,
    pub kind: DayKind,
    pub clock: DayClock,
    /// The previous calendar date's close: where the day's walk starts.
    pub prev_close: f64,
    pub open: f64,
    pub close: f64,
    pub volume: u64,
    /// For runners, the minute index of the news.
    pub news_minute: Option<u32>,
    /// For some runners, a news halt (`T1`) in the regular session.
    pub news_halt: Option<NewsHalt>,
    /// For some runners, (minute index, log jump) of the sudden moves momentum names make in
    /// the session's first hours: what most often takes them to a LULD band.
    pub bursts: Vec<(u32, f64)>,
    /// Whether the day meets trading halts (LULD bands and pauses, its news halt). Without them
    /// the walk is the same and every minute trades at the walk's price: what tests compare with.
    pub halts: bool,
    /// (minute index, log price) the walk passes through, ascending, ending at the last minute.
    pub waypoints: Vec<(u32, f64)>,
    pub phase_shares: PhaseShares,
    /// Per-minute volatility of the regular session before clustering and time of day.
    pub sigma: f64,
    pub seed: u64,
}

pub fn day_plan(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> DayPlan {
    let clock = DayClock::for_date(date);
    let kind = day_kind(u, p, date);
    let prev_close = Price::from_f64_tick(close_of(u, p, date - Duration::days(1))).to_f64();
    let close = Price::from_f64_tick(close_of(u, p, date)).to_f64();
    let seed = mix(&[u.seed, p.key, date_key(date), 0x0044_4159]);
    let mut rng = Rng::new(mix(&[seed, 1]));
    let dv = p.daily_vol;
    let open = match kind {
        DayKind::Normal => prev_close * (0.3 * dv * rng.normal()).exp(),
        DayKind::Mover | DayKind::Loser => {
            prev_close * (0.5 * (close / prev_close).ln() + 0.4 * dv * rng.normal()).exp()
        }
        DayKind::Runner => prev_close * (1.0 + runner_gap(unit(&[u.seed, p.key, date_key(date), 12]))),
    };
    let open = Price::from_f64_tick(open).to_f64();
    let mut waypoints = vec![(0, prev_close.ln())];
    let mut news_minute = None;
    let mut sigma = dv / (REGULAR_MINUTES as f64).sqrt();
    if kind == DayKind::Runner {
        // News between 07:00 and 09:00: most of the gap happens in the minute after it.
        let news = clock.open - 150 + (rng.uniform() * 120.0) as u32;
        news_minute = Some(news);
        let before = prev_close * (1.0 + 0.01 * rng.normal());
        waypoints.push((news, before.ln()));
        waypoints.push((news + 1, (prev_close + 0.7 * (open - prev_close)).ln()));
        waypoints.push((clock.open, open.ln()));
        // Squeeze to the high of day, first pullback, second push, then drift to the close.
        let squeeze = 0.08 + 0.42 * rng.uniform().powi(2);
        let hod_at = clock.open + 5 + (rng.uniform() * 40.0) as u32;
        let hod = open * (1.0 + squeeze);
        let pullback_at = hod_at + 4 + (rng.uniform() * 20.0) as u32;
        let pullback = (hod * (1.0 - 0.3 * squeeze - 0.1 * rng.uniform())).max(open * 0.97);
        let push_at = pullback_at + 8 + (rng.uniform() * 35.0) as u32;
        let push = hod * (0.94 + 0.14 * rng.uniform());
        for (at, level) in [(hod_at, hod), (pullback_at, pullback), (push_at, push)] {
            waypoints.push((at, level.ln()));
        }
        sigma *= 2.5;
    } else {
        waypoints.push((clock.open, open.ln()));
    }
    waypoints.push((clock.close, close.ln()));
    waypoints.push((clock.minutes, close.ln()));
    let phase_shares = if kind == DayKind::Runner { RUNNER_SHARES } else { NORMAL_SHARES };
    DayPlan {
        date,
        kind,
        clock,
        prev_close,
        open,
        close,
        volume: daily_volume(u, p, date),
        news_minute,
        news_halt: news_halt(u, p, date, kind, &clock),
        bursts: bursts(u, p, date, kind, &clock),
        halts: true,
        waypoints,
        phase_shares,
        sigma,
        seed,
    }
}

/// The news halt of a runner day, for about one runner in three: 20–60 minutes from a minute
/// between 9:45 and an end by 15:40, reopening 5–30 % away (up more often than down). Drawn
/// apart from the walk's generator, so whether a day has one leaves the rest of its walk as it is.
fn news_halt(u: &Universe, p: &SymbolProfile, date: NaiveDate, kind: DayKind, clock: &DayClock) -> Option<NewsHalt> {
    let dk = date_key(date);
    let draw = |n: u64| unit(&[u.seed, p.key, dk, 0x0048_4C54, n]);
    if kind != DayKind::Runner || draw(0) >= NEWS_HALT_SHARE {
        return None;
    }
    let minutes = 20 + (draw(1) * 41.0) as u32;
    let (first, last) = (clock.open + 15, clock.close - 20 - minutes);
    let minute = first + (draw(2) * (last - first) as f64) as u32;
    let size = 0.05 + 0.25 * draw(3);
    let gap = if draw(4) < 0.6 { (1.0 + size).ln() } else { (1.0 - size).ln() };
    Some(NewsHalt { minute, minutes, gap })
}

/// A runner's bursts: none for about half of them, up to three for the rest, each a jump of
/// 8–25 % (up seven times in ten) in the first two and a half hours of the session; the bridge
/// then draws the walk back towards its next waypoint. Drawn apart from the walk's generator.
fn bursts(u: &Universe, p: &SymbolProfile, date: NaiveDate, kind: DayKind, clock: &DayClock) -> Vec<(u32, f64)> {
    if kind != DayKind::Runner {
        return Vec::new();
    }
    let dk = date_key(date);
    let draw = |n: u64| unit(&[u.seed, p.key, dk, 0x0042_5253, n]);
    let count = (4.0 * draw(0).powi(2)) as u64;
    let mut bursts: Vec<(u32, f64)> = (0..count)
        .map(|n| {
            let minute = clock.open + (draw(3 * n + 1) * 150.0) as u32;
            let size = 0.08 + 0.17 * draw(3 * n + 2);
            let jump = if draw(3 * n + 3) < 0.7 { (1.0 + size).ln() } else { (1.0 - size).ln() };
            (minute, jump)
        })
        .collect();
    bursts.sort_by_key(|(minute, _)| *minute);
    bursts
}

/// Volatility multiplier by phase: quiet overnight, thinner extended hours.
const PHASE_VOL: [f64; 5] = [0.08, 0.35, 1.0, 0.3, 0.08];
const GARCH_ALPHA: f64 = 0.10;
const GARCH_BETA: f64 = 0.86;

/// One minute of a walked day.
#[derive(Clone, Debug, PartialEq)]
pub enum Minute {
    /// The minute's bar.
    Traded(Bar),
    /// No trades: the symbol is halted (a volatility pause or a news halt).
    Halted(SymbolHalt),
}

/// A halt in force: its minutes are `from..until` (indices from the day's midnight); `until`
/// is the reopening bar's minute.
#[derive(Clone, Debug)]
struct ActiveHalt {
    halt: SymbolHalt,
    from: u32,
    until: u32,
}

/// Walks a [`DayPlan`] one minute at a time. Small (a few hundred bytes): the live feed keeps one
/// per symbol.
#[derive(Clone, Debug)]
pub struct DayGenerator {
    plan: DayPlan,
    rng: Rng,
    minute: u32,
    /// Log price at the end of the previous minute (where the walk is, halted or not).
    x: f64,
    /// GARCH variance multiplier (mean 1).
    h: f64,
    /// The last trade: the last bar's close.
    last: Price,
    waypoint: usize,
    /// Volume still to allocate in the current phase, and the phase.
    phase: usize,
    phase_left: u64,
    /// The LULD reference price's recent closes.
    reference: ReferencePrice,
    /// The halt in force or about to start (a pause follows the minute that closed at its band).
    halt: Option<ActiveHalt>,
    /// Volume of the halted minutes, for the reopening bar.
    held: u64,
}

impl DayGenerator {
    pub fn new(plan: DayPlan) -> DayGenerator {
        let rng = Rng::new(mix(&[plan.seed, 2]));
        let x = plan.prev_close.ln();
        let last = Price::from_f64_tick(plan.prev_close);
        let mut generator = DayGenerator {
            rng,
            minute: 0,
            x,
            h: 1.0,
            last,
            waypoint: 1,
            phase: 0,
            phase_left: 0,
            plan,
            reference: ReferencePrice::default(),
            halt: None,
            held: 0,
        };
        generator.phase_left = generator.phase_volume(0);
        generator
    }

    pub fn for_symbol(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> DayGenerator {
        DayGenerator::new(day_plan(u, p, date))
    }

    pub fn plan(&self) -> &DayPlan {
        &self.plan
    }

    /// Index of the next minute to generate.
    pub fn minute(&self) -> u32 {
        self.minute
    }

    /// The halt in force in the minute last generated (`None` before the first, and in a minute
    /// that traded, even one whose close starts a pause: the pause starts when it ends).
    pub fn halt(&self) -> Option<&SymbolHalt> {
        let last = self.minute.checked_sub(1)?;
        self.halt.as_ref().filter(|a| a.from <= last && last < a.until).map(|a| &a.halt)
    }

    /// The day's volume allocated to `phase`; the last phase takes the rounding remainder.
    fn phase_volume(&self, phase: usize) -> u64 {
        let total = self.plan.volume as f64;
        let upto = |n: usize| (total * self.plan.phase_shares[..n].iter().sum::<f64>()).round() as u64;
        if phase == 4 {
            self.plan.volume - upto(4)
        } else {
            upto(phase + 1) - upto(phase)
        }
    }

    /// Generates the next minute, or `None` after the day's last minute.
    pub fn next_minute(&mut self) -> Option<Minute> {
        let clock = self.plan.clock;
        let m = self.minute;
        if m >= clock.minutes {
            return None;
        }
        let phase = clock.phase_of(m);
        if phase != self.phase {
            self.phase = phase;
            self.phase_left = self.phase_volume(phase);
        }
        let (phase_start, phase_end) = clock.phases()[phase];

        // Price: bridge towards the next waypoint with clustered volatility.
        while self.plan.waypoints[self.waypoint].0 <= m {
            self.waypoint += 1;
        }
        let (target_at, target) = self.plan.waypoints[self.waypoint];
        let remaining = (target_at - m) as f64;
        let time_of_day = if phase == 2 { regular_weight(m - phase_start).sqrt() } else { 1.0 };
        let sigma = self.plan.sigma * PHASE_VOL[phase] * time_of_day * self.h.sqrt();
        let z = self.rng.normal();
        let mut x_new = self.x + (target - self.x) / remaining + sigma * z * ((remaining - 1.0) / remaining).sqrt();
        self.h = (1.0 - GARCH_ALPHA - GARCH_BETA) + GARCH_ALPHA * z * z + GARCH_BETA * self.h;
        let (u1, u2) = (self.rng.uniform(), self.rng.uniform());

        // Volume: this minute's share of what the phase has left, noisier and larger on big moves.
        let noise = (0.4 + 1.2 * self.rng.uniform()) * (1.0 + z.abs()) / 1.8;
        let (weight, weight_left) = if phase == 2 {
            let i = m - phase_start;
            (regular_weight(i), regular_remaining(i))
        } else {
            (1.0, (phase_end - m) as f64)
        };
        let volume = if m + 1 == phase_end {
            self.phase_left
        } else {
            ((self.phase_left as f64 * weight * noise / weight_left).round() as u64).min(self.phase_left)
        };
        self.phase_left -= volume;

        for (_, jump) in self.plan.bursts.iter().filter(|(at, _)| *at == m) {
            x_new += jump;
        }
        let start = clock.start + Duration::minutes(m as i64);
        if let Some(news) = self.plan.news_halt {
            if m == news.minute && self.plan.halts {
                // News overrides a pause in progress.
                let until = m + news.minutes;
                self.halt = Some(ActiveHalt { halt: SymbolHalt::news_pending(start), from: m, until });
            }
            if m + 1 == news.minute + news.minutes {
                x_new += news.gap;
            }
        }
        let reopening = match &self.halt {
            Some(a) if a.from <= m && m < a.until => {
                self.held += volume;
                self.x = x_new;
                self.minute += 1;
                return Some(Minute::Halted(a.halt.clone()));
            }
            Some(a) => a.until == m,
            None => false,
        };
        if reopening {
            self.halt = None;
        }

        // The reopening bar opens where the walk went during the halt.
        let open = if reopening { Price::from_f64_tick(self.x.exp()) } else { self.last };
        let mut close = Price::from_f64_tick(x_new.exp());
        let hi = Price::from_f64_tick((x_new.max(self.x) + 0.8 * sigma * u1).exp());
        let lo = Price::from_f64_tick((x_new.min(self.x) - 0.8 * sigma * u2).exp());
        let (mut high, mut low) = (hi, Price(lo.0.max(1)));
        if phase == 2 && self.plan.halts {
            let reference = self.reference.at(m, open);
            let width = band_width(reference, self.plan.prev_close, m - phase_start);
            // Most minutes stay well inside their band: only one that reaches it needs the band
            // on the tick grid.
            let inside = |p: Price| (reference - width..=reference + width).contains(&p.to_f64());
            if !(inside(high) && inside(low) && inside(close)) {
                let band = Band::with_width(reference, width);
                // The last minute closes in the closing cross, which the bands do not bound.
                if !band.contains(close) && m + 1 < clock.close {
                    close = band.clip(close);
                    // Held at the band for the rest of the minute (over 15 seconds): a pause,
                    // unless it would start in the last ten minutes.
                    if m + 1 < clock.close - NO_PAUSE_BEFORE_CLOSE {
                        let since = start + Duration::minutes(1);
                        let (from, until) = (m + 1, m + 1 + PAUSE_MINUTES);
                        self.halt = Some(ActiveHalt { halt: SymbolHalt::luld_pause(since), from, until });
                    }
                }
                (high, low) = (band.clip(high), band.clip(low));
            }
            self.reference.push(m, close);
        }
        let high = high.max(open).max(close);
        let low = low.min(open).min(close);
        let volume = volume + std::mem::take(&mut self.held);

        self.x = x_new;
        self.last = close;
        self.minute += 1;
        Some(Minute::Traded(Bar { start, open, high, low, close, volume }))
    }

    /// Generates the next minute bar, skipping halted minutes, or `None` after the day's last
    /// minute.
    pub fn next_bar(&mut self) -> Option<Bar> {
        loop {
            if let Minute::Traded(bar) = self.next_minute()? {
                return Some(bar);
            }
        }
    }

    /// The rest of the day's bars.
    pub fn remaining_bars(&mut self) -> Vec<Bar> {
        let mut bars = Vec::with_capacity((self.plan.clock.minutes - self.minute) as usize);
        while let Some(bar) = self.next_bar() {
            bars.push(bar);
        }
        bars
    }

    /// The halts of the rest of the day, in order: the walk run to the day's end. A halt already
    /// in force counts from its start.
    pub fn halt_windows(mut self) -> Vec<HaltWindow> {
        let start = self.plan.clock.start;
        let mut windows: Vec<HaltWindow> = Vec::new();
        while let Some(minute) = self.next_minute() {
            let Minute::Halted(halt) = minute else { continue };
            let end = start + Duration::minutes(self.minute as i64);
            match windows.last_mut() {
                Some(w) if w.halt == halt => w.end = end,
                _ => windows.push(HaltWindow { start: halt.since, end, halt }),
            }
        }
        windows
    }
}

/// The halts of `p`'s day on `date` (volatility pauses and news halts), in order: what a backtest
/// or a replay of that day meets, the same as the live feed and history. Walks the whole day.
pub fn halt_windows(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> Vec<HaltWindow> {
    DayGenerator::for_symbol(u, p, date).halt_windows()
}

/// The day as one bar (00:00–24:00 New York): its close is the regular close, which is also the
/// day's last price; its volume is [`daily_volume`].
pub fn daily_bar(u: &Universe, p: &SymbolProfile, date: NaiveDate) -> Bar {
    let mut generator = DayGenerator::for_symbol(u, p, date);
    let start = generator.plan.clock.start;
    let mut bar = generator.next_bar().expect("a day has minutes");
    bar.start = start;
    while let Some(next) = generator.next_bar() {
        bar.high = bar.high.max(next.high);
        bar.low = bar.low.min(next.low);
        bar.close = next.close;
        bar.volume += next.volume;
    }
    bar
}

#[cfg(test)]
mod halt_tests;
#[cfg(test)]
mod radar_tests;
#[cfg(test)]
mod tests;
