//! Test helpers shared by the gateway crates' integration tests.
mod cannot_run;
pub mod dns;
mod netns;
mod run;
mod sink;
mod snapshot;
mod tcp;
mod wait;

pub use cannot_run::{cannot_run, root, REQUIRE};
pub use netns::NetnsGuard;
pub use run::{run, run_stdin};
pub use sink::count_to_eof;
pub use snapshot::check_snapshot;
pub use tcp::{snd_cwnd, tcp_info};
pub use wait::{wait_for, HUNG};
