//! Thread priority: the order path first.
//!
//! On a host with as many busy threads as cores, the scheduler decides whose work
//! waits. The gateways, the sequencer and the applier carry orders and keep the
//! priority they start with. A thread of work off that path lowers itself once, at its
//! start, with one of the two functions here, so that it queues behind orders instead
//! of ahead of them. Both are best effort: where the system refuses (or is not Linux)
//! the thread keeps the priority it had. Nothing here raises a priority or changes any
//! thread but the caller.

/// The `nice` value of background work that must keep up with the order flow (keeping
/// the snapshot replica, publishing market data): low enough that the order path runs
/// first when every core is busy, while the work still gets the CPU the order path
/// leaves and a share of a busy one.
pub const BACKGROUND_NICE: i32 = 10;

/// The `nice` value of work that may fall behind and catch up later (the history),
/// where the system refuses `SCHED_IDLE`: the lowest there is.
pub const IDLE_FALLBACK_NICE: i32 = 19;

const _: () = assert!(0 < BACKGROUND_NICE && BACKGROUND_NICE < IDLE_FALLBACK_NICE);
const _: () = assert!(IDLE_FALLBACK_NICE <= 19, "19 is the lowest priority nice gives");

/// Lowers the calling thread to `BACKGROUND_NICE`, for work off the order path that
/// must keep up with it.
pub fn run_in_background() {
    #[cfg(target_os = "linux")]
    // SAFETY: `gettid` has no preconditions; `setpriority` on the calling thread's id
    // changes only that thread's nice value (Linux keeps one per thread).
    unsafe {
        let thread = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, BACKGROUND_NICE);
    }
}

/// Moves the calling thread to `SCHED_IDLE` (it runs only when a core would otherwise
/// idle), or to `IDLE_FALLBACK_NICE` where that is refused: for work that may fall
/// behind under load and catch up when the load drops. Threads it starts afterwards
/// inherit the policy.
pub fn run_when_idle() {
    #[cfg(target_os = "linux")]
    // SAFETY: `sched_setscheduler` and `setpriority` take plain integers and a pointer
    // to a live `sched_param`; with the calling thread's id they change only that thread.
    unsafe {
        let thread = libc::gettid();
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(thread, libc::SCHED_IDLE, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, IDLE_FALLBACK_NICE);
        }
    }
}

#[cfg(test)]
mod tests {
    // What the tests read back (a thread's nice value, SCHED_IDLE) is Linux's.
    #[cfg(target_os = "linux")]
    mod on_linux {
        use crate::priority::*;

        fn nice_of_this_thread() -> i32 {
            // SAFETY: reads the calling thread's nice value; no preconditions.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        }

        fn policy_of_this_thread() -> i32 {
            // SAFETY: reads the calling thread's scheduling policy; no preconditions.
            unsafe { libc::sched_getscheduler(libc::gettid()) }
        }

        /// What `lower` leaves on a fresh thread: its nice value and its policy.
        fn on_a_thread_of_its_own(lower: fn()) -> (i32, i32) {
            std::thread::spawn(move || {
                lower();
                (nice_of_this_thread(), policy_of_this_thread())
            })
            .join()
            .unwrap()
        }

        #[test]
        fn background_work_runs_below_the_order_path_and_only_that_thread_changes() {
            let before = (nice_of_this_thread(), policy_of_this_thread());
            let (nice, policy) = on_a_thread_of_its_own(run_in_background);
            assert!(nice >= BACKGROUND_NICE, "nice {nice}");
            assert_eq!(policy, libc::SCHED_OTHER, "still scheduled with the order path's threads");
            assert_eq!((nice_of_this_thread(), policy_of_this_thread()), before);
        }

        #[test]
        fn idle_work_runs_only_when_a_core_would_idle_and_only_that_thread_changes() {
            let before = (nice_of_this_thread(), policy_of_this_thread());
            let (nice, policy) = on_a_thread_of_its_own(run_when_idle);
            assert!(
                policy == libc::SCHED_IDLE || nice == IDLE_FALLBACK_NICE,
                "policy {policy}, nice {nice}"
            );
            assert_eq!((nice_of_this_thread(), policy_of_this_thread()), before);
        }
    }
}
