//! Delivery at a later time: delay levels ([`delay_levels`], RocketMQ 4's
//! `SCHEDULE_TOPIC_XXXX`) and timer messages ([`timers`], RocketMQ 5's
//! timing wheel, for any delivery time up to `timerMaxDelaySec`).

pub mod delay_levels;
pub(crate) mod floors;
pub mod timers;

pub use delay_levels::{DelayDelivery, DelayOffsets};
pub use timers::TimerService;
