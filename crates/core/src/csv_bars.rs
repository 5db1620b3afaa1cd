//! Bars from CSV (CONTRACT §4 `POST /api/data/import`): a header row naming a date or timestamp
//! column (or leaving the first column unnamed, as pandas writes an index) and `open, high, low,
//! close, volume` (any order, case-insensitive; fields may be
//! double-quoted, as spreadsheets write them). A `YYYY-MM-DD`
//! date is that day's session (daily bars start at 00:00 America/New_York, as the market's do);
//! a timestamp is RFC 3339, any offset. Every row is checked — positive prices with at most 4
//! decimals, high and low bracketing open and close, a whole non-negative volume, no repeated
//! time, minute bars on minute boundaries — and the first bad row is reported by line number.

use crate::market::{Bar, Price, Timeframe};
use crate::time::{parse_ts, Timestamp};
use chrono::{NaiveDate, TimeZone};
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::str::FromStr;

/// The first problem of a file: `line` is 1-based, the header being line 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct CsvError {
    pub line: usize,
    pub reason: String,
}

fn err(line: usize, reason: impl Into<String>) -> CsvError {
    CsvError { line, reason: reason.into() }
}

const TIME_COLUMNS: &[&str] = &["timestamp", "datetime", "date", "time"];

/// The fields of a line, trimmed; a field may be double-quoted (RFC 4180, as spreadsheets write
/// them), with `""` for a quote inside it and commas allowed there.
pub(crate) fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("a quoted field is not closed".into()),
                }
            }
            while chars.peek().is_some_and(|c| *c != ',') {
                if !chars.next().is_some_and(char::is_whitespace) {
                    return Err("text after a quoted field".into());
                }
            }
        } else {
            while let Some(c) = chars.peek().copied().filter(|c| *c != ',') {
                chars.next();
                field.push(c);
            }
        }
        out.push(field.trim().to_string());
        if chars.next().is_none() {
            return Ok(out);
        }
    }
}

/// Parses a whole file; bars come back oldest first.
pub fn parse_bars_csv(text: &str, timeframe: Timeframe) -> Result<Vec<Bar>, CsvError> {
    let mut lines =
        text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r'))).filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| err(1, "the file is empty"))?;
    let names: Vec<String> = fields(header.trim_start_matches('\u{feff}'))
        .map_err(|r| err(1, r))?
        .into_iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let col = |name: &str| names.iter().position(|n| n == name);
    // A first column without a name is the date: a table's index written out as pandas writes
    // it (backtesting.py's bundled data, for one).
    let time = TIME_COLUMNS
        .iter()
        .find_map(|n| col(n))
        .or_else(|| names.first().filter(|n| n.is_empty()).map(|_| 0))
        .ok_or_else(|| err(1, "no date or timestamp column"))?;
    let mut index = [0usize; 5];
    for (slot, name) in index.iter_mut().zip(["open", "high", "low", "close", "volume"]) {
        *slot = col(name).ok_or_else(|| err(1, format!("no {name} column")))?;
    }
    let mut bars: BTreeMap<Timestamp, Bar> = BTreeMap::new();
    for (line, row) in lines {
        let cells = fields(row).map_err(|r| err(line, r))?;
        let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
        if cells.len() != names.len() {
            return Err(err(line, format!("{} fields where the header has {}", cells.len(), names.len())));
        }
        let start = parse_time(cells[time], timeframe).map_err(|r| err(line, r))?;
        let price = |i: usize, name: &str| -> Result<Price, CsvError> {
            let d =
                Decimal::from_str(cells[i]).map_err(|_| err(line, format!("{name} {:?} is not a number", cells[i])))?;
            if d <= Decimal::ZERO {
                return Err(err(line, format!("{name} must be positive")));
            }
            Price::from_decimal(d).ok_or_else(|| err(line, format!("{name} has more than 4 decimal places")))
        };
        let (open, high, low, close) =
            (price(index[0], "open")?, price(index[1], "high")?, price(index[2], "low")?, price(index[3], "close")?);
        let volume = cells[index[4]]
            .parse::<u64>()
            .or_else(|_| {
                Decimal::from_str(cells[index[4]])
                    .ok()
                    .filter(|d| d.fract().is_zero() && *d >= Decimal::ZERO)
                    .and_then(|d| u64::try_from(d).ok())
                    .ok_or(())
            })
            .map_err(|_| err(line, format!("volume {:?} is not a whole number of shares", cells[index[4]])))?;
        let bar = Bar { start, open, high, low, close, volume };
        if !bar.is_consistent() {
            return Err(err(line, "high and low must bracket open and close"));
        }
        if bars.insert(start, bar).is_some() {
            return Err(err(line, format!("a second bar for {}", crate::time::format_ts(&start))));
        }
    }
    if bars.is_empty() {
        return Err(err(1, "no bars after the header"));
    }
    Ok(bars.into_values().collect())
}

fn parse_time(text: &str, timeframe: Timeframe) -> Result<Timestamp, String> {
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        if timeframe == Timeframe::Minute {
            return Err(format!("{text:?} is a date; minute bars need a timestamp"));
        }
        let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
        return chrono_tz::America::New_York
            .from_local_datetime(&midnight)
            .earliest()
            .map(|t| t.to_utc())
            .ok_or_else(|| format!("{text} has no midnight in New York"));
    }
    let ts = parse_ts(text).map_err(|e| format!("{text:?}: {e}"))?;
    if timeframe == Timeframe::Minute && (ts.timestamp() % 60 != 0 || ts.timestamp_subsec_millis() != 0) {
        return Err(format!("{text:?} is not on a minute boundary"));
    }
    Ok(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spreadsheets quote fields: a quoted header and cells read as plain ones, `""` is a quote,
    /// a comma inside quotes is not a separator, and an unclosed quote names its line.
    #[test]
    fn quoted_fields_are_read_as_their_text() {
        let csv =
            "\"Date\",\"Open\",\"High\",\"Low\",\"Close\",\"Volume\"\n\"2026-11-18\", \"10\" ,11,9.5,10.5,\"1000\"\n";
        let bars = parse_bars_csv(csv, Timeframe::Day).unwrap();
        assert_eq!((bars[0].open, bars[0].volume), (Price::from_cents(1000), 1000));
        assert_eq!(fields(r#"a,"b ""c"", d",,e"#).unwrap(), ["a", r#"b "c", d"#, "", "e"]);
        let unclosed = "Date,Open,High,Low,Close,Volume\n2026-11-18,\"10,11,9.5,10.5,1000\n";
        assert_eq!(parse_bars_csv(unclosed, Timeframe::Day).unwrap_err(), err(2, "a quoted field is not closed"));
        let trailing = "Date,Open,High,Low,Close,Volume\n2026-11-18,\"10\"x,11,9.5,10.5,1000\n";
        assert_eq!(parse_bars_csv(trailing, Timeframe::Day).unwrap_err(), err(2, "text after a quoted field"));
        // A thousands separator inside quotes is one field, and not a number.
        let grouped = "Date,Open,High,Low,Close,Volume\n2026-11-18,10,11,9.5,10.5,\"1,000\"\n";
        assert_eq!(parse_bars_csv(grouped, Timeframe::Day).unwrap_err().line, 2);
    }

    #[test]
    fn reads_dates_and_timestamps_in_any_column_order() {
        let csv = "Date,Close,Open,High,Low,Volume\n2026-11-19,10.5,10,11,9.5,1000\n2026-11-18,10,9,10.2,8.9,900\n";
        let bars = parse_bars_csv(csv, Timeframe::Day).unwrap();
        assert_eq!(bars.len(), 2);
        assert_eq!(crate::time::format_ts(&bars[0].start), "2026-11-18T05:00:00.000Z", "sorted; New York midnight");
        assert_eq!((bars[1].open, bars[1].close), (Price::from_cents(1000), Price::from_cents(1050)));
        // pandas' `to_csv` leaves the index column unnamed: it is the date.
        let pandas = ",Open,High,Low,Close,Volume\n2004-08-19,100,104.06,95.96,100.34,22351900\n";
        let bars = parse_bars_csv(pandas, Timeframe::Day).unwrap();
        assert_eq!(
            (crate::time::format_ts(&bars[0].start).as_str(), bars[0].volume),
            ("2004-08-19T04:00:00.000Z", 22_351_900)
        );
        let minute = "timestamp,open,high,low,close,volume\n2026-11-20T09:30:00-05:00,1.2345,1.24,1.23,1.235,100\n";
        let bars = parse_bars_csv(minute, Timeframe::Minute).unwrap();
        assert_eq!(
            (crate::time::format_ts(&bars[0].start).as_str(), bars[0].open),
            ("2026-11-20T14:30:00.000Z", Price(12_345))
        );
    }

    #[test]
    fn the_first_bad_row_is_named_by_line() {
        let head = "date,open,high,low,close,volume\n";
        for (row, reason) in [
            ("2026-11-18,10,11,9,10.5", "fields"),
            ("18/11/2026,10,11,9,10.5,100", "RFC 3339"),
            ("2026-11-18,ten,11,9,10.5,100", "not a number"),
            ("2026-11-18,-1,11,9,10.5,100", "positive"),
            ("2026-11-18,10.00001,11,9,10.5,100", "4 decimal"),
            ("2026-11-18,10,9.9,9,10.5,100", "bracket"),
            ("2026-11-18,10,11,9,10.5,1.5", "whole number"),
        ] {
            let csv = format!("{head}2026-11-17,10,11,9,10,5\n{row}\n");
            let e = parse_bars_csv(&csv, Timeframe::Day).unwrap_err();
            assert_eq!(e.line, 3, "{row}");
            assert!(e.reason.contains(reason), "{row}: {}", e.reason);
        }
        let dup = format!("{head}2026-11-17,10,11,9,10,5\n2026-11-17,10,11,9,10,5\n");
        assert!(parse_bars_csv(&dup, Timeframe::Day).unwrap_err().reason.contains("second bar"));
        assert_eq!(parse_bars_csv("open,high,low,close,volume\n", Timeframe::Day).unwrap_err().line, 1);
        assert!(parse_bars_csv(head, Timeframe::Day).is_err(), "no bars");
        let off = "timestamp,open,high,low,close,volume\n2026-11-20T14:30:30Z,1,1,1,1,1\n";
        assert!(parse_bars_csv(off, Timeframe::Minute).unwrap_err().reason.contains("minute boundary"));
        let date_for_minutes = "date,open,high,low,close,volume\n2026-11-20,1,1,1,1,1\n";
        assert!(parse_bars_csv(date_for_minutes, Timeframe::Minute).is_err());
    }
}
