//! Emulated service time: what an operator with `service_time_us` spends on top of its logic.

use clasp_core::pipeline::ServiceMode;
use std::time::{Duration, Instant};

/// Makes this thread's sleeps end within ~1 µs of their deadline instead of the default 50 µs
/// timer slack, so emulated sleeps of a few hundred µs are accurate. A kernel that refuses
/// leaves the default slack: sleeps are then less accurate, not wrong.
pub fn tighten_timer_slack() {
    let _ = nix::sys::prctl::set_timerslack(1000);
}

/// Spends `micros` µs: busy-waiting (`Spin`, uses a core like computation) or sleeping
/// (`Sleep`, holds the executor slot only; the last 20 µs are spun for accuracy).
pub fn spend(micros: f64, mode: ServiceMode) {
    if micros <= 0.0 {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs_f64(micros / 1e6);
    if mode == ServiceMode::Sleep && micros > 40.0 {
        std::thread::sleep(Duration::from_secs_f64((micros - 20.0) / 1e6));
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}
