//! Two lanes with separate bounded queues. Audio work and text work never share a queue or a
//! slot, so a long rewrite can never make an interactive voice operation wait.

mod audio;
mod fleet;
mod monitor;
mod text;

pub use audio::{AudioActivity, AudioLane, AudioLaneConfig};
pub use fleet::{
    Fleet, Member, NoUpstream, UpstreamResult, UpstreamSlot, UpstreamSpec, UpstreamView,
};
pub use monitor::{LaneEvent, LaneMonitor, LaneSnapshot, RejectionRecord};
pub use text::{TextLane, TextLaneConfig, TextStream, WeakTextLane, DEFAULT_CONTEXT_TOKENS};
