//! The domain services' shared vocabulary and the services that have no other home: typed
//! errors ([`DomainError`]), the token registry ([`tokens`]) and the trading service over the
//! engine ([`trading`]). Nothing here knows the web framework, HTTP statuses or the JSON envelope; the HTTP
//! edge ([`crate::http::error`], [`crate::http::routes`]) translates.

pub mod account;
pub mod actions;
mod error;
pub mod radar;
pub mod reference;
pub mod settings;
pub mod tokens;
pub mod trades;
pub mod trading;
pub mod watchlist;

pub use error::{DomainError, DomainResult, ErrorCode, GuardSubject};
