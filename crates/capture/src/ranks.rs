//! `--nproc N`: a target run with tensor parallelism under torchrun, one process per GPU.
//!
//! Every pass starts the driver as `python -m torch.distributed.run --standalone
//! --nproc-per-node N driver.py plan.json` with `CUDA_VISIBLE_DEVICES` set to `--devices` (in
//! rank order), so rank r uses the r-th listed GPU. The driver loads the model sharded with
//! Hugging Face's `tp_plan="auto"` from a random-weight checkpoint rank 0 saves first
//! ([`checkpoint_dir`]). Profilers wrap the whole launcher (nsys follows every rank), except
//! Nsight Compute, which profiles one rank ([`ncu_on_rank`]). torchrun stops every rank when one
//! fails, so a crashed rank ends the pass; a rank left waiting in a collective fails after the
//! process group's timeout, and [`group_failure`] reads from the launcher's log which rank
//! timed out and which one torchrun had to kill.

use std::path::{Path, PathBuf};

use crate::nvml::Gpu;
use crate::CaptureError;

/// The ranks of a `--nproc` capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranks {
    pub nproc: u32,
    /// CUDA device indexes, rank order (`--devices`, default `0..nproc`).
    pub devices: Vec<u32>,
    /// The rank Nsight Compute profiles (`--rank`, default 0).
    pub ncu_rank: u32,
}

/// Ranks one capture may start.
pub const MAX_NPROC: u32 = 64;

impl Ranks {
    /// Checks `--nproc`, `--devices` and `--rank` together.
    pub fn new(nproc: u32, devices: Vec<u32>, ncu_rank: Option<u32>) -> Result<Self, CaptureError> {
        let bad = |m: String| Err(CaptureError::Environment(m));
        if !(1..=MAX_NPROC).contains(&nproc) {
            return bad(format!(
                "--nproc {nproc}: give 1 to {MAX_NPROC} processes, one per GPU"
            ));
        }
        let devices = if devices.is_empty() {
            (0..nproc).collect()
        } else {
            devices
        };
        if devices.len() != nproc as usize {
            return bad(format!(
                "--devices lists {} GPU(s) but --nproc is {nproc}: list one GPU per rank, in \
                 rank order (--devices 0,1)",
                devices.len()
            ));
        }
        let mut sorted = devices.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!(
                "--devices names GPU {} twice: NCCL needs one GPU per rank",
                w[0]
            ));
        }
        let ncu_rank = ncu_rank.unwrap_or(0);
        if ncu_rank >= nproc {
            return bad(format!(
                "--rank {ncu_rank}: ranks are 0 to {} with --nproc {nproc}",
                nproc - 1
            ));
        }
        Ok(Ranks {
            nproc,
            devices,
            ncu_rank,
        })
    }

    /// `CUDA_VISIBLE_DEVICES` for the launcher.
    pub fn visible_devices(&self) -> String {
        let d: Vec<String> = self.devices.iter().map(u32::to_string).collect();
        d.join(",")
    }

    /// The launcher's words before the driver: `python -m torch.distributed.run …`.
    pub fn launcher(&self, python: &Path) -> Vec<String> {
        vec![
            python.display().to_string(),
            "-m".into(),
            "torch.distributed.run".into(),
            "--standalone".into(),
            "--nproc-per-node".into(),
            self.nproc.to_string(),
        ]
    }

    /// A launched command split into the launcher and what one rank runs (`python driver.py
    /// plan.json`); `None` when `command` is not [`Ranks::launcher`]'s.
    pub fn split_launched(&self, command: &[String]) -> Option<(Vec<String>, Vec<String>)> {
        let launcher = self.launcher(Path::new(command.first()?));
        let rest = command.strip_prefix(launcher.as_slice())?;
        let mut rank_cmd = vec![launcher[0].clone()];
        rank_cmd.extend(rest.iter().cloned());
        Some((launcher, rank_cmd))
    }

    /// The plan's `distributed` object for the driver: `collective_timeout_s` is the process
    /// group's timeout (the target's `[run] collective_timeout_s`).
    pub fn plan_json(&self, work_dir: &Path, collective_timeout_s: u64) -> serde_json::Value {
        serde_json::json!({
            "nproc": self.nproc,
            "checkpoint": checkpoint_dir(work_dir),
            "collective_timeout_s": collective_timeout_s,
        })
    }

    /// What the run records of its ranks.
    pub fn record(&self) -> llmprof_bundle::CaptureRanks {
        llmprof_bundle::CaptureRanks {
            nproc: self.nproc,
            devices: self.devices.clone(),
            ncu_rank: self.ncu_rank,
            launcher: format!(
                "torch.distributed.run --standalone --nproc-per-node {}",
                self.nproc
            ),
            rank: None,
            note: "rank 0's outputs are in raw/<pass>/, rank r's in raw/ranks/<r>/<pass>/ (one \
                   Nsight Systems report traces every rank); each rank's run is in \
                   ranks/<r>/, and the run's tables pool the ranks"
                .into(),
        }
    }

    /// One line for `--dry-run` and the capture's description.
    pub fn describe(&self) -> String {
        format!(
            "ranks    {} under torchrun (tensor parallel, tp_plan=auto) on GPU(s) {}; ncu on rank {}\n",
            self.nproc,
            self.visible_devices(),
            self.ncu_rank
        )
    }
}

/// The directory under `raw/` that holds ranks 1.. of a `--nproc` capture.
pub const RANKS_RAW_DIR: &str = "ranks";

/// Rank `rank`'s raw directory: `raw/` for rank 0, `raw/ranks/<r>/` for rank r, where the
/// driver writes what rank 0 writes to `raw/<pass>/` (so each reads like one process's `raw/`).
pub fn rank_raw(raw: &Path, rank: u32) -> PathBuf {
    if rank == 0 {
        raw.to_path_buf()
    } else {
        raw.join(RANKS_RAW_DIR).join(rank.to_string())
    }
}

/// Where rank 0 saves the random-weight checkpoint every rank loads sharded (once per capture;
/// removed when the capture ends).
pub fn checkpoint_dir(work_dir: &Path) -> PathBuf {
    work_dir.join("tp-checkpoint")
}

/// The ncu pass under torchrun: rank `rank` runs `ncu_args` followed by its driver command,
/// every other rank the driver command alone (`torchrun --no-python sh -c …`).
pub fn ncu_on_rank(
    launcher: &[String],
    ncu_args: &[String],
    rank_cmd: &[String],
    rank: u32,
) -> Vec<String> {
    // sh -c SCRIPT sh RANK K WORDS…: the last K words are the driver command.
    const SCRIPT: &str = "r=$1; k=$2; shift 2; \
        if [ \"$RANK\" != \"$r\" ]; then shift $(($# - k)); fi; exec \"$@\"";
    let mut c = launcher.to_vec();
    // `--no-python` goes before the script, among torchrun's own options.
    c.extend([
        "--no-python".into(),
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
    ]);
    c.extend(["sh".into(), rank.to_string(), rank_cmd.len().to_string()]);
    c.extend(ncu_args.iter().cloned());
    c.extend(rank_cmd.iter().cloned());
    c
}

/// Why a torchrun group failed when no driver said so itself (a rank aborted or was killed),
/// from the launcher's log: the NCCL watchdog's timeout (the rank that waited, for what, how
/// long), the ranks torchrun had to kill because they ignored SIGTERM (stuck, most likely the
/// one the others waited for), else torchrun's root cause (`rank 0: Signal 6 (SIGABRT)`).
/// `None` when the log has none of these.
pub fn group_failure(log: &str) -> Option<String> {
    let failures = torchrun_failures(log);
    let rank_of_pid = |pid: &str| {
        failures
            .iter()
            .find(|f| f.pid.as_deref() == Some(pid))
            .map(|f| f.rank)
    };
    let mut parts = Vec::new();
    if let Some(w) = log.lines().find_map(watchdog_timeout) {
        parts.push(w);
    }
    // torchrun: "Unable to shutdown process 8036 via 15, forcefully exiting via 9".
    let killed: Vec<String> = log
        .lines()
        .filter_map(|l| l.split("Unable to shutdown process ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|pid| match rank_of_pid(pid) {
            Some(r) => format!("rank {r}"),
            None => format!("pid {pid}"),
        })
        .collect();
    if !killed.is_empty() {
        parts.push(format!(
            "{} did not stop on SIGTERM and was killed: stuck",
            killed.join(", ")
        ));
    }
    if parts.is_empty() {
        let root = failures.iter().find(|f| f.root_cause)?;
        parts.push(format!("rank {} failed: {}", root.rank, root.traceback));
    }
    Some(parts.join("; "))
}

/// `[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2,
/// OpType=ALLREDUCE, …, Timeout(ms)=30000) ran for 30041 milliseconds before timing out.` as
/// "rank 0 waited 30.0 s in ALLREDUCE #2, which its peers never joined (NCCL watchdog)".
fn watchdog_timeout(line: &str) -> Option<String> {
    let (head, work) = line.split_once("Watchdog caught collective operation timeout: ")?;
    let rank = head.rsplit("[Rank ").next()?.split(']').next()?.trim();
    let field = |key: &str| {
        work.split(['(', ',', ')'])
            .find_map(|f| f.trim().strip_prefix(key))
    };
    let op = field("OpType=").unwrap_or("a collective");
    let seq = field("SeqNum=").map_or(String::new(), |n| format!(" #{n}"));
    let waited = work
        .split("ran for ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(String::new(), |ms| format!(" {:.1} s", ms / 1000.0));
    Some(format!(
        "rank {rank} waited{waited} in {op}{seq}, which its peers never joined (NCCL watchdog)"
    ))
}

/// One rank in torchrun's closing `Failures:` / `Root Cause` report.
struct TorchrunFailure {
    rank: u32,
    pid: Option<String>,
    traceback: String,
    root_cause: bool,
}

/// The ranks torchrun's closing report lists (`rank : 1 (local_rank: 1)`, `exitcode : -9 (pid:
/// 8036)`, `traceback : Signal 9 (SIGKILL) …`), the ones under `Root Cause` marked.
fn torchrun_failures(log: &str) -> Vec<TorchrunFailure> {
    let mut out: Vec<TorchrunFailure> = Vec::new();
    let mut root_cause = false;
    for line in log.lines().map(str::trim) {
        if line.starts_with("Root Cause") {
            root_cause = true;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "rank" => {
                if let Some(rank) = value.split_whitespace().next().and_then(|r| r.parse().ok()) {
                    out.push(TorchrunFailure {
                        rank,
                        pid: None,
                        traceback: String::new(),
                        root_cause,
                    });
                }
            }
            "exitcode" => {
                if let Some(f) = out.last_mut() {
                    f.pid = value
                        .split("pid: ")
                        .nth(1)
                        .map(|p| p.trim_end_matches(')').to_string());
                }
            }
            "traceback" => {
                if let Some(f) = out.last_mut() {
                    f.traceback = value.to_string();
                }
            }
            _ => {}
        }
    }
    out
}

/// Problems with the GPUs the ranks would use, from NVML's names and MIG modes: a missing
/// index, GPUs of different models (the ranks would run at the slowest one's pace), MIG
/// enabled (an instance is not the whole GPU and NCCL cannot span instances).
pub fn device_problems(devices: &[u32], gpus: &[Gpu]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names: Vec<(u32, &str)> = Vec::new();
    for &d in devices {
        match gpus.iter().find(|g| g.index == d) {
            Some(Gpu {
                name: Ok(name),
                mig_enabled,
                ..
            }) => {
                if *mig_enabled {
                    problems.push(format!(
                        "GPU {d} ({name}) has MIG enabled: a rank needs a whole GPU; pick \
                         others with --devices"
                    ));
                }
                names.push((d, name));
            }
            Some(Gpu { name: Err(e), .. }) => problems.push(format!("GPU {d}: {e}")),
            None => problems.push(format!("GPU {d} is not among the GPUs NVML sees")),
        }
    }
    if let Some((d, other)) = names.iter().find(|(_, n)| *n != names[0].1) {
        problems.push(format!(
            "mismatched GPUs: GPU {} is {} but GPU {d} is {other}; the ranks would wait for \
             the slowest",
            names[0].0, names[0].1
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_default_to_the_first_n_and_are_checked() {
        let r = Ranks::new(2, vec![], None).unwrap();
        assert_eq!((r.visible_devices(), r.ncu_rank), ("0,1".into(), 0));
        let err = |n, d: Vec<u32>, k| Ranks::new(n, d, k).unwrap_err().to_string();
        assert!(err(2, vec![0], None).contains("lists 1 GPU(s) but --nproc is 2"));
        assert!(err(2, vec![1, 1], None).contains("names GPU 1 twice"));
        assert!(err(2, vec![], Some(2)).contains("ranks are 0 to 1"));
        assert!(err(0, vec![], None).contains("give 1 to 64"));
    }

    #[test]
    fn the_driver_plan_names_the_checkpoint_and_the_collective_timeout() {
        let r = Ranks::new(2, vec![], None).unwrap();
        let doc = r.plan_json(Path::new("/w"), 45);
        assert_eq!(doc["nproc"], 2);
        assert_eq!(doc["checkpoint"], "/w/tp-checkpoint");
        assert_eq!(doc["collective_timeout_s"], 45);
    }

    #[test]
    fn ncu_runs_on_one_rank_only() {
        let r = Ranks::new(2, vec![2, 3], Some(1)).unwrap();
        let launcher = r.launcher(Path::new("/usr/bin/python3"));
        let rank_cmd = vec!["/usr/bin/python3".into(), "d.py".into(), "p.json".into()];
        let c = ncu_on_rank(&launcher, &["ncu".into(), "--csv".into()], &rank_cmd, 1);
        let script = c[9].clone();
        assert_eq!(&c[..6], &launcher[..]);
        assert_eq!(&c[6..9], &["--no-python", "sh", "-c"]);
        assert_eq!(&c[10..13], &["sh", "1", "3"]);
        assert_eq!(
            &c[13..],
            &["ncu", "--csv", "/usr/bin/python3", "d.py", "p.json"]
        );
        // What each rank execs, through a real sh: the profiled rank every word, the others
        // the last K (here `echo plain`).
        let run = |rank: &str| {
            let words = ["1", "2", "echo", "profiled", "echo", "plain"];
            let out = std::process::Command::new("sh")
                .args(["-c", &script, "sh"])
                .args(words)
                .env("RANK", rank)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(run("1"), "profiled echo plain");
        assert_eq!(run("0"), "plain");
    }

    #[test]
    fn mig_missing_and_mismatched_gpus_are_problems() {
        let gpu = |index, name: &str, mig_enabled| Gpu {
            index,
            name: Ok(name.to_string()),
            mig_enabled,
        };
        let gpus = vec![
            gpu(0, "NVIDIA H200", false),
            gpu(1, "NVIDIA H100 80GB HBM3", false),
            gpu(2, "NVIDIA H200", true),
        ];
        assert!(device_problems(&[0, 2], &gpus)[0].contains("GPU 2 (NVIDIA H200) has MIG"));
        assert!(device_problems(&[0, 1], &gpus)[0].contains("mismatched GPUs"));
        assert!(device_problems(&[0, 5], &gpus)[0].contains("GPU 5 is not among"));
        assert!(device_problems(&[0], &gpus).is_empty());
    }
}
