//! `supervision`: the one supervision mechanism of the project.
//!
//! * [`Restarts`]: the restart decisions as plain code: restart types ([`Restart`]),
//!   strategies ([`Strategy`]), restart intensity ([`Intensity`]) with escalation, and
//!   exponential [`Backoff`] reset as the intensity window empties.
//! * [`Supervisor`]: an OTP-style supervisor actor of [`ChildSpec`]s built on those
//!   decisions (the node's tree in `runtime`).
//!
//! `gpu-actor`'s GPU supervisor, which supervises device workers of its own kind, embeds
//! [`Restarts`] too: both kinds of supervisor restart by the same rules.

mod ids;
mod restarts;
mod supervisor;

pub use ids::ChildId;
pub use restarts::{Backoff, Decision, Exit, Intensity, Restart, Restarts, Strategy};
pub use supervisor::{
    ChildSpec, ChildStatus, StartFuture, Supervisor, SupervisorArgs, SupervisorError,
    SupervisorMsg, SupervisorState, spawn_error_reason,
};
