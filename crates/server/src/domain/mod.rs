//! The domain services' shared vocabulary and the services that have no other home: typed
//! errors ([`DomainError`]), the token registry ([`tokens`]) and the trading service over the
//! engine ([`trading`]). Nothing here knows the web framework, HTTP statuses or the JSON envelope; the HTTP
//! edge ([`crate::error`], [`crate::routes`]) translates.

mod error;
pub mod tokens;
pub mod trading;

pub use error::{DomainError, DomainResult, ErrorCode, GuardSubject};
