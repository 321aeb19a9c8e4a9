//! The CPUs a capture's workload runs on: pinned to the cores local to the GPU (NVML's CPU
//! affinity of the device, intersected with the CPUs this process may use) unless `--no-pin`,
//! and the facts the run records about them — CPU model, cpufreq governor, current frequency.
//!
//! Pinning is applied by [`crate::process`]: a short-lived thread sets its own affinity and
//! spawns the pass's command, which inherits it (Linux affinity is per thread and survives
//! `fork` and `exec`), so no `unsafe` `pre_exec` and no external `taskset` are needed, and the
//! recorded command line stays the one that ran. Files that are missing (no cpufreq in a VM or
//! container) read as `None`; nothing here fails a capture.

use llmprof_report::stats::median;
use std::path::Path;

/// Where Linux describes each CPU (`cpu<N>/cpufreq/scaling_governor`, `scaling_cur_freq`).
const SYS_CPU: &str = "/sys/devices/system/cpu";
/// The kernel's CPU table (`model name`, `cpu MHz` per `processor`).
const CPUINFO: &str = "/proc/cpuinfo";

/// The CPUs the workload runs on and what is known of them; decided once, in `plan`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuPlan {
    /// The CPUs every pass's workload is pinned to; `None` when it is not pinned.
    pub pinned: Option<Vec<usize>>,
    /// Why it is not pinned (`--no-pin`, NVML unavailable, ...).
    pub note: Option<String>,
    /// `model name` from `/proc/cpuinfo`.
    pub model: Option<String>,
    /// The cpufreq governor of the workload's CPUs, several joined by `, ` when they differ.
    pub governor: Option<String>,
    /// Median current frequency of the workload's CPUs, MHz.
    pub mhz: Option<f64>,
}

impl CpuPlan {
    /// Decides the pinning for GPU `device` (`pin`: not `--no-pin`) and reads the CPU facts of
    /// the CPUs the workload will run on.
    pub fn for_device(device: u32, pin: bool) -> CpuPlan {
        let allowed = allowed_cpus();
        let (pinned, note) = if pin {
            match crate::nvml::cpu_affinity(device) {
                Ok(local) => choose(&local, allowed.as_deref(), device),
                Err(e) => (None, Some(format!("not pinned: {e}"))),
            }
        } else {
            (None, Some("not pinned: --no-pin".into()))
        };
        let cpuinfo = std::fs::read_to_string(CPUINFO).unwrap_or_default();
        let used: Vec<usize> = pinned.clone().or(allowed).unwrap_or_default();
        CpuPlan {
            model: cpu_model(&cpuinfo),
            governor: governor(Path::new(SYS_CPU), &used),
            mhz: mhz(Path::new(SYS_CPU), &used, &cpuinfo),
            pinned,
            note,
        }
    }

    /// One line for `--dry-run`: the model, where the workload runs, governor and frequency.
    pub fn describe(&self) -> String {
        let place = match (&self.pinned, &self.note) {
            (Some(c), _) => format!("pinned to CPUs {} (local to the GPU)", format_list(c)),
            (None, Some(n)) => n.clone(),
            (None, None) => "not pinned".into(),
        };
        format!(
            "{}; {place}; governor {}; {}",
            self.model.as_deref().unwrap_or("CPU model unknown"),
            self.governor.as_deref().unwrap_or("unknown"),
            self.mhz
                .map_or("frequency unknown".into(), |m| format!("{m:.0} MHz now"))
        )
    }
}

/// The pinning from NVML's local CPUs and the CPUs this process may use: their intersection,
/// or a note saying why there is none.
fn choose(
    local: &[usize],
    allowed: Option<&[usize]>,
    device: u32,
) -> (Option<Vec<usize>>, Option<String>) {
    if local.is_empty() {
        return (
            None,
            Some(format!(
                "not pinned: NVML reports no CPU affinity for GPU {device}"
            )),
        );
    }
    let cpus: Vec<usize> = match allowed {
        Some(a) => local.iter().copied().filter(|c| a.contains(c)).collect(),
        None => local.to_vec(),
    };
    if cpus.is_empty() {
        let a = allowed.map(format_list).unwrap_or_default();
        return (
            None,
            Some(format!(
                "not pinned: the CPUs local to GPU {device} ({}) are not among those this \
                 process may use ({a})",
                format_list(local)
            )),
        );
    }
    (Some(cpus), None)
}

/// The CPUs in a mask of 64-bit words, word 0 holding CPUs 0–63 (NVML's affinity layout).
pub fn cpus_from_mask(mask: &[u64]) -> Vec<usize> {
    let mut cpus = Vec::new();
    for (w, word) in mask.iter().enumerate() {
        for bit in 0..64 {
            if word >> bit & 1 == 1 {
                cpus.push(w * 64 + bit);
            }
        }
    }
    cpus
}

/// A cpuset list (`0-15,32-47`) of sorted, distinct CPUs.
pub fn format_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs of a cpuset list (`0-3,8`); `None` when it is malformed.
pub fn parse_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// The CPUs this process may run on (`sched_getaffinity`); `None` where that is unknown.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Option<Vec<usize>> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    let set = sched_getaffinity(Pid::from_raw(0)).ok()?;
    Some(
        (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
    )
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Option<Vec<usize>> {
    None
}

/// The governors of `cpus` under `sys` (`cpu<N>/cpufreq/scaling_governor`), distinct ones joined
/// by `, `; `None` when no CPU has the file.
pub fn governor(sys: &Path, cpus: &[usize]) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for c in cpus {
        let p = sys.join(format!("cpu{c}/cpufreq/scaling_governor"));
        if let Ok(g) = std::fs::read_to_string(p) {
            let g = g.trim().to_string();
            if !g.is_empty() && !seen.contains(&g) {
                seen.push(g);
            }
        }
    }
    (!seen.is_empty()).then(|| seen.join(", "))
}

/// The median current frequency of `cpus` in MHz: cpufreq's `scaling_cur_freq` (kHz) where
/// the files exist, else the `cpu MHz` lines of `/proc/cpuinfo` for those processors.
pub fn mhz(sys: &Path, cpus: &[usize], cpuinfo: &str) -> Option<f64> {
    let mut v: Vec<f64> = cpus
        .iter()
        .filter_map(|c| {
            let p = sys.join(format!("cpu{c}/cpufreq/scaling_cur_freq"));
            let khz: f64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
            (khz.is_finite() && khz > 0.0).then_some(khz / 1000.0)
        })
        .collect();
    if v.is_empty() {
        v = cpuinfo_mhz(cpuinfo)
            .into_iter()
            .filter(|(p, _)| cpus.is_empty() || cpus.contains(p))
            .map(|(_, m)| m)
            .collect();
    }
    median(&v)
}

/// `(processor, cpu MHz)` of every processor block of `/proc/cpuinfo` that has both.
fn cpuinfo_mhz(text: &str) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    let mut processor: Option<usize> = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => processor = v.trim().parse().ok(),
            "cpu MHz" => {
                if let (Some(p), Ok(m)) = (processor, v.trim().parse::<f64>()) {
                    if m.is_finite() && m > 0.0 {
                        out.push((p, m));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The first `model name` of `/proc/cpuinfo`.
fn cpu_model(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name" && !v.trim().is_empty()).then(|| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_lists() {
        // NVML's words: CPUs 0-15 and 32-47 in word 0, 64 in word 1.
        let mask = [0x0000_ffff_0000_ffff_u64, 1];
        let cpus = cpus_from_mask(&mask);
        assert_eq!(format_list(&cpus), "0-15,32-47,64");
        assert_eq!(parse_list("0-15,32-47,64"), Some(cpus));
        assert_eq!(format_list(&[3, 1, 2, 7]), "1-3,7");
        assert_eq!(parse_list(""), Some(vec![]));
        assert_eq!(parse_list("4-2"), None);
        assert_eq!(parse_list("x"), None);
        assert!(cpus_from_mask(&[]).is_empty());
    }

    #[test]
    fn pinning_is_the_intersection_or_a_note() {
        let local: Vec<usize> = (0..8).collect();
        assert_eq!(
            choose(&local, Some(&[2, 3, 9]), 0),
            (Some(vec![2, 3]), None)
        );
        assert_eq!(choose(&local, None, 0).0, Some(local.clone()));
        let (none, note) = choose(&local, Some(&[9, 10]), 1);
        assert!(none.is_none());
        assert_eq!(
            note.as_deref(),
            Some(
                "not pinned: the CPUs local to GPU 1 (0-7) are not among those this process \
                 may use (9-10)"
            )
        );
        assert!(choose(&[], None, 0).1.unwrap().contains("no CPU affinity"));
    }

    /// Text as two Linux hosts wrote it: cpufreq files on one, `/proc/cpuinfo` alone on a VM.
    #[test]
    fn governor_and_frequency_from_sysfs_or_cpuinfo() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        for (c, gov, khz) in [
            (0, "performance\n", "3400000\n"),
            (1, "performance\n", "3100000\n"),
            (2, "powersave\n", "1200000\n"),
        ] {
            let d = sys.join(format!("cpu{c}/cpufreq"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("scaling_governor"), gov).unwrap();
            std::fs::write(d.join("scaling_cur_freq"), khz).unwrap();
        }
        assert_eq!(governor(sys, &[0, 1]).as_deref(), Some("performance"));
        assert_eq!(
            governor(sys, &[0, 1, 2]).as_deref(),
            Some("performance, powersave")
        );
        assert_eq!(mhz(sys, &[0, 1, 2], ""), Some(3100.0));
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\
                       cpu MHz\t\t: 2596.098\n\nprocessor\t: 3\nmodel name\t: AMD EPYC\n\
                       cpu MHz\t\t: 2400.000\n";
        // CPU 3 has no cpufreq directory: /proc/cpuinfo answers for it.
        assert_eq!(governor(sys, &[3]), None);
        assert_eq!(mhz(sys, &[3], cpuinfo), Some(2400.0));
        assert_eq!(mhz(sys, &[], cpuinfo), Some((2596.098 + 2400.0) / 2.0));
        assert_eq!(mhz(sys, &[7], "garbage"), None);
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC"));
        assert_eq!(cpu_model(""), None);
    }

    /// No NVML here: the plan says why it does not pin, and never panics.
    #[test]
    fn without_nvml_the_plan_says_why() {
        let p = CpuPlan::for_device(0, false);
        assert_eq!(p.note.as_deref(), Some("not pinned: --no-pin"));
        assert!(p.describe().contains("not pinned: --no-pin"));
        let p = CpuPlan::for_device(0, true);
        if p.pinned.is_none() {
            assert!(p.note.unwrap().starts_with("not pinned: "));
        }
    }
}
