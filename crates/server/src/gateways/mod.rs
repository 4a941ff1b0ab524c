//! The gateways: each decodes its protocol's bytes into the port's requests, renders
//! the port's answers and listens on its socket. None holds business state or reaches
//! the engine but through the port.

pub mod binance;
pub mod diff;
pub mod fix;
pub mod rest;
pub mod router;
pub mod shared;
pub mod tcp;
pub mod ui;
pub mod ws;
