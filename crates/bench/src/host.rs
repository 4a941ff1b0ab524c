//! The machine a figure came from: what `bourse bench host` prints and what every
//! benchmark's results carry, so that a figure always names its host. Hosts differ
//! (Intel and AMD guests have given figures 2x apart, and a disk's `fdatasync` bounds
//! every durable figure), so the facts are read here, from `/proc` and `/sys`, and the
//! disk is measured here, by appending and syncing the way the journal does.
//!
//! It reads and measures only; it never changes the machine beyond a scratch file that
//! it removes.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// The host's facts as JSON: CPU model, vendor and logical CPUs, the hypervisor (if
/// any), the caches, the memory and the kernel. Fields that cannot be read are null.
pub fn facts() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    let hypervisor = field("flags").and_then(|flags| {
        flags.split_whitespace().any(|flag| flag == "hypervisor").then(|| {
            hypervisor_vendor()
                .or_else(|| {
                    std::fs::read_to_string("/sys/class/dmi/id/sys_vendor")
                        .ok()
                        .map(|vendor| vendor.trim().to_string())
                })
                .unwrap_or_else(|| "a hypervisor".to_string())
        })
    });
    let memory_gib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|meminfo| {
        let line = meminfo.lines().find_map(|line| line.strip_prefix("MemTotal:"))?;
        let kib: f64 = line.split_whitespace().next()?.parse().ok()?;
        Some((kib / 1024.0 / 1024.0 * 10.0).round() / 10.0)
    });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|release| release.trim().to_string());
    json!({
        "cpu_model": field("model name"),
        "cpu_vendor": field("vendor_id"),
        "cpus": std::thread::available_parallelism().map_or(0, usize::from),
        "hypervisor": hypervisor,
        "caches": caches(),
        "memory_gib": memory_gib,
        "kernel": kernel,
        "os": std::env::consts::OS,
    })
}

/// The hypervisor's name from its CPUID leaf (`KVM`, `Microsoft Hv`, …), as `lscpu`
/// reads it.
#[cfg(target_arch = "x86_64")]
fn hypervisor_vendor() -> Option<String> {
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x4000_0000 is answered by the
    // hypervisor when the `hypervisor` flag is set (the caller checked it).
    #[allow(unused_unsafe)]
    let leaf = unsafe { std::arch::x86_64::__cpuid(0x4000_0000) };
    let bytes: Vec<u8> = [leaf.ebx, leaf.ecx, leaf.edx]
        .iter()
        .flat_map(|word| word.to_le_bytes())
        .take_while(|&byte| byte != 0)
        .collect();
    let name = String::from_utf8_lossy(&bytes);
    let name = match name.trim() {
        "KVMKVMKVM" => "KVM".to_string(),
        "" => return None,
        other => other.to_string(),
    };
    Some(name)
}

#[cfg(not(target_arch = "x86_64"))]
fn hypervisor_vendor() -> Option<String> {
    None
}

/// CPU 0's caches as `L1d 48K`, `L2 1024K`, …, from `/sys` (empty where unreadable).
fn caches() -> Vec<String> {
    let mut caches = Vec::new();
    for index in 0..8 {
        let directory = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let read = |name: &str| {
            std::fs::read_to_string(format!("{directory}/{name}"))
                .ok()
                .map(|text| text.trim().to_string())
        };
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            break;
        };
        let kind = match kind.as_str() {
            "Data" => "d",
            "Instruction" => "i",
            _ => "",
        };
        caches.push(format!("L{level}{kind} {size}"));
    }
    caches
}

/// One line naming the host, for the top of a benchmark's output.
pub fn summary_line(facts: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or("unknown").to_string();
    let mut line = format!("{}, {} CPUs", text(&facts["cpu_model"]), facts["cpus"]);
    if let Some(hypervisor) = facts["hypervisor"].as_str() {
        line.push_str(&format!(" ({hypervisor} guest)"));
    }
    if let Some(memory) = facts["memory_gib"].as_f64() {
        line.push_str(&format!(", {memory} GiB"));
    }
    line
}

/// The latency of `fdatasync` after appending `bytes` to a file, as the journal does
/// per batch: `syncs` samples in a scratch file in `directory` (removed after).
pub struct SyncFigures {
    pub syncs: u64,
    pub bytes: usize,
    pub latency_ns: Histogram<u64>,
}

impl SyncFigures {
    pub fn to_json(&self) -> Value {
        let at = |quantile: f64| self.latency_ns.value_at_quantile(quantile) as f64 / 1_000.0;
        json!({
            "syncs": self.syncs,
            "bytes_per_sync": self.bytes,
            "p50_us": at(0.5),
            "p99_us": at(0.99),
            "p99_9_us": at(0.999),
            "max_us": self.latency_ns.max() as f64 / 1_000.0,
            "mean_us": self.latency_ns.mean() / 1_000.0,
        })
    }
}

pub fn fdatasync_latency(
    directory: &Path,
    syncs: u64,
    bytes: usize,
) -> Result<SyncFigures, String> {
    std::fs::create_dir_all(directory)
        .map_err(|error| format!("cannot make {}: {error}", directory.display()))?;
    let path = directory.join(format!(".bourse-bench-host-{}", std::process::id()));
    let measured = measure_syncs(&path, syncs, bytes);
    let _ = std::fs::remove_file(&path);
    measured
}

fn measure_syncs(path: &Path, syncs: u64, bytes: usize) -> Result<SyncFigures, String> {
    let failed = |error: std::io::Error| format!("{}: {error}", path.display());
    let mut file =
        std::fs::OpenOptions::new().create_new(true).append(true).open(path).map_err(failed)?;
    let mut latency_ns = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| error.to_string())?;
    let block = vec![0x5a_u8; bytes];
    // One sync first: the file's creation is not what is measured.
    file.write_all(&block).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    for _ in 0..syncs {
        file.write_all(&block).map_err(failed)?;
        let started = Instant::now();
        file.sync_data().map_err(failed)?;
        let took = started.elapsed().max(Duration::from_nanos(1));
        latency_ns.saturating_record(took.as_nanos().min(u128::from(u64::MAX)) as u64);
    }
    Ok(SyncFigures { syncs, bytes, latency_ns })
}

/// A process's use of the CPUs so far: its CPU time and its context switches
/// (voluntary: a thread went to sleep, to be woken later; involuntary: it was
/// preempted).
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user: Duration,
    pub system: Duration,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl Usage {
    /// This process's, from `getrusage` (every thread, ended ones included).
    pub fn own() -> Usage {
        // SAFETY: `getrusage` writes the struct it is given and nothing else.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
                return Usage::default();
            }
            usage
        };
        let time = |value: libc::timeval| {
            Duration::from_secs(value.tv_sec.max(0) as u64)
                + Duration::from_micros(value.tv_usec.max(0) as u64)
        };
        Usage {
            user: time(usage.ru_utime),
            system: time(usage.ru_stime),
            voluntary_switches: usage.ru_nvcsw.max(0) as u64,
            involuntary_switches: usage.ru_nivcsw.max(0) as u64,
        }
    }

    /// Process `pid`'s, from `/proc/PID/stat` and `/proc/PID/task/*/status` (the
    /// switches of threads that ended before the call are not counted).
    pub fn of_process(pid: u32) -> Result<Usage, String> {
        let path = format!("/proc/{pid}/stat");
        let stat = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {path} ({error}); is the process running?"))?;
        // The command name may hold spaces and parentheses: fields count from the last
        // ')'; utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |index: usize| -> Result<u64, String> {
            fields
                .get(index)
                .and_then(|field| field.parse().ok())
                .ok_or_else(|| format!("{path}: no CPU times in it"))
        };
        // SAFETY: `sysconf` reads a constant of the system.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let time = |ticks: u64| Duration::from_nanos(ticks * 1_000_000_000 / per_second);
        let mut usage =
            Usage { user: time(ticks(11)?), system: time(ticks(12)?), ..Usage::default() };
        let tasks = format!("/proc/{pid}/task");
        let entries = std::fs::read_dir(&tasks)
            .map_err(|error| format!("cannot read {tasks} ({error}); is the process running?"))?;
        for entry in entries.flatten() {
            let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
            for line in status.lines() {
                let count = |rest: &str| rest.trim().parse::<u64>().unwrap_or(0);
                if let Some(rest) = line.strip_prefix("voluntary_ctxt_switches:") {
                    usage.voluntary_switches += count(rest);
                } else if let Some(rest) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    usage.involuntary_switches += count(rest);
                }
            }
        }
        Ok(usage)
    }

    /// What was used from `self` to `later`, over `elapsed` on a machine of `cpus`, as
    /// JSON: user and system seconds, the share of one CPU and of the machine, and
    /// context switches per second.
    pub fn since(&self, later: &Usage, elapsed: Duration, cpus: usize) -> Value {
        let user = later.user.saturating_sub(self.user);
        let system = later.system.saturating_sub(self.system);
        let wall = elapsed.as_secs_f64().max(1e-9);
        let busy = (user + system).as_secs_f64();
        let rate = |from: u64, to: u64| (to.saturating_sub(from) as f64 / wall).round();
        let thousandths = |value: f64| (value * 1000.0).round() / 1000.0;
        json!({
            "user_s": thousandths(user.as_secs_f64()),
            "system_s": thousandths(system.as_secs_f64()),
            "share_of_one_cpu": thousandths(busy / wall),
            "share_of_machine": thousandths(busy / wall / cpus.max(1) as f64),
            "context_switches_per_sec": {
                "voluntary": rate(self.voluntary_switches, later.voluntary_switches),
                "involuntary": rate(self.involuntary_switches, later.involuntary_switches),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_name_the_cpu_and_count_them() {
        let facts = facts();
        assert!(facts["cpus"].as_u64().is_some_and(|cpus| cpus >= 1), "{facts}");
        if cfg!(target_os = "linux") {
            assert!(facts["cpu_model"].is_string(), "{facts}");
            assert!(facts["memory_gib"].as_f64().is_some_and(|gib| gib > 0.0), "{facts}");
        }
        assert!(summary_line(&facts).contains("CPUs"));
    }

    #[test]
    fn syncs_are_measured_and_the_scratch_file_removed() {
        let directory = tempfile::tempdir().unwrap();
        let figures = fdatasync_latency(directory.path(), 20, 4096).unwrap();
        assert_eq!(figures.latency_ns.len(), 20);
        assert!(figures.latency_ns.min() >= 1);
        let json = figures.to_json();
        assert!(json["p99_us"].as_f64().unwrap() >= json["p50_us"].as_f64().unwrap());
        assert_eq!(std::fs::read_dir(directory.path()).unwrap().count(), 0);
    }

    #[test]
    fn usage_is_read_for_this_process_both_ways() {
        let spin = Instant::now();
        let mut sum = 0u64;
        while spin.elapsed() < Duration::from_millis(30) {
            sum = sum.wrapping_add(std::hint::black_box(1));
        }
        let own = Usage::own();
        assert!(own.user + own.system >= Duration::from_millis(10), "{own:?} {sum}");
        let before = Usage::of_process(std::process::id()).unwrap();
        assert!(before.user + before.system >= Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(2));
        let after = Usage::of_process(std::process::id()).unwrap();
        assert!(after.voluntary_switches > before.voluntary_switches, "a sleep is a switch");
        assert!(Usage::own().voluntary_switches > 0);
        assert!(Usage::of_process(u32::MAX).is_err());
        let end = Usage {
            user: Duration::from_millis(500),
            system: Duration::from_millis(500),
            voluntary_switches: 400,
            involuntary_switches: 10,
        };
        let share = Usage::default().since(&end, Duration::from_secs(2), 2);
        assert_eq!(
            (share["share_of_one_cpu"].as_f64(), share["share_of_machine"].as_f64()),
            (Some(0.5), Some(0.25))
        );
        assert_eq!(share["context_switches_per_sec"]["voluntary"].as_f64(), Some(200.0));
    }
}

/// `bourse bench host`.
#[derive(clap::Args)]
pub struct HostArgs {
    /// Where to measure `fdatasync` (the data directory's disk: the default, `./data`,
    /// is where `bourse serve` keeps its journal).
    #[arg(long, default_value = "./data")]
    pub dir: std::path::PathBuf,
    /// How many appends with an `fdatasync` each to time.
    #[arg(long, default_value_t = 2_000)]
    pub syncs: u64,
    /// Bytes appended before each sync (a journal batch of about 50 orders).
    #[arg(long, default_value_t = 4_096)]
    pub bytes: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &HostArgs) -> Result<(), String> {
    let facts = facts();
    let syncs = fdatasync_latency(&args.dir, args.syncs, args.bytes)?;
    let sync_json = syncs.to_json();
    if args.json {
        let mut all = facts;
        all["fdatasync"] = sync_json;
        all["fdatasync"]["dir"] = json!(args.dir.display().to_string());
        println!("{all}");
        return Ok(());
    }
    println!("host: {}", summary_line(&facts));
    let text = |value: &Value| value.as_str().map_or("unknown".to_string(), str::to_string);
    println!("cpu vendor: {}", text(&facts["cpu_vendor"]));
    if let Some(caches) = facts["caches"].as_array().filter(|caches| !caches.is_empty()) {
        let caches: Vec<String> = caches.iter().map(text).collect();
        println!("caches (cpu 0): {}", caches.join(", "));
    }
    println!("kernel: {} ({})", text(&facts["kernel"]), text(&facts["os"]));
    println!(
        "fdatasync after a {}-byte append in {}: p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs, max {:.0} µs ({} syncs)",
        args.bytes,
        args.dir.display(),
        sync_json["p50_us"].as_f64().unwrap_or(0.0),
        sync_json["p99_us"].as_f64().unwrap_or(0.0),
        sync_json["p99_9_us"].as_f64().unwrap_or(0.0),
        sync_json["max_us"].as_f64().unwrap_or(0.0),
        args.syncs,
    );
    Ok(())
}
