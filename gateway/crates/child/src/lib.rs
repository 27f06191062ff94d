//! perigee-child: the machinery the gateway daemon uses to run a service (Squid, unbound) as
//! its child, written once. A service crate describes its program in a [`Service`] (how to
//! check a rendered config, start it in the foreground, tell that it serves, shut it down);
//! the [`Supervisor`] does the rest the same way for both: a candidate config goes through the
//! program's own check before it replaces the live one, a start waits until the program
//! serves, a child that died is noticed and restarted with the last applied config, a stop is
//! graceful first and forced after a grace period.
//!
//! `error`: the control protocol's error object both services answer with.

mod error;
mod supervisor;
mod users;

pub use error::{error_body, method_not_allowed, not_found, ServiceError};
pub use supervisor::{
    candidate_of, ApplyAction, Installed, RestartFailed, Running, Service, Supervisor,
};
pub use users::lookup_user;
