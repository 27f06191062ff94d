//! satlab-link: a userspace, packet-level satellite link emulator.
pub mod app;
pub mod bod;
pub mod control;
pub mod histogram;
pub mod link;
pub mod params;
pub mod rng;
pub mod schedule;
pub mod server;
pub mod sys;
