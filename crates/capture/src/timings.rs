//! Reading what the driver wrote: host timings per pass (`baseline.json`, `kineto_timing.json`,
//! `nsys_timing.json`: `{"iterations": [{"prefill_ns", "decode_ns", "decode_step_ns": [..],
//! "total_ns"}]}`), counted FLOPs (`flops.json`: stage -> FLOPs per instance) and versions
//! (`metadata.json` `"versions"`). Missing or malformed files read as absent.

use std::collections::BTreeMap;
use std::path::Path;

use llmprof_bundle::{
    CompileRecord, Distribution, EnvSnapshot, IterationSample, Overhead, StageTimings,
    SubStageTiming,
};
use serde::Deserialize;

use crate::energy::EnergyWindows;

#[derive(Debug, Default, Deserialize)]
struct TimingFile {
    #[serde(default)]
    iterations: Vec<Iteration>,
    /// The baseline pass's back-to-back prefills for energy, after its measured iterations.
    #[serde(default)]
    prefill_loop: Option<PrefillLoop>,
    /// How `sub_stage_ns` was timed: `cuda_events`, or `host` in the CPU test mode.
    #[serde(default)]
    sub_stage_clock: Option<String>,
}

/// `"prefill_loop": {"window_ns": [start, end], "prefills": n}` of `baseline.json`.
#[derive(Debug, Clone, Deserialize)]
struct PrefillLoop {
    window_ns: [i64; 2],
    prefills: u64,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct Iteration {
    #[serde(default)]
    prefill_ns: Option<u64>,
    #[serde(default)]
    decode_ns: Option<u64>,
    #[serde(default)]
    decode_step_ns: Vec<u64>,
    #[serde(default)]
    total_ns: Option<u64>,
    /// The stage windows on the wall clock (`[start, end]`, ns since the epoch).
    #[serde(default)]
    prefill_window_ns: Option<[i64; 2]>,
    #[serde(default)]
    decode_window_ns: Option<[i64; 2]>,
    /// The baseline pass's sub-stages: enclosing stage -> sub-stage -> GPU ns per instance.
    #[serde(default)]
    sub_stage_ns: BTreeMap<String, BTreeMap<String, Vec<u64>>>,
    /// The fresh process that ran it (0 for `raw/<pass>/`, 1 for `raw/<pass>-2/`, ...); set by
    /// the reader, not the driver.
    #[serde(skip)]
    process: u32,
}

/// The driver's record of compiling the decode step (`"optimize"` in a timing file).
#[derive(Debug, Default, Deserialize)]
struct OptimizeRecord {
    #[serde(default)]
    compile: String,
    #[serde(default)]
    cache: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    compile_s: Option<f64>,
    #[serde(default)]
    capture_s: Option<f64>,
    #[serde(default)]
    failed_part: Option<String>,
    #[serde(default, rename = "where")]
    location: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    cudagraph_skipped: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct OptimizeFile {
    #[serde(default)]
    optimize: Option<OptimizeRecord>,
}

/// The timing file a pass's driver writes (the ncu pass runs the driver's nsys pass).
fn timing_file(pass: &str) -> Option<&'static str> {
    match crate::pass_kind(pass) {
        "baseline" => Some("baseline.json"),
        "kineto" => Some("kineto_timing.json"),
        "nsys" | "ncu" => Some("nsys_timing.json"),
        _ => None,
    }
}

/// Per pass, how the driver compiled the decode step; empty when every pass ran it eager.
pub fn compile_records(raw: &Path, passes: &[&str]) -> Vec<CompileRecord> {
    passes
        .iter()
        .filter_map(|&pass| {
            let file = timing_file(pass)?;
            let o = read_json::<OptimizeFile>(&raw.join(pass).join(file))?.optimize?;
            (o.status != "eager" && !o.status.is_empty()).then(|| CompileRecord {
                pass: pass.to_string(),
                mode: o.compile,
                cache: o.cache,
                status: o.status,
                compile_s: o.compile_s,
                capture_s: o.capture_s,
                failed_part: o.failed_part,
                location: o.location,
                error: o.error,
                cudagraphs_skipped: o.cudagraph_skipped,
            })
        })
        .collect()
}

/// The timings of every pass that wrote them.
#[derive(Debug, Default, Clone)]
pub struct Timings {
    /// Every baseline pass's measured iterations, pooled.
    pub baseline: Option<StageTimings>,
    pub profiled: Vec<(String, StageTimings)>,
    /// Interleaved pairs (baseline pass, nsys pass), in the order they ran.
    pub pairs: Vec<(StageTimings, StageTimings)>,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn summarize(iters: &[Iteration]) -> Option<StageTimings> {
    if iters.is_empty() {
        return None;
    }
    let mut prefill: Vec<u64> = iters.iter().filter_map(|i| i.prefill_ns).collect();
    let mut decode: Vec<u64> = iters.iter().filter_map(|i| i.decode_ns).collect();
    let mut steps: Vec<u64> = iters
        .iter()
        .flat_map(|i| i.decode_step_ns.clone())
        .collect();
    let mut totals: Vec<u64> = iters.iter().filter_map(|i| i.total_ns).collect();
    let total = Distribution::from_samples(&mut totals);
    let samples = iters
        .iter()
        .map(|i| IterationSample {
            process: i.process,
            prefill_ns: i.prefill_ns,
            decode_ns: i.decode_ns,
            decode_steps: i.decode_step_ns.len() as u64,
        })
        .collect();
    let mut processes: Vec<u32> = iters.iter().map(|i| i.process).collect();
    processes.dedup();
    Some(StageTimings {
        iterations: iters.len() as u64,
        prefill: Distribution::from_samples(&mut prefill),
        decode: Distribution::from_samples(&mut decode),
        decode_step: Distribution::from_samples(&mut steps),
        iteration_cv_pct: if total.mean_ns > 0.0 {
            total.std_ns / total.mean_ns * 100.0
        } else {
            0.0
        },
        samples,
        processes: processes.len() as u32,
        sub_stages: Vec::new(),
    })
}

/// A `--cmd` workload's baseline timings from the `prefill` and `decode` windows its baseline
/// runs wrote to `stages.jsonl` (each run a fresh process); `None` when they wrote none. Decode
/// steps are not known from windows, so the decode-step distribution stays empty.
pub fn command_baseline(raw: &Path) -> Option<StageTimings> {
    let wall = |w: Option<(i64, i64)>| w.and_then(|(a, b)| u64::try_from(b - a).ok());
    let iters: Vec<Iteration> = crate::cmd_timings::baseline_iterations(raw)
        .into_iter()
        .zip(0u32..)
        .flat_map(|(its, process)| {
            its.into_iter().map(move |(p, d)| Iteration {
                prefill_ns: wall(p),
                decode_ns: wall(d),
                total_ns: Some(wall(p).unwrap_or(0) + wall(d).unwrap_or(0)),
                process,
                ..Iteration::default()
            })
        })
        .collect();
    summarize(&iters)
}

/// Each sub-stage's GPU time per instance and per iteration, by enclosing stage, over the
/// iterations that timed it.
fn sub_stages(iters: &[Iteration], clock: Option<&str>) -> Vec<SubStageTiming> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for i in iters {
        for (stage, subs) in &i.sub_stage_ns {
            for name in subs.keys() {
                if !keys.contains(&(stage.as_str(), name.as_str())) {
                    keys.push((stage, name));
                }
            }
        }
    }
    let source = match clock {
        Some("cuda_events") => "CUDA events at the module's forward pre- and post-hooks",
        Some("host") => "host clock (the driver's CPU test mode)",
        _ => "the driver's sub-stage hooks",
    };
    keys.into_iter()
        .map(|(stage, name)| {
            let times: Vec<&Vec<u64>> = iters
                .iter()
                .filter_map(|i| i.sub_stage_ns.get(stage)?.get(name))
                .collect();
            let mut each: Vec<u64> = times.iter().flat_map(|v| v.iter().copied()).collect();
            let mut per_iter: Vec<u64> = times.iter().map(|v| v.iter().sum()).collect();
            SubStageTiming {
                name: name.to_string(),
                stage: stage.to_string(),
                instance: Distribution::from_samples(&mut each),
                per_iteration: Distribution::from_samples(&mut per_iter),
                source: source.into(),
            }
        })
        .collect()
}

/// The measured iterations a pass directory's timing file holds (none when it is missing),
/// tagged with the process that ran them. With several raw directories (the ranks of a
/// `--nproc` capture, rank 0 first) each iteration is the group's: the ranks start it together
/// (a barrier) and it ends when the slowest rank's does, so each stage's time is the largest
/// over the ranks; iterations past the fewest any rank recorded are dropped.
fn iterations(raws: &[&Path], dir: &str, name: &str, process: u32) -> Vec<Iteration> {
    let per_rank: Vec<Vec<Iteration>> = raws
        .iter()
        .map(|raw| {
            read_json::<TimingFile>(&raw.join(dir).join(name))
                .map(|f| f.iterations)
                .unwrap_or_default()
        })
        .collect();
    let Some((first, others)) = per_rank.split_first() else {
        return Vec::new();
    };
    let n = others.iter().map(Vec::len).fold(first.len(), usize::min);
    let mut iters: Vec<Iteration> = first[..n].to_vec();
    for other in others {
        for (group, rank) in iters.iter_mut().zip(other) {
            group.slowest_with(rank);
        }
    }
    for i in &mut iters {
        i.process = process;
    }
    iters
}

impl Iteration {
    /// This iteration as the group of ranks ran it, `rank` being one more rank's: each stage
    /// the larger, each decode step the larger (when both recorded the same steps), each
    /// window the union. Sub-stages stay the first rank's.
    fn slowest_with(&mut self, rank: &Iteration) {
        let max = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.prefill_ns = max(self.prefill_ns, rank.prefill_ns);
        self.decode_ns = max(self.decode_ns, rank.decode_ns);
        self.total_ns = max(self.total_ns, rank.total_ns);
        if self.decode_step_ns.len() == rank.decode_step_ns.len() {
            for (a, b) in self.decode_step_ns.iter_mut().zip(&rank.decode_step_ns) {
                *a = (*a).max(*b);
            }
        }
        let union = |a: Option<[i64; 2]>, b: Option<[i64; 2]>| match (a, b) {
            (Some(a), Some(b)) => Some([a[0].min(b[0]), a[1].max(b[1])]),
            (a, b) => a.or(b),
        };
        self.prefill_window_ns = union(self.prefill_window_ns, rank.prefill_window_ns);
        self.decode_window_ns = union(self.decode_window_ns, rank.decode_window_ns);
    }
}

/// The numbers N of the pass directories of `kind` under `raw/`, sorted: 1 for `raw/<kind>/`,
/// N for `raw/<kind>-N/` (the interleaved overhead pairs and `--repeats auto`'s rounds).
pub fn numbered_dirs(raw: &Path, kind: &str) -> Vec<u32> {
    let mut ns: Vec<u32> = std::fs::read_dir(raw)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    if name == kind {
                        return Some(1);
                    }
                    let n: u32 = name.strip_prefix(kind)?.strip_prefix('-')?.parse().ok()?;
                    (n >= 2).then_some(n)
                })
                .collect()
        })
        .unwrap_or_default();
    ns.sort_unstable();
    ns
}

/// `kind` for N = 1, `kind-N` beyond.
pub fn numbered_dir(kind: &str, n: u32) -> String {
    if n == 1 {
        kind.to_string()
    } else {
        format!("{kind}-{n}")
    }
}

/// Every baseline directory's measured iterations, tagged with their process (N − 1).
fn baseline_iterations(raws: &[&Path]) -> Vec<(u32, Vec<Iteration>)> {
    let Some(raw) = raws.first() else {
        return Vec::new();
    };
    numbered_dirs(raw, "baseline")
        .into_iter()
        .map(|n| {
            let dir = numbered_dir("baseline", n);
            (n, iterations(raws, &dir, "baseline.json", n - 1))
        })
        .collect()
}

/// Reads the timing files under `raw/<pass>/`: `baseline`, `kineto`, `nsys`, and the fresh
/// processes `baseline-N` / `nsys-N` (N = 2, 3, ...: interleaved overhead pairs, `--repeats
/// auto` rounds), pooled per kind; `baseline-N` and `nsys-N` that both hold iterations pair up.
pub fn read_all(raw: &Path) -> Timings {
    read_group(&[raw])
}

/// [`read_all`] for the ranks of a `--nproc` capture (`raw/` of rank 0, then `raw/ranks/<r>/`):
/// each iteration the group's, as [`iterations`] combines them — the run's timings.
pub fn read_group(raws: &[&Path]) -> Timings {
    let Some(raw) = raws.first() else {
        return Timings::default();
    };
    let (mut base_all, mut nsys_all, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    for (n, b) in baseline_iterations(raws) {
        let p = iterations(raws, &numbered_dir("nsys", n), "nsys_timing.json", n - 1);
        if let (Some(bs), Some(ps)) = (summarize(&b), summarize(&p)) {
            pairs.push((bs, ps));
        }
        base_all.extend(b);
    }
    for n in numbered_dirs(raw, "nsys") {
        nsys_all.extend(iterations(
            raws,
            &numbered_dir("nsys", n),
            "nsys_timing.json",
            n - 1,
        ));
    }
    let clock = read_json::<TimingFile>(&raw.join("baseline/baseline.json"))
        .and_then(|f| f.sub_stage_clock);
    let mut baseline = summarize(&base_all);
    if let Some(b) = &mut baseline {
        b.sub_stages = sub_stages(&base_all, clock.as_deref());
    }
    let mut t = Timings {
        baseline,
        profiled: Vec::new(),
        pairs,
    };
    if let Some(s) = summarize(&iterations(raws, "kineto", "kineto_timing.json", 0)) {
        t.profiled.push(("kineto".into(), s));
    }
    if let Some(s) = summarize(&nsys_all) {
        t.profiled.push(("nsys".into(), s));
    }
    t
}

/// The baseline's per-iteration wall of each measured stage (`prefill`, `decode`), in ns, one
/// group per fresh process (`raw/baseline/`, `raw/baseline-2/`, ...): what `--repeats auto`
/// judges. A stage no iteration spent time in (no decode steps) is left out.
pub fn baseline_groups(raw: &Path) -> Vec<(&'static str, Vec<Vec<f64>>)> {
    let procs = baseline_iterations(&[raw]);
    let pick = |get: fn(&Iteration) -> Option<u64>| -> Vec<Vec<f64>> {
        procs
            .iter()
            .map(|(_, its)| its.iter().filter_map(get).map(|v| v as f64).collect())
            .filter(|g: &Vec<f64>| !g.is_empty())
            .collect()
    };
    [
        ("prefill", pick(|i| i.prefill_ns)),
        ("decode", pick(|i| i.decode_ns)),
    ]
    .into_iter()
    .filter(|(_, g)| g.iter().flatten().any(|&v| v > 0.0))
    .collect()
}

/// [`Overhead::basis`] of a target's overheads: medians of measured iterations.
pub const BASIS_ITERATIONS: &str = "iterations";

fn stages(t: &StageTimings) -> [(&'static str, &Distribution); 3] {
    [
        ("prefill", &t.prefill),
        ("decode", &t.decode),
        ("decode step", &t.decode_step),
    ]
}

fn pct(base: &Distribution, profiled: &Distribution) -> Option<f64> {
    (base.count > 0 && profiled.count > 0 && base.median_ns > 0.0)
        .then(|| (profiled.median_ns - base.median_ns) / base.median_ns * 100.0)
}

impl Timings {
    /// Per profiled pass and stage: the median of the pooled profiled iterations against the
    /// median of the pooled baseline iterations; for nsys with several interleaved pairs, also
    /// the range of the per-pair overheads.
    pub fn overhead(&self) -> Vec<Overhead> {
        let Some(base) = &self.baseline else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (pass, s) in &self.profiled {
            for ((stage, b), (_, p)) in stages(base).into_iter().zip(stages(s)) {
                let Some(overhead_pct) = pct(b, p) else {
                    continue;
                };
                let (pairs, pair_range_pct) = if pass == "nsys" {
                    let per_pair: Vec<f64> = self
                        .pairs
                        .iter()
                        .filter_map(|(bs, ps)| {
                            let i = stages(bs).iter().position(|(n, _)| *n == stage)?;
                            pct(stages(bs)[i].1, stages(ps)[i].1)
                        })
                        .collect();
                    let range = (per_pair.len() > 1).then(|| {
                        [
                            per_pair.iter().copied().fold(f64::INFINITY, f64::min),
                            per_pair.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                        ]
                    });
                    (self.pairs.len().max(1) as u64, range)
                } else {
                    (1, None)
                };
                out.push(Overhead {
                    pass: pass.clone(),
                    stage: stage.into(),
                    baseline_median_ns: b.median_ns,
                    profiled_median_ns: p.median_ns,
                    overhead_pct,
                    pairs,
                    pair_range_pct,
                    basis: Some(BASIS_ITERATIONS.into()),
                });
            }
        }
        out
    }
}

/// The baseline pass's stage windows on the wall clock, per stage, for energy: the loop of
/// back-to-back prefills first when the driver ran it, then the measured iterations' windows
/// (warm-up excluded); empty when the driver recorded none.
pub fn baseline_windows(raw: &Path) -> Vec<EnergyWindows> {
    let Some(f) = read_json::<TimingFile>(&raw.join("baseline/baseline.json")) else {
        return Vec::new();
    };
    let pick = |get: fn(&Iteration) -> Option<[i64; 2]>| -> Vec<(i64, i64)> {
        f.iterations
            .iter()
            .filter_map(get)
            .filter(|[s, e]| e > s)
            .map(|[s, e]| (s, e))
            .collect()
    };
    let each = |stage: &str, windows| EnergyWindows {
        stage: stage.into(),
        kind: "iterations",
        windows,
        per_window: 1,
    };
    let prefill_loop = f
        .prefill_loop
        .as_ref()
        .filter(|l| l.prefills > 0 && l.window_ns[1] > l.window_ns[0])
        .map(|l| EnergyWindows {
            stage: "prefill".into(),
            kind: "loop",
            windows: vec![(l.window_ns[0], l.window_ns[1])],
            per_window: l.prefills,
        });
    prefill_loop
        .into_iter()
        .chain([
            each("prefill", pick(|i| i.prefill_window_ns)),
            each("decode", pick(|i| i.decode_window_ns)),
        ])
        .filter(|w| !w.windows.is_empty())
        .collect()
}

/// `flops.json` of the flops pass: stage -> FLOPs per instance.
pub fn counted_flops(raw: &Path) -> BTreeMap<String, f64> {
    read_json::<BTreeMap<String, f64>>(&raw.join("flops/flops.json"))
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| v.is_finite() && *v > 0.0)
        .collect()
}

/// Image tokens per sequence the driver put in the LM input (0 for text-only targets).
pub fn image_tokens(raw: &Path) -> u64 {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        image_tokens: Option<u64>,
    }
    ["baseline", "nsys", "kineto", "flops"]
        .iter()
        .find_map(|pass| read_json::<Meta>(&raw.join(pass).join("metadata.json"))?.image_tokens)
        .unwrap_or(0)
}

/// Tokens per sequence whose logits prefill computed, as the driver measured them (the logits'
/// length): 1 under `logits_to_keep=1`, the prompt length for a model whose forward lacks it.
/// 1 when no pass recorded it (drivers before it measured).
pub fn prefill_logits(raw: &Path) -> u64 {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        prefill_logits: Option<u64>,
    }
    ["baseline", "nsys", "kineto", "flops"]
        .iter()
        .find_map(|pass| read_json::<Meta>(&raw.join(pass).join("metadata.json"))?.prefill_logits)
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// The device ceilings the calibrate pass measured in deep mode (`measured_tflops`,
/// `measured_gbps` in its metadata): one large GEMM and one device copy.
pub fn calibration(raw: &Path) -> (Option<f64>, Option<f64>) {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        measured_tflops: Option<f64>,
        #[serde(default)]
        measured_gbps: Option<f64>,
    }
    let ok = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    read_json::<Meta>(&raw.join("calibrate/metadata.json")).map_or((None, None), |m| {
        (ok(m.measured_tflops), ok(m.measured_gbps))
    })
}

/// Python, torch, transformers and CUDA versions the driver recorded (any pass).
pub fn versions_into(raw: &Path, snap: &mut EnvSnapshot) {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        versions: BTreeMap<String, serde_json::Value>,
    }
    for pass in ["baseline", "kineto", "nsys", "flops"] {
        let Some(m) = read_json::<Meta>(&raw.join(pass).join("metadata.json")) else {
            continue;
        };
        let get = |k: &str| {
            m.versions.get(k).and_then(|v| match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Null => None,
                other => Some(other.to_string()),
            })
        };
        snap.python = snap.python.take().or_else(|| get("python"));
        snap.torch = snap.torch.take().or_else(|| get("torch"));
        snap.transformers = snap.transformers.take().or_else(|| get("transformers"));
        if snap.cuda.is_none() {
            snap.cuda = get("cuda");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver measures the logits prefill computed; a model whose forward lacks
    /// `logits_to_keep` computes one per prompt token, and the metadata must say so.
    #[test]
    fn prefill_logits_come_from_the_driver() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        assert_eq!(prefill_logits(raw), 1, "no pass recorded it");
        std::fs::create_dir_all(raw.join("baseline")).unwrap();
        std::fs::write(
            raw.join("baseline/metadata.json"),
            r#"{"prompt_tokens": 512, "prefill_logits": 512}"#,
        )
        .unwrap();
        assert_eq!(prefill_logits(raw), 512);
    }

    /// The records the driver writes (the H100 call's `optimize` objects): an ok compile with
    /// its graph capture, a failed one, and an eager pass, which leaves no record.
    #[test]
    fn compile_records_per_pass() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let write = |pass: &str, name: &str, optimize: serde_json::Value| {
            std::fs::create_dir_all(raw.join(pass)).unwrap();
            let doc = serde_json::json!({"iterations": [], "optimize": optimize});
            std::fs::write(raw.join(pass).join(name), doc.to_string()).unwrap();
        };
        write(
            "baseline",
            "baseline.json",
            serde_json::json!({"compile": "reduce-overhead", "cache": "static", "fullgraph": true, "compile_s": 26.7, "capture_s": 0.41, "status": "ok"}),
        );
        write(
            "nsys",
            "nsys_timing.json",
            serde_json::json!({"compile": "reduce-overhead", "cache": "static", "status": "failed", "failed_part": "compile", "where": "modeling_x.py:12 in forward", "error": "Unsupported: data-dependent"}),
        );
        write(
            "kineto",
            "kineto_timing.json",
            serde_json::json!({"compile": "none", "cache": "dynamic", "status": "eager"}),
        );
        let r = compile_records(raw, &["baseline", "flops", "kineto", "nsys", "ncu"]);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].pass.as_str(), r[0].status.as_str()),
            ("baseline", "ok")
        );
        assert_eq!((r[0].compile_s, r[0].capture_s), (Some(26.7), Some(0.41)));
        assert_eq!(
            r[1].location.as_deref(),
            Some("modeling_x.py:12 in forward")
        );
        assert_eq!(r[1].failed_part.as_deref(), Some("compile"));
    }

    #[test]
    fn a_group_iteration_lasts_as_long_as_its_slowest_rank() {
        let dir = tempfile::tempdir().unwrap();
        let (r0, r1) = (dir.path().join("r0"), dir.path().join("r1"));
        let write = |raw: &Path, pass: &str, name: &str, prefills: &[u64], steps: &[u64]| {
            std::fs::create_dir_all(raw.join(pass)).unwrap();
            let it = |p: u64| {
                serde_json::json!({"prefill_ns": p, "decode_ns": steps.iter().sum::<u64>(),
                    "decode_step_ns": steps, "prefill_window_ns": [p as i64, 2 * p as i64]})
            };
            let doc = serde_json::json!({"iterations": prefills.iter().map(|&p| it(p)).collect::<Vec<_>>()});
            std::fs::write(raw.join(pass).join(name), doc.to_string()).unwrap();
        };
        write(&r0, "baseline", "baseline.json", &[10, 30, 20], &[5, 9]);
        write(&r1, "baseline", "baseline.json", &[12, 25], &[7, 8]);
        write(&r0, "nsys", "nsys_timing.json", &[20, 20, 20], &[5, 9]);
        write(&r1, "nsys", "nsys_timing.json", &[22, 22, 22], &[5, 9]);
        let t = read_group(&[&r0, &r1]);
        let base = t.baseline.unwrap();
        // Rank 1 recorded two iterations: the group has two, each the slower rank's.
        assert_eq!(base.iterations, 2);
        assert_eq!(base.prefill.median_ns, (12.0 + 30.0) / 2.0);
        assert_eq!(base.decode_step.median_ns, 8.0, "steps 7, 9, 7, 9");
        let nsys = &t.profiled.iter().find(|(p, _)| p == "nsys").unwrap().1;
        assert_eq!(nsys.prefill.median_ns, 22.0);
        // One raw directory reads as before.
        assert_eq!(read_group(&[&r0]).baseline.unwrap().iterations, 3);
    }

    #[test]
    fn overhead_compares_medians() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let write = |pass: &str, name: &str, prefill: u64| {
            std::fs::create_dir_all(raw.join(pass)).unwrap();
            let it = |p: u64| serde_json::json!({"prefill_ns": p, "decode_ns": 10 * p, "decode_step_ns": [p, p], "total_ns": 11 * p});
            let doc = serde_json::json!({"iterations": [it(prefill), it(prefill), it(prefill)]});
            std::fs::write(raw.join(pass).join(name), doc.to_string()).unwrap();
        };
        write("baseline", "baseline.json", 100);
        write("nsys", "nsys_timing.json", 125);
        let t = read_all(raw);
        let o = t.overhead();
        let prefill = o.iter().find(|o| o.stage == "prefill").unwrap();
        assert_eq!(
            (prefill.pass.as_str(), prefill.overhead_pct),
            ("nsys", 25.0)
        );
        assert_eq!(t.baseline.unwrap().iteration_cv_pct, 0.0);
        assert!(counted_flops(raw).is_empty());
        assert_eq!(calibration(raw), (None, None));
        std::fs::create_dir_all(raw.join("calibrate")).unwrap();
        std::fs::write(
            raw.join("calibrate/metadata.json"),
            r#"{"measured_tflops": 771.5, "measured_gbps": -1}"#,
        )
        .unwrap();
        assert_eq!(calibration(raw), (Some(771.5), None));
    }

    #[test]
    fn interleaved_pairs_pool_their_iterations_and_give_a_range() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let write = |pass: &str, name: &str, prefill: u64| {
            std::fs::create_dir_all(raw.join(pass)).unwrap();
            let it = |p: u64| serde_json::json!({"prefill_ns": p, "decode_ns": 10 * p, "total_ns": 11 * p});
            let doc = serde_json::json!({"iterations": [it(prefill), it(prefill), it(prefill)]});
            std::fs::write(raw.join(pass).join(name), doc.to_string()).unwrap();
        };
        write("baseline", "baseline.json", 100);
        write("nsys", "nsys_timing.json", 125);
        write("baseline-2", "baseline.json", 100);
        write("nsys-2", "nsys_timing.json", 150);
        let t = read_all(raw);
        let base = t.baseline.as_ref().unwrap();
        assert_eq!((base.iterations, base.processes), (6, 2));
        assert_eq!(base.samples[5].process, 1);
        assert_eq!(base.samples[0].prefill_ns, Some(100));
        assert_eq!(t.pairs.len(), 2);
        let o = t.overhead();
        let prefill = o.iter().find(|o| o.stage == "prefill").unwrap();
        // Pooled: nsys median of 125,125,125,150,150,150 = 137.5 against 100.
        assert_eq!(prefill.pairs, 2);
        assert!((prefill.overhead_pct - 37.5).abs() < 1e-9);
        assert_eq!(prefill.pair_range_pct, Some([25.0, 50.0]));
        // No decode steps were written: no decode-step row.
        assert!(!o.iter().any(|o| o.stage == "decode step"));
    }

    #[test]
    fn baseline_windows_are_read_per_stage() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        std::fs::create_dir_all(raw.join("baseline")).unwrap();
        let doc = serde_json::json!({"iterations": [
            {"prefill_window_ns": [10, 20], "decode_window_ns": [20, 90]},
            {"prefill_window_ns": [100, 100], "decode_window_ns": [130, 200]},
            {"prefill_ns": 5}
        ]});
        std::fs::write(raw.join("baseline/baseline.json"), doc.to_string()).unwrap();
        let w = baseline_windows(raw);
        let each = |stage: &str, windows: Vec<(i64, i64)>| EnergyWindows {
            stage: stage.into(),
            kind: "iterations",
            windows,
            per_window: 1,
        };
        assert_eq!(
            w,
            vec![
                each("prefill", vec![(10, 20)]),
                each("decode", vec![(20, 90), (130, 200)])
            ]
        );
        // With the prefill loop, it comes first, one window of 40 prefills.
        let doc = serde_json::json!({
            "iterations": [{"prefill_window_ns": [10, 20]}],
            "prefill_loop": {"window_ns": [300, 2300], "prefills": 40}
        });
        std::fs::write(raw.join("baseline/baseline.json"), doc.to_string()).unwrap();
        let w = baseline_windows(raw);
        assert_eq!(
            (w[0].kind, w[0].per_window, w[0].windows[0]),
            ("loop", 40, (300, 2300))
        );
        assert_eq!((w[1].kind, w.len()), ("iterations", 2));
    }

    /// The driver's `sub_stage_ns` (GPU ns per instance, by enclosing stage) becomes one row
    /// per sub-stage and stage, pooled over the baseline processes.
    #[test]
    fn baseline_sub_stages_per_instance_and_per_iteration() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let write = |pass: &str, iters: serde_json::Value| {
            std::fs::create_dir_all(raw.join(pass)).unwrap();
            let doc = serde_json::json!({"sub_stage_clock": "cuda_events", "iterations": iters});
            std::fs::write(raw.join(pass).join("baseline.json"), doc.to_string()).unwrap();
        };
        write(
            "baseline",
            serde_json::json!([
                {"prefill_ns": 100, "sub_stage_ns": {"prefill": {"sam": [30], "layer0": [5, 7]}}},
                {"prefill_ns": 110, "sub_stage_ns": {"prefill": {"sam": [34], "layer0": [6, 6]},
                                                      "decode": {"layer0": [2, 2, 2]}}}
            ]),
        );
        write(
            "baseline-2",
            serde_json::json!([{"prefill_ns": 90, "sub_stage_ns": {"prefill": {"sam": [26]}}}]),
        );
        let base = read_all(raw).baseline.unwrap();
        let row = |stage: &str, name: &str| {
            base.sub_stages
                .iter()
                .find(|s| s.stage == stage && s.name == name)
                .unwrap()
                .clone()
        };
        let sam = row("prefill", "sam");
        assert_eq!((sam.instance.count, sam.instance.median_ns), (3, 30.0));
        assert!(sam.source.contains("CUDA events"));
        let layer = row("prefill", "layer0");
        assert_eq!((layer.instance.count, layer.per_iteration.count), (4, 2));
        assert_eq!(layer.per_iteration.median_ns, 12.0);
        assert_eq!(row("decode", "layer0").per_iteration.total_ns, 6);
        assert_eq!(base.sub_stages.len(), 3);
        // Profiled passes record none.
        assert!(read_all(raw).profiled.is_empty());
    }
}
