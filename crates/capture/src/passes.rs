//! Running the passes of a capture plan, keeping every artifact, and writing the record of it.
//!
//! [`run`] prepares a [`Session`] (the working directory, the driver, how the workload starts),
//! runs each pass of the plan in order through [`run_pass`] — what sets one kind of pass apart
//! (the profiler it runs under, its output, what follows it) is in [`kinds`] — and then turns
//! what the passes left into the capture record ([`record`]). With `--repeats auto`, [`auto`]
//! then adds baseline passes until the baseline's confidence intervals are narrow enough.

mod auto;
mod kinds;
mod record;

use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprof_bundle::{Capture, NvmlSeries, Window};
use llmprof_store::RAW_DIR;
use serde_json::json;

use crate::nvml::{now_ns, Sampler};
use crate::process::{self, Job, Stopped};
use crate::{disk_full_message, CaptureError, CommandWorkload, Interrupt, Plan, Target};

/// The workload driver, embedded so a bare `cargo install` can capture.
const DRIVER: &str = include_str!("driver/driver.py");

/// What a capture left, for ingest.
#[derive(Debug)]
pub struct CaptureOutput {
    /// The capture's working directory (holds `raw/`).
    pub work_dir: PathBuf,
    pub raw_dir: PathBuf,
    pub kineto: Option<PathBuf>,
    pub nsys_sqlite: Option<PathBuf>,
    pub ncu_csv: Option<PathBuf>,
    /// The run metadata for ingest (token counts, counted FLOPs); `None` for `--cmd`.
    pub metadata: Option<PathBuf>,
    pub model_config: Option<PathBuf>,
    /// The run's capture record: for a `--nproc` capture of several ranks, the whole group's
    /// (baseline and overhead per iteration of the slowest rank, energy summed over the GPUs);
    /// each rank's own is in [`CaptureOutput::ranks`].
    pub capture: Capture,
    /// Rank 0's GPU's samples (the only GPU's for one process).
    pub nvml: Option<NvmlSeries>,
    /// Every rank of a `--nproc` capture of two or more, rank 0 first; empty for one process.
    pub ranks: Vec<RankOutput>,
}

/// One rank of a `--nproc` capture: where its outputs are, its GPU's NVML samples and its own
/// capture record (baseline, overhead, memory and energy from its files and its GPU).
#[derive(Debug)]
pub struct RankOutput {
    pub rank: u32,
    /// `raw/` for rank 0, `raw/ranks/<r>/` for rank r: each reads like one process's `raw/`.
    pub raw_dir: PathBuf,
    pub kineto: Option<PathBuf>,
    /// The rank's run metadata for ingest (`<raw_dir>/metadata.json`).
    pub metadata: Option<PathBuf>,
    pub capture: Capture,
    pub nvml: Option<NvmlSeries>,
}

/// Seconds a `--cmd` pass may run unless `--timeout` says otherwise.
const COMMAND_TIMEOUT_S: u64 = 3600;

/// Runs every pass the plan lists. A failed pass is recorded and the others still run; only
/// when every pass fails is it an error. Nothing is deleted on failure. When `interrupt` fires
/// the running pass is stopped, no further pass starts, and what was captured is returned with
/// `capture.interrupted` set.
pub fn run(
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
    interrupt: &Interrupt,
) -> Result<CaptureOutput, CaptureError> {
    let session = Session::prepare(plan, interrupt)?;
    let model_config = session.write_model_config();
    let mut state = State::new(record::capture_record(plan, plan.name()));
    // Every GPU in use is sampled: the ranks' in rank order, else the one device.
    let ranks = plan.opts.ranks.as_ref();
    let devices = ranks.map_or(vec![plan.opts.device], |r| r.devices.clone());
    let samplers: Vec<Option<Sampler>> = devices
        .iter()
        .map(|&d| match Sampler::start(d, Duration::from_millis(20)) {
            Ok(s) => Some(s),
            Err(e) => {
                let of = if ranks.is_some() {
                    format!(" of GPU {d}")
                } else {
                    String::new()
                };
                state.capture.missing.push(format!("NVML samples{of}: {e}"));
                None
            }
        })
        .collect();
    for &pass in &plan.passes {
        run_pass(&session, &mut state, pass, progress)?;
        if state.disk_full {
            break;
        }
    }
    if let Some(rule) = plan.opts.auto_repeats {
        auto::run_rounds(&session, &mut state, rule, progress)?;
    }
    if plan.opts.ranks.is_some() {
        // Random weights every capture can make again: not worth keeping in the run.
        let _ = std::fs::remove_dir_all(crate::ranks::checkpoint_dir(&session.work_dir));
    }
    // Ctrl-C between two passes stops the capture as well.
    if interrupt.is_set() {
        state.capture.interrupted = true;
    }
    let nvml: Vec<Option<NvmlSeries>> = samplers
        .into_iter()
        .map(|s| {
            s.map(|s| {
                let mut series = s.stop();
                series.windows = state.windows.clone();
                series
            })
        })
        .collect();
    state.note_not_run();
    record::finish(&session, state, nvml, model_config)
}

/// What every pass reads: the plan, where its files go and how the workload starts.
struct Session<'a> {
    plan: &'a Plan,
    /// `<out>/.capture-<name>-<ms>/`: the capture's working directory.
    work_dir: PathBuf,
    /// `work_dir/raw/`: one directory per pass.
    raw: PathBuf,
    /// `None` only for a plan with neither a usable target nor a command: no pass runs.
    workload: Option<Workload<'a>>,
    /// The target's `[run] repeats` or `--repeats`.
    repeats: u64,
    /// How long one pass may run.
    timeout: Duration,
    interrupt: &'a Interrupt,
}

/// How a pass starts the workload.
enum Workload<'a> {
    /// The embedded driver (`work_dir/driver.py`) under the target's Python, with a plan file
    /// per pass.
    Driver {
        target: &'a Target,
        python: &'a Path,
        driver: PathBuf,
    },
    /// The user's command with `sh -c`, told the pass by `LLMPROF_*` variables.
    Command(&'a CommandWorkload),
}

/// A pass's command line, ready to run.
struct PassCommand {
    /// `raw/<pass>/`.
    out: PathBuf,
    command: Vec<String>,
    env: Vec<(String, String)>,
    /// Where stdout goes (ncu's CSV); `None`: the log.
    stdout_to: Option<PathBuf>,
}

impl<'a> Session<'a> {
    /// Makes the working directory (the driver wants absolute paths) and writes the driver.
    fn prepare(plan: &'a Plan, interrupt: &'a Interrupt) -> Result<Self, CaptureError> {
        let python = match &plan.python {
            Some(Ok(p)) => Some(p.path.as_path()),
            Some(Err(e)) => return Err(CaptureError::Environment(e.clone())),
            None => None,
        };
        let target = plan.target.as_ref();
        let early = |path: &Path, e| write_error(path, e, None);
        std::fs::create_dir_all(&plan.opts.out).map_err(|e| early(&plan.opts.out, e))?;
        let out_root =
            std::fs::canonicalize(&plan.opts.out).map_err(|e| early(&plan.opts.out, e))?;
        let work_dir = out_root.join(format!(".capture-{}-{}", plan.name(), now_ns() / 1_000_000));
        let raw = work_dir.join(RAW_DIR);
        std::fs::create_dir_all(&raw).map_err(|e| write_error(&raw, e, Some(&work_dir)))?;
        let workload = match (target, python, &plan.command) {
            (Some(target), Some(python), _) => {
                let driver = work_dir.join("driver.py");
                std::fs::write(&driver, DRIVER)
                    .map_err(|e| write_error(&driver, e, Some(&work_dir)))?;
                Some(Workload::Driver {
                    target,
                    python,
                    driver,
                })
            }
            (_, _, Some(c)) => Some(Workload::Command(c)),
            _ => None,
        };
        Ok(Session {
            plan,
            repeats: plan
                .opts
                .repeats
                .unwrap_or(target.map_or(1, |t| t.run.repeats)),
            timeout: Duration::from_secs(
                plan.opts
                    .timeout_s
                    .unwrap_or(target.map_or(COMMAND_TIMEOUT_S, |t| t.run.timeout_s)),
            ),
            work_dir,
            raw,
            workload,
            interrupt,
        })
    }

    /// Each rank's raw directory, rank 0's (`raw/`) first; just `raw/` for one process.
    fn rank_raws(&self) -> Vec<PathBuf> {
        let n = self.plan.opts.ranks.as_ref().map_or(1, |r| r.nproc);
        (0..n)
            .map(|r| crate::ranks::rank_raw(&self.raw, r))
            .collect()
    }

    /// A write error under the working directory (a full disk says the partial artifacts are
    /// kept there).
    fn write_err(&self, path: &Path, e: std::io::Error) -> CaptureError {
        write_error(path, e, Some(&self.work_dir))
    }

    /// The model config as `raw/config.json`, for ingest: the target's, or a `--cmd`
    /// workload's `--model-config` copied; `None` without one or when it cannot be written.
    fn write_model_config(&self) -> Option<PathBuf> {
        let p = self.raw.join("config.json");
        if let Some(given) = &self.plan.opts.cmd_analysis.model_config {
            std::fs::copy(given, &p).ok()?;
            return Some(p);
        }
        let c = self.plan.target.as_ref()?.model_config()?;
        std::fs::write(&p, serde_json::to_string_pretty(&c).ok()?).ok()?;
        Some(p)
    }

    /// The workload's command line and environment for `pass`, with its output in `out` (a
    /// target's pass gets its plan file written to `out/plan.json`); `None` when there is no
    /// workload to run.
    fn workload_command(
        &self,
        pass: &str,
        out: PathBuf,
    ) -> Result<Option<PassCommand>, CaptureError> {
        let Some(workload) = &self.workload else {
            return Ok(None);
        };
        let (command, env) = match workload {
            Workload::Driver {
                target,
                python,
                driver,
            } => {
                let plan_path = out.join("plan.json");
                let mut doc = driver_plan(target, self.plan, pass, &out, self.repeats);
                if let Some(r) = &self.plan.opts.ranks {
                    let timeout = target.run.collective_timeout_s;
                    doc["distributed"] = r.plan_json(&self.work_dir, timeout);
                }
                std::fs::write(&plan_path, doc.to_string())
                    .map_err(|e| self.write_err(&plan_path, e))?;
                let words = [python, driver.as_path(), plan_path.as_path()];
                let words = words.map(|p| p.display().to_string()).to_vec();
                match &self.plan.opts.ranks {
                    Some(r) => {
                        let mut c = r.launcher(python);
                        c.extend(words.into_iter().skip(1));
                        let env = vec![("CUDA_VISIBLE_DEVICES".into(), r.visible_devices())];
                        (c, env)
                    }
                    None => (words, Vec::new()),
                }
            }
            Workload::Command(c) => {
                let mut env: Vec<(String, String)> = vec![
                    ("LLMPROF_PASS".into(), pass.into()),
                    ("LLMPROF_OUT_DIR".into(), out.display().to_string()),
                    ("LLMPROF_STAGES".into(), c.stages.join(",")),
                ];
                env.extend(kinds::kind_of(pass).command_env(&out));
                (vec!["sh".into(), "-c".into(), c.command.clone()], env)
            }
        };
        Ok(Some(PassCommand {
            out,
            command,
            env,
            stdout_to: None,
        }))
    }
}

/// What the passes accumulate.
struct State {
    capture: Capture,
    /// Each run's wall-clock window, for the NVML series.
    windows: Vec<Window>,
    /// The nsys pass's SQLite export, once exported.
    nsys_sqlite: Option<PathBuf>,
    /// Passes the capture did not start (interrupted, or stopped at a full disk).
    not_run: Vec<String>,
    disk_full: bool,
}

impl State {
    fn new(capture: Capture) -> Self {
        State {
            capture,
            windows: Vec::new(),
            nsys_sqlite: None,
            not_run: Vec::new(),
            disk_full: false,
        }
    }

    /// One `missing` line per pass an interrupt or a full disk kept from running.
    fn note_not_run(&mut self) {
        if !(self.capture.interrupted || self.disk_full) {
            return;
        }
        let why = if self.disk_full {
            "stopped at the full disk"
        } else {
            "was interrupted"
        };
        for p in &self.not_run {
            self.capture
                .missing
                .push(format!("the {p} pass did not run: the capture {why}"));
        }
    }
}

/// Runs one pass of the plan: its command (the workload under the pass's profiler) as many
/// times as the pass runs, then what follows the pass (the nsys export). A pass whose profiler
/// is missing is recorded as missing and skipped.
fn run_pass(
    s: &Session<'_>,
    st: &mut State,
    pass: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(), CaptureError> {
    if s.interrupt.is_set() || st.capture.interrupted {
        st.not_run.push(pass.to_string());
        return Ok(());
    }
    let out = s.raw.join(pass);
    std::fs::create_dir_all(&out).map_err(|e| s.write_err(&out, e))?;
    let Some(mut cmd) = s.workload_command(pass, out)? else {
        return Ok(());
    };
    let kind = kinds::kind_of(pass);
    let workload = std::mem::take(&mut cmd.command);
    cmd.command = match kind.command(s, st, &cmd.out, workload) {
        Ok(c) => c,
        Err(missing) => {
            st.capture.missing.push(missing);
            return Ok(());
        }
    };
    cmd.stdout_to = kind.stdout_to(&cmd.out);
    for i in 0..kind.runs(s) {
        if !run_once(s, st, pass, i, &cmd, progress) {
            break;
        }
    }
    if !st.disk_full {
        kind.after(s, st, pass, progress);
    }
    Ok(())
}

/// Run `i` of a pass: records it and its window; `false` when the capture stops here (Ctrl-C,
/// or a full disk, after which no further pass runs).
fn run_once(
    s: &Session<'_>,
    st: &mut State,
    pass: &str,
    i: u64,
    cmd: &PassCommand,
    progress: &mut dyn FnMut(&str),
) -> bool {
    let (label, log) = if i == 0 {
        (pass.to_string(), cmd.out.join("stderr.log"))
    } else {
        (
            format!("{pass} #{}", i + 1),
            cmd.out.join(format!("stderr-{}.log", i + 1)),
        )
    };
    progress(&format!("{label} pass: {}", shell_join(&cmd.command)));
    let start = now_ns();
    let job = Job {
        name: &label,
        command: &cmd.command,
        env: &cmd.env,
        stdout_to: cmd.stdout_to.as_deref(),
        log: &log,
        timeout: s.timeout,
        cpus: s.plan.cpu.pinned.as_deref(),
    };
    let ran = process::run(&job, Some(s.interrupt));
    st.windows.push(Window {
        name: label,
        start_ns: start,
        end_ns: now_ns(),
    });
    let full = ran
        .record
        .note
        .as_deref()
        .is_some_and(|n| n.contains("No space left on device") || n.contains("Disk quota"));
    st.capture.passes.push(ran.record);
    if ran.stopped == Stopped::Interrupt {
        st.capture.interrupted = true;
        return false;
    }
    if full {
        st.capture
            .missing
            .push(disk_full_message(&cmd.out, Some(&s.work_dir)));
        st.disk_full = true;
        let rest = s.plan.passes.iter().skip_while(|&&p| p != pass).skip(1);
        st.not_run.extend(rest.map(|p| p.to_string()));
        return false;
    }
    true
}

/// The most measured iterations the kineto pass times, each under its own profiler session
/// (the driver keeps the last one's trace): enough for a median against the baseline's, few
/// enough that the sessions' trace processing stays short.
const KINETO_REPEATS: u64 = 5;

/// The driver's plan for one pass of a target.
fn driver_plan(
    t: &crate::Target,
    plan: &Plan,
    pass: &str,
    out: &Path,
    repeats: u64,
) -> serde_json::Value {
    json!({
        "pass": match crate::pass_kind(pass) {
            "ncu" => "nsys",
            kind => kind,
        },
        "out_dir": out,
        "model": {
            "config": t.model.config,
            "path": t.model.path,
            "dtype": t.model.dtype,
            "attn_implementation": t.model.attn_implementation,
        },
        "inputs": {
            "prompt_tokens": t.inputs.prompt_tokens,
            "max_new_tokens": t.inputs.max_new_tokens,
            "batch_size": t.inputs.batch_size,
            "seed": t.inputs.seed,
            "images": t.inputs.images.as_ref().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        },
        "stages": { "modules": t.stages.modules },
        "optimize": {
            "compile": t.optimize.compile.as_str(),
            "cache": t.optimize.cache.as_str(),
        },
        "warmup": t.run.warmup,
        "repeats": match pass {
            "ncu" => 1,
            "kineto" => repeats.min(KINETO_REPEATS),
            _ => repeats,
        },
        "device": plan.opts.device,
        "prefill_energy_s": if pass == "baseline" { PREFILL_ENERGY_S } else { 0.0 },
    })
}

/// Seconds of back-to-back prefills the (first) baseline pass runs after its measured
/// iterations, so prefill energy is measured over a window of about 20 NVML refreshes rather
/// than the one or none a single prefill holds (`energy`).
const PREFILL_ENERGY_S: f64 = 2.0;

/// A command line as a shell would read it back (words with spaces or quotes single-quoted).
fn shell_join(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A write error as the capture reports it: a full disk gets its one-line message.
fn write_error(path: &Path, e: std::io::Error, keep: Option<&Path>) -> CaptureError {
    if crate::is_disk_full(&e) {
        CaptureError::DiskFull {
            path: path.to_path_buf(),
            keep: keep.map(Path::to_path_buf),
        }
    } else {
        CaptureError::Write {
            path: path.to_path_buf(),
            source: e,
        }
    }
}
