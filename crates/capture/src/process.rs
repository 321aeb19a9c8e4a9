//! Running one external command with a time limit, stoppable by Ctrl-C. Every process llmprof
//! starts (the workload, `nsys`, `ncu`, `nsys export`) goes through [`run`].
//!
//! A capture's commands run in their own process group: the terminal's Ctrl-C reaches only
//! llmprof, which stops the pass itself — SIGINT to the whole group (the driver writes what it
//! measured, nsys its report), SIGKILL after [`STOP_GRACE`] or at a second Ctrl-C — so no
//! grandchild (the workload under nsys) outlives the capture. A command run with no
//! [`Interrupt`] to watch stays in llmprof's group, so the terminal's Ctrl-C stops both.
//!
//! A job with CPUs to run on ([`Job::cpus`]) is spawned from a short-lived thread that first
//! pins itself to them: the child inherits the affinity of the thread that forked it, so the
//! whole process tree (the workload under `nsys`/`ncu` included) stays on those CPUs, with no
//! `unsafe` `pre_exec` and no `taskset` on the command line.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use llmprof_bundle::PassRecord;

use crate::Interrupt;

/// How long a stopped command gets to exit after SIGINT before it is killed.
#[cfg(not(test))]
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(30);
/// Unit tests wait less: where SIGINT is inherited as ignored (a shell's background job), only
/// the SIGKILL stops their `sleep`.
#[cfg(test)]
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);

/// How often a running child is polled: the resolution of a pass's wall time, which a `--cmd`
/// workload's whole-process overhead and `--repeats auto` read.
const POLL: Duration = Duration::from_millis(2);

/// One command to run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job<'a> {
    /// The name its [`PassRecord`] gets.
    pub name: &'a str,
    pub command: &'a [String],
    pub env: &'a [(String, String)],
    /// Where stdout goes; `None`: into the log too.
    pub stdout_to: Option<&'a Path>,
    /// Where stderr goes.
    pub log: &'a Path,
    pub timeout: Duration,
    /// The CPUs the command (and everything it starts) runs on; `None`: wherever llmprof may.
    pub cpus: Option<&'a [usize]>,
}

/// Why a command was stopped before it ended on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    No,
    Timeout,
    Interrupt,
}

/// What running a job gave.
#[derive(Debug)]
pub(crate) struct Ran {
    pub record: PassRecord,
    pub stopped: Stopped,
    /// Why the command could not be started at all (`NotFound`: no such program).
    pub not_started: Option<std::io::ErrorKind>,
}

/// Runs `job` to its end, its time limit, or `interrupt`; see the module docs.
pub(crate) fn run(job: &Job<'_>, interrupt: Option<&Interrupt>) -> Ran {
    let started = Instant::now();
    let mut ran = Ran {
        record: PassRecord {
            name: job.name.to_string(),
            command: job.command.to_vec(),
            exit_code: None,
            wall_ns: 0,
            ok: false,
            note: None,
        },
        stopped: Stopped::No,
        not_started: None,
    };
    let mut child = match spawn(job, interrupt.is_some()) {
        Ok(c) => c,
        Err((note, kind)) => {
            ran.record.note = Some(note);
            ran.not_started = kind;
            return ran;
        }
    };
    let group = interrupt.is_some();
    let waited = wait(&mut child, group, job.timeout, started, interrupt);
    ran.record.wall_ns = started.elapsed().as_nanos() as u64;
    if waited.stopped != Stopped::No && !waited.killed && group {
        // Stragglers of a stopped pass (a shell's background jobs ignore SIGINT) go too.
        signal(&mut child, true, true);
    }
    ran.stopped = waited.stopped;
    finish_record(&mut ran.record, &waited, job);
    ran
}

/// Starts the command, stderr into the log, stdout into `stdout_to` or the log.
fn spawn(job: &Job<'_>, own_group: bool) -> Result<Child, (String, Option<std::io::ErrorKind>)> {
    let Some((exe, args)) = job.command.split_first() else {
        return Err(("empty command".into(), None));
    };
    let stderr = std::fs::File::create(job.log).ok();
    let stdout = match job.stdout_to {
        Some(p) => std::fs::File::create(p).ok().map(Stdio::from),
        None => stderr
            .as_ref()
            .and_then(|f| f.try_clone().ok())
            .map(Stdio::from),
    };
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout.unwrap_or_else(Stdio::null))
        .stderr(stderr.map(Stdio::from).unwrap_or_else(Stdio::null));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        if own_group {
            // Its own group: the terminal's Ctrl-C reaches only llmprof, which stops the pass.
            cmd.process_group(0);
        }
    }
    #[cfg(not(unix))]
    let _ = own_group;
    match job.cpus {
        Some(cpus) => spawn_pinned(&mut cmd, cpus),
        None => cmd.spawn(),
    }
    .map_err(|e| (format!("cannot start `{exe}`: {e}"), Some(e.kind())))
}

/// Spawns `cmd` from a thread pinned to `cpus`, so the child inherits that affinity.
#[cfg(target_os = "linux")]
fn spawn_pinned(cmd: &mut Command, cpus: &[usize]) -> std::io::Result<Child> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(std::io::Error::from)?;
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // Pid 0: this thread only; llmprof's other threads keep their affinity.
                sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
                    std::io::Error::other(format!(
                        "cannot pin to CPUs {} ({e}); --no-pin runs unpinned",
                        crate::cpu::format_list(cpus)
                    ))
                })?;
                cmd.spawn()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the spawning thread panicked")))
    })
}

#[cfg(not(target_os = "linux"))]
fn spawn_pinned(cmd: &mut Command, _cpus: &[usize]) -> std::io::Result<Child> {
    cmd.spawn()
}

/// How the wait ended.
#[derive(Debug)]
struct Waited {
    status: Result<ExitStatus, String>,
    stopped: Stopped,
    killed: bool,
}

/// Polls the child until it exits; on the time limit or an interrupt sends SIGINT, then
/// SIGKILL after [`STOP_GRACE`] or at the next interrupt.
fn wait(
    child: &mut Child,
    group: bool,
    timeout: Duration,
    started: Instant,
    interrupt: Option<&Interrupt>,
) -> Waited {
    let count = || interrupt.map_or(0, Interrupt::count);
    let mut stopped = Stopped::No;
    let mut stop_sent: Option<(Instant, u32)> = None;
    let mut killed = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {}
            Err(e) => break Err(format!("lost the child process: {e}")),
        }
        match stop_sent {
            None => {
                if count() > 0 {
                    stopped = Stopped::Interrupt;
                } else if started.elapsed() > timeout {
                    stopped = Stopped::Timeout;
                }
                if stopped != Stopped::No {
                    signal(child, group, false);
                    stop_sent = Some((Instant::now(), count()));
                }
            }
            Some((at, n)) => {
                if !killed && (at.elapsed() > STOP_GRACE || count() > n) {
                    signal(child, group, true);
                    killed = true;
                }
            }
        }
        std::thread::sleep(POLL);
    };
    Waited {
        status,
        stopped,
        killed,
    }
}

/// The exit code, whether the pass is ok, and the note: why it failed (the log's last line),
/// whether it was stopped and killed.
fn finish_record(record: &mut PassRecord, waited: &Waited, job: &Job<'_>) {
    match &waited.status {
        Ok(s) => {
            record.exit_code = s.code();
            record.ok = s.success() && waited.stopped == Stopped::No;
            if !record.ok {
                record.note = Some(format!(
                    "exit {}: {}",
                    s.code().map_or("by signal".to_string(), |c| c.to_string()),
                    last_line(job.log)
                ));
            }
        }
        Err(note) => record.note = Some(note.clone()),
    }
    let why = match waited.stopped {
        Stopped::No => return,
        Stopped::Timeout => format!(
            "stopped after the {} s time limit ([run] timeout_s or --timeout)",
            job.timeout.as_secs()
        ),
        Stopped::Interrupt => "interrupted by Ctrl-C".to_string(),
    };
    let killed = if waited.killed {
        format!("; killed after {} s", STOP_GRACE.as_secs())
    } else {
        String::new()
    };
    record.note = Some(match record.note.take() {
        Some(n) => format!("{why}{killed}; {n}"),
        None => format!("{why}{killed}"),
    });
}

/// SIGINT (or SIGKILL) to the child's process group, or to the child alone when it has no
/// group of its own (or groups do not exist).
fn signal(child: &mut Child, group: bool, kill: bool) {
    #[cfg(unix)]
    {
        use nix::sys::signal::{killpg, Signal};
        use nix::unistd::Pid;
        let sig = if kill {
            Signal::SIGKILL
        } else {
            Signal::SIGINT
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            let sent = if group {
                killpg(Pid::from_raw(pid), sig)
            } else {
                nix::sys::signal::kill(Pid::from_raw(pid), sig)
            };
            if sent.is_ok() {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = group;
    if kill {
        let _ = child.kill();
    }
}

/// Why a run failed, from its log (at most 300 characters): the driver's last `error:` line
/// (under torchrun it names the rank), else what torchrun's log says of the group
/// ([`crate::ranks::group_failure`]: a collective that timed out, a rank killed), else the
/// last line that is not empty or a banner of `=` (torchrun ends with one), else `no output`.
pub(crate) fn last_line(path: &Path) -> String {
    let mut text = String::new();
    let _ = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    let lines = || text.lines().rev().map(str::trim);
    let driver_error = lines().find(|l| l.starts_with("llmprof-driver") && l.contains("error:"));
    let reason = match driver_error {
        Some(l) => l.to_string(),
        None => crate::ranks::group_failure(&text).unwrap_or_else(|| {
            let last = lines().find(|l| !l.is_empty() && !l.chars().all(|c| c == '='));
            last.unwrap_or("no output").to_string()
        }),
    };
    reason.chars().take(300).collect()
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    fn job<'a>(command: &'a [String], log: &'a Path, timeout: Duration) -> Job<'a> {
        Job {
            name: "t",
            command,
            env: &[],
            stdout_to: None,
            log,
            timeout,
            cpus: None,
        }
    }

    #[test]
    fn a_failing_command_notes_its_exit_code_and_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let cmd = ["sh", "-c", "echo first; echo 'the reason' >&2; exit 3"].map(String::from);
        let ran = run(&job(&cmd, &log, Duration::from_secs(60)), None);
        assert!(!ran.record.ok);
        assert_eq!(ran.record.exit_code, Some(3));
        assert_eq!(ran.record.note.as_deref(), Some("exit 3: the reason"));
        assert_eq!(ran.stopped, Stopped::No);
    }

    /// Under torchrun the driver's error line names the failing rank, and torchrun's trailing
    /// banner is not the reason.
    #[test]
    fn a_failed_rank_is_named_not_the_launcher_banner() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let text = "llmprof-driver[rank 1]: error: the baseline pass crashed: RuntimeError: x\n\
                    Traceback (most recent call last):\n  raise ChildFailedError(\n\
                    ============================================================\n";
        std::fs::write(&log, text).unwrap();
        assert_eq!(
            last_line(&log),
            "llmprof-driver[rank 1]: error: the baseline pass crashed: RuntimeError: x"
        );
        std::fs::write(&log, "plain reason\n=====\n").unwrap();
        assert_eq!(last_line(&log), "plain reason");
        // No driver error: what torchrun's log says of the group.
        let text = "[rank0]:[E1126 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective \
                    operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, Timeout(ms)=30000) \
                    ran for 30041 milliseconds before timing out.\n  \
                    traceback : Signal 6 (SIGABRT) received by PID 8035\n=====\n";
        std::fs::write(&log, text).unwrap();
        assert!(last_line(&log).starts_with("rank 0 waited 30.0 s in ALLREDUCE #2"));
    }

    /// The child (and what it starts) runs on the job's CPUs; llmprof's thread keeps its own.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_job_runs_on_its_cpus() {
        use nix::sched::sched_getaffinity;
        use nix::unistd::Pid;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let Some(first) = (0..nix::sched::CpuSet::count()).find(|&c| before.is_set(c).unwrap())
        else {
            return;
        };
        let cmd = [
            "sh",
            "-c",
            "sh -c 'grep Cpus_allowed_list /proc/self/status'",
        ]
        .map(String::from);
        let cpus = [first];
        let mut j = job(&cmd, &log, Duration::from_secs(60));
        j.cpus = Some(&cpus);
        let ran = run(&j, Some(&Interrupt::new()));
        assert!(ran.record.ok, "{:?}", ran.record);
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.trim(), format!("Cpus_allowed_list:\t{first}"));
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        // A CPU beyond the set's size is a spawn error that names the remedy, not a panic.
        let far = [usize::MAX];
        j.cpus = Some(&far);
        let ran = run(&j, None);
        assert!(!ran.record.ok);
        assert!(ran.record.note.unwrap().starts_with("cannot start `sh`"));
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = ["/nonexistent/prog".to_string()];
        let ran = run(
            &job(&cmd, &dir.path().join("log"), Duration::from_secs(1)),
            None,
        );
        assert_eq!(ran.not_started, Some(std::io::ErrorKind::NotFound));
        assert!(ran
            .record
            .note
            .unwrap()
            .starts_with("cannot start `/nonexistent/prog`"));
    }

    #[test]
    fn the_time_limit_stops_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        // Long enough that only the time limit ends it. A shell that started the tests in the
        // background leaves SIGINT ignored, and `sleep` inherits that: then the SIGKILL after
        // the grace period stops it.
        let cmd = ["sleep".to_string(), "300".to_string()];
        for interrupt in [None, Some(&Interrupt::new())] {
            let ran = run(&job(&cmd, &log, Duration::from_millis(100)), interrupt);
            assert_eq!(ran.stopped, Stopped::Timeout);
            assert!(
                ran.record
                    .note
                    .as_deref()
                    .unwrap()
                    .starts_with("stopped after the 0 s"),
                "{:?}",
                ran.record
            );
            assert!(ran.record.wall_ns < (STOP_GRACE + Duration::from_secs(5)).as_nanos() as u64);
        }
    }
}
