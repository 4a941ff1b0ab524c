//! `bourse loadgen --watch-pid PID`: the resident memory of another process (the
//! server), read from `/proc/PID/status` once a second alongside the timeline, so that a
//! long run shows whether the server's memory settles or keeps growing.

use serde_json::{json, Value};

/// The resident set size (`VmRSS`) of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|error| {
        format!("--watch-pid {pid}: cannot read {path} ({error}); is the process running?")
    })?;
    vm_rss_kib(&status).ok_or_else(|| {
        format!("--watch-pid {pid}: {path} gives no VmRSS (a kernel thread, or a process exiting?)")
    })
}

/// `VmRSS:     1234 kB` in the text of a `/proc/PID/status`.
fn vm_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|line| line.strip_prefix("VmRSS:"))?;
    let mut words = line.split_whitespace();
    let value = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(value)
}

/// `server_rss_kib` of the results: the first sample (taken before the load), the last
/// (after it) and the largest of all, with those of the timeline between.
pub fn summary(pid: u32, before: Option<u64>, timeline: &[Value], after: Option<u64>) -> Value {
    let samples: Vec<u64> = before
        .into_iter()
        .chain(timeline.iter().filter_map(|second| second["rss_kib"].as_u64()))
        .chain(after)
        .collect();
    json!({
        "pid": pid,
        "first": samples.first(),
        "last": samples.last(),
        "max": samples.iter().max(),
        "samples": samples.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss_and_refuses_what_is_not_it() {
        let status = "Name:\tbourse\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_kib(status), Some(1234));
        assert_eq!(vm_rss_kib("Name:\tkthreadd\n"), None);
        assert_eq!(vm_rss_kib("VmRSS:\tlots kB\n"), None);
        assert_eq!(vm_rss_kib("VmRSS:\t12 MB\n"), None);
    }

    #[test]
    fn this_process_has_a_resident_size_and_a_missing_one_is_an_error() {
        assert!(rss_kib(std::process::id()).is_ok_and(|kib| kib > 0));
        let error = rss_kib(u32::MAX).unwrap_err();
        assert!(error.contains("cannot read /proc/4294967295/status"), "{error}");
    }

    #[test]
    fn the_summary_takes_first_last_and_max_over_every_sample() {
        let timeline = [json!({ "rss_kib": 300 }), json!({ "rss_kib": null }), json!({})];
        let summary = summary(7, Some(100), &timeline, Some(200));
        assert_eq!(summary, json!({"pid": 7, "first": 100, "last": 200, "max": 300, "samples": 3}));
        let empty = super::summary(7, None, &[], None);
        assert!(empty["max"].is_null());
    }
}
