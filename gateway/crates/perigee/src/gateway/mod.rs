//! The transparent TCP splitter daemon and its control plane.
pub mod apply;
pub mod cli;
pub mod config;
pub mod control;
pub mod http;
pub mod ipc;
pub mod log;
pub mod master;
pub mod metrics;
pub mod render;
pub mod session;
pub mod sys;
pub mod telemetry;
pub mod worker;
