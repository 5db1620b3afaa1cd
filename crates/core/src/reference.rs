//! Reference data of symbols — float and sector — as an operator imports it (a CSV file with
//! the header `symbol,float,sector`), and the rule by which it meets the market source's.
//!
//! A real market-data feed knows no float and no sector; the simulated market makes both up.
//! Imported values win, field by field: an imported float replaces the market's float, an
//! imported sector the market's sector. An empty cell means "not known to this import": the
//! market source's value (if any) stays, and with none the field is unknown (`null`).

use crate::csv_bars::fields;
use crate::symbol::Symbol;
use std::collections::BTreeMap;

/// Largest float accepted: a trillion shares, beyond any listed company's.
pub const MAX_FLOAT: u64 = 1_000_000_000_000;

/// Longest sector name accepted.
pub const MAX_SECTOR_CHARS: usize = 100;

/// The imported reference data of one symbol.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reference {
    /// Shares in the float; `None`: not imported.
    pub float: Option<u64>,
    /// `None`: not imported.
    pub sector: Option<String>,
}

/// One row of an import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferenceEntry {
    pub symbol: Symbol,
    pub reference: Reference,
}

/// A refused row: `line` is 1-based (the header is line 1; for JSON rows, the row's position
/// from 1), `field` the column (`symbol`, `float`, `sector`, or `header`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, {field}: {reason}")]
pub struct ReferenceError {
    pub line: usize,
    pub field: String,
    pub reason: String,
}

fn refuse(line: usize, field: &str, reason: impl Into<String>) -> ReferenceError {
    ReferenceError { line, field: field.to_string(), reason: reason.into() }
}

/// Every imported symbol's reference data, and the rule that lays it over the market source's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReferenceBook {
    entries: BTreeMap<Symbol, Reference>,
}

impl ReferenceBook {
    pub fn new(entries: impl IntoIterator<Item = ReferenceEntry>) -> ReferenceBook {
        ReferenceBook { entries: entries.into_iter().map(|e| (e.symbol, e.reference)).collect() }
    }

    pub fn get(&self, symbol: &Symbol) -> Option<&Reference> {
        self.entries.get(symbol)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The float of `symbol`: the imported one, else the market source's.
    pub fn float(&self, symbol: &Symbol, market: Option<u64>) -> Option<u64> {
        self.get(symbol).and_then(|r| r.float).or(market)
    }

    /// The sector of `symbol`: the imported one, else the market source's.
    pub fn sector<'a>(&'a self, symbol: &Symbol, market: Option<&'a str>) -> Option<&'a str> {
        self.get(symbol).and_then(|r| r.sector.as_deref()).or(market)
    }
}

/// Checks one row's cells (already split; `None` or blank cells are unknown) at `line`.
pub fn entry(
    line: usize,
    symbol: &str,
    float: Option<&str>,
    sector: Option<&str>,
) -> Result<ReferenceEntry, ReferenceError> {
    let symbol = Symbol::parse(symbol).map_err(|reason| refuse(line, "symbol", reason))?;
    let float = match float.map(str::trim).filter(|f| !f.is_empty()) {
        None => None,
        Some(text) => {
            let float = text
                .parse::<u64>()
                .map_err(|_| refuse(line, "float", format!("{text:?} is not a non-negative whole number of shares")))?;
            if float > MAX_FLOAT {
                return Err(refuse(line, "float", format!("must be at most {MAX_FLOAT} shares")));
            }
            Some(float)
        }
    };
    let sector = match sector.map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(text) if text.chars().count() > MAX_SECTOR_CHARS => {
            return Err(refuse(line, "sector", format!("must be at most {MAX_SECTOR_CHARS} characters")))
        }
        Some(text) if text.chars().any(char::is_control) => {
            return Err(refuse(line, "sector", "may not contain control characters"))
        }
        Some(text) => Some(text.to_string()),
    };
    Ok(ReferenceEntry { symbol, reference: Reference { float, sector } })
}

/// Parses a whole file: a header naming `symbol`, `float` and `sector` (any order, any case;
/// other columns are refused, so a misspelt one is not silently ignored), then one row per
/// symbol. The first bad row is refused, naming its line and field; a symbol may appear once.
pub fn parse_reference_csv(text: &str) -> Result<Vec<ReferenceEntry>, ReferenceError> {
    let mut lines =
        text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r'))).filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| refuse(1, "header", "the file is empty"))?;
    let names: Vec<String> = fields(header.trim_start_matches('\u{feff}'))
        .map_err(|r| refuse(1, "header", r))?
        .into_iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    if let Some(other) = names.iter().find(|n| !["symbol", "float", "sector"].contains(&n.as_str())) {
        return Err(refuse(1, "header", format!("unknown column {other:?}; the header is symbol,float,sector")));
    }
    let col = |name: &str| names.iter().position(|n| n == name);
    let symbol_at = col("symbol").ok_or_else(|| refuse(1, "header", "no symbol column"))?;
    let (float_at, sector_at) = (col("float"), col("sector"));
    if float_at.is_none() && sector_at.is_none() {
        return Err(refuse(1, "header", "no float or sector column"));
    }
    if names.len() != [Some(symbol_at), float_at, sector_at].iter().flatten().count() {
        return Err(refuse(1, "header", "a column is named twice"));
    }
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (line, row) in lines {
        let cells = fields(row).map_err(|r| refuse(line, "row", r))?;
        if cells.len() != names.len() {
            return Err(refuse(line, "row", format!("{} fields where the header has {}", cells.len(), names.len())));
        }
        let cell = |at: Option<usize>| at.map(|i| cells[i].as_str());
        let e = entry(line, &cells[symbol_at], cell(float_at), cell(sector_at))?;
        if let Some(first) = seen.insert(e.symbol.clone(), line) {
            return Err(refuse(line, "symbol", format!("{} is already on line {first}", e.symbol)));
        }
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    #[test]
    fn rows_parse_with_empty_cells_as_unknown() {
        let csv = "\u{feff}Symbol,Float,Sector\r\nabcd,5000000,Technology\nEFG,,\"Health Care\"\nHIJ,0,\n\n";
        let rows = parse_reference_csv(csv).unwrap();
        let got: Vec<_> = rows.iter().map(|e| (e.symbol.to_string(), e.reference.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("ABCD".into(), Reference { float: Some(5_000_000), sector: Some("Technology".into()) }),
                ("EFG".into(), Reference { float: None, sector: Some("Health Care".into()) }),
                ("HIJ".into(), Reference { float: Some(0), sector: None }),
            ]
        );
        let reordered = parse_reference_csv("sector,symbol\nEnergy,XOM\n").unwrap();
        assert_eq!(reordered[0].reference, Reference { float: None, sector: Some("Energy".into()) });
    }

    /// Each refusal names the line (header = 1) and the field.
    #[test]
    fn bad_rows_name_their_line_and_field() {
        let cases = [
            ("", 1, "header"),
            ("symbol,float,sector,price\nA,1,B,2\n", 1, "header"),
            ("float,sector\n1,B\n", 1, "header"),
            ("symbol\nA\n", 1, "header"),
            ("symbol,float,float\nA,1,2\n", 1, "header"),
            ("symbol,float,sector\nABCD,5,Tech\nAB CD,5,Tech\n", 3, "symbol"),
            ("symbol,float,sector\nABCD,-5,Tech\n", 2, "float"),
            ("symbol,float,sector\nABCD,1.5,Tech\n", 2, "float"),
            ("symbol,float,sector\nABCD,1e6,Tech\n", 2, "float"),
            ("symbol,float,sector\nABCD,1000000000001,Tech\n", 2, "float"),
            ("symbol,float,sector\nABCD,5,Tech\n\nabcd,6,Tech\n", 4, "symbol"),
            ("symbol,float,sector\nABCD,5\n", 2, "row"),
            ("symbol,float,sector\nABCD,5,\"Tech\n", 2, "row"),
            ("symbol,float,sector\nABCD,5,\u{7}\n", 2, "sector"),
        ];
        for (csv, line, field) in cases {
            let e = parse_reference_csv(csv).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (line, field), "{csv:?}: {e}");
        }
    }

    /// Imported values win field by field; an empty import cell keeps the market's value.
    #[test]
    fn imported_values_override_the_market_field_by_field() {
        let book = ReferenceBook::new(parse_reference_csv("symbol,float,sector\nAAA,100,\nBBB,,Energy\n").unwrap());
        assert_eq!(book.float(&sym("AAA"), Some(5)), Some(100));
        assert_eq!(book.sector(&sym("AAA"), Some("Tech")), Some("Tech"));
        assert_eq!(book.sector(&sym("AAA"), None), None);
        assert_eq!(book.float(&sym("BBB"), None), None);
        assert_eq!(book.sector(&sym("BBB"), Some("Tech")), Some("Energy"));
        assert_eq!((book.float(&sym("CCC"), None), book.sector(&sym("CCC"), None)), (None, None));
        assert_eq!(book.len(), 2);
    }
}
