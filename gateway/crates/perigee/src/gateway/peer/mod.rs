//! The peer path between a terminal and its hub (docs/splitter.md, *The peer path*): the wire
//! format, the terminal's warm pool and a flow's handover phase, the hub's admission.
pub mod admission;
pub mod frame;
pub mod handover;
pub mod pool;
pub mod wire;
