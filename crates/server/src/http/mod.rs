//! The HTTP edge: the only layer that knows axum, status codes and the JSON envelope. The
//! [`routes`] (one module per area of the API) turn requests into the domain services' typed
//! commands and their typed results and errors back into responses, with [`runs`] the bodies
//! that ask for a backtest, a sweep or a desk replay; [`error`] holds the one
//! table from domain errors to the contract's error envelope; [`extract`] and [`fields`] read
//! and refuse request input; [`auth`], [`guard`], [`client_limit`] and [`refusals`] identify
//! callers, budget them and audit sensitive actions; [`middleware`] stamps every request;
//! [`openapi`] documents it all, with [`string_schemas`] for the constrained strings that the
//! routes and the document both name; [`console`] serves the operator console; [`router`] puts
//! it all under the middleware; [`state`] is what a handler is given; [`front`] is a cluster
//! node's listener, which forwards to the engine's leader while this node follows.

pub mod auth;
pub mod client_limit;
pub mod console;
pub mod deadline;
pub mod envelope;
pub mod error;
pub mod event_log;
pub mod extract;
pub mod fields;
pub mod front;
pub mod guard;
pub mod middleware;
pub mod openapi;
pub mod order_pages;
pub mod router;
pub mod routes;
pub mod runs;
pub mod state;
pub mod stated_rules;
pub mod string_schemas;
