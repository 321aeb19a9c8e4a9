//! Parsers for real profiler output, converted into an [`llmprof_bundle::Bundle`].
//!
//! Data flows one way: each parser ([`nsys`], [`kineto`], [`ncu`]) reads its format and feeds
//! format-free [`records`] to a [`convert::TraceConverter`], whose `finish()` builds the
//! bundle's stages, kernels, totals and timeline. Raw SQLite rows, JSON events and CSV cells
//! never leave the module that parses them. [`ingest`] runs the parsers a request names and
//! assembles one bundle; `llmprof-store` writes it into the runs directory.

mod chunked;
pub mod communication;
pub mod convert;
pub mod diagnostics;
pub mod error;
mod fold;
pub mod gunzip;
mod inflate;
pub mod input;
mod intern;
pub mod kineto;
mod launched;
mod launches;
pub mod merge;
pub mod ncu;
pub mod nsys;
mod ops;
pub mod paths;
pub mod records;
mod sort;
pub mod spans;
pub mod workers;
mod workload;

use std::path::{Path, PathBuf};

use llmprof_bundle::{
    Bundle, Device, Environment, InputFile, ModelInfo, NcuKernel, Operator, Severity, Source,
    TimelineInfo, Workload, TIMELINE_FILE,
};

use crate::convert::{Conversion, TraceConverter};
use crate::diagnostics::Diagnostics;
use crate::error::what;
pub use crate::error::IngestError;
use crate::paths::PathNames;
pub use llmprof_store::RunTimeline;

/// What to ingest.
#[derive(Debug, Clone, Default)]
pub struct IngestRequest {
    pub nsys: Option<PathBuf>,
    /// Only this process of the nsys export (its `globalPid`, [`nsys::gpu_processes`]): one
    /// rank of an export that traced several.
    pub nsys_process: Option<u64>,
    pub kineto: Option<PathBuf>,
    pub ncu: Vec<PathBuf>,
    pub model_config: Option<PathBuf>,
    /// `metadata.json` written by the workload (token counts, counted FLOPs, ceilings).
    pub metadata: Option<PathBuf>,
    pub label: Option<String>,
    /// Token counts given on the command line; they win over metadata and inference.
    pub workload: WorkloadFlags,
    pub peak_tflops: Option<f64>,
    pub peak_gbps: Option<f64>,
    /// The workload's stage names (the capture's `--stages`, as `name` or `domain:name`):
    /// ranges in other non-default NVTX domains are library ranges
    /// ([`llmprof_bundle::is_library_range`]) and get no per-instance kernel samples.
    pub stage_names: Vec<String>,
    /// Leading instances of each top-level stage that are warm-up (`--warmup-instances N`),
    /// besides the ranges named `warmup_*`; `None`: ingest marks by name only, and
    /// [`apply_overrides`] keeps what the bundle chose.
    pub warmup_instances: Option<u64>,
    /// The directory the bundle names files relative to: a capture's working directory,
    /// whose `raw/` becomes the run's. `None`: files are named as given.
    pub relative_to: Option<PathBuf>,
    /// Where a timeline written to disk as it is built (an Nsight Systems export's) goes
    /// until the run is written: best the runs directory, on the disk that will hold it.
    /// `None`: the system's temporary directory.
    pub spill_dir: Option<PathBuf>,
}

/// Where a `--warmup-instances` count came from, as the bundle records it.
const WARMUP_FLAG: &str = "--warmup-instances flag";

/// Token counts from command-line flags.
#[derive(Debug, Clone, Default)]
pub struct WorkloadFlags {
    pub batch_size: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub image_tokens: Option<u64>,
    /// One entry per decode-stage instance, or one for all.
    pub decode_steps: Vec<u64>,
    pub prefill_logits: Option<u64>,
    /// `--parallel-degree`: the GPUs one model instance is split over.
    pub parallel_degree: Option<u64>,
}

/// A bundle and its timeline, not yet written anywhere.
#[derive(Debug)]
pub struct Ingested {
    pub bundle: Bundle,
    pub timeline: Option<RunTimeline>,
}

/// A step of [`ingest`], reported to the caller for progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    Reading {
        source: Source,
        path: &'a Path,
    },
    /// How far the reading of the last `Reading`'s file has got: `bytes` of it read (inflated,
    /// for gzip), of `of` in all (a `.gz` trace's as its trailer states it: an estimate).
    Read {
        bytes: u64,
        of: Option<u64>,
    },
    Assembling,
}

/// Device and environment facts one input reveals.
#[derive(Debug, Clone, Default)]
pub struct SourceFacts {
    pub device: Option<Device>,
    pub environment: Environment,
    /// UTC time the capture started, ns since the Unix epoch.
    pub captured_at_epoch_ns: Option<i64>,
    /// UTC ns since the epoch of the source clock's zero, when the source records it.
    pub clock_zero_epoch_ns: Option<i64>,
}

/// Runs the parsers `req` names and assembles one bundle.
///
/// Nsight Systems, when given, is the timing source (stages, kernels, timeline); otherwise the
/// PyTorch profiler trace is. Operators always come from the PyTorch profiler trace.
pub fn ingest(
    req: &IngestRequest,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<Ingested, IngestError> {
    if req.nsys.is_none() && req.kineto.is_none() && req.ncu.is_empty() {
        return Err(IngestError::NoInputs);
    }
    let mut run = Assembly::new(req);
    if let Some(path) = &req.nsys {
        run.read_nsys(path, progress)?;
    }
    if let Some(path) = &req.kineto {
        run.read_kineto(path, progress)?;
    }
    if !req.ncu.is_empty() {
        run.read_ncu(progress)?;
    }
    run.read_model_config_and_metadata()?;

    progress(Step::Assembling);
    // The operator table and the converter's finish are independent: both run at once, until
    // finish is about to build the timeline's columns (its largest allocation), where it waits
    // for the table, so that the two working sets do not add up at the peak.
    let calls = run.operator_calls.take();
    let (timeline, operators) = std::thread::scope(|s| {
        let handle = calls.map(|c| {
            s.spawn(|| {
                let _building = spans::span(spans::Kind::Operators, 0);
                c.operators()
            })
        });
        let mut operators = None;
        let finishing = spans::span(spans::Kind::Finish, 0);
        let timeline = run.finish_timing(|| {
            operators = handle.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        });
        drop(finishing);
        (timeline, operators)
    });
    let timeline = timeline?;
    run.attach_operators(operators);
    run.attach_ncu();
    run.finish(timeline)
}

/// The timing source's converter and diagnostics, finished together in
/// [`Assembly::finish_timing`].
struct Timing {
    conv: Conversion,
    diags: Diagnostics,
}

/// What [`ingest`] has read so far: the bundle being filled, the facts each input revealed,
/// and what the parsers left for assembly.
struct Assembly<'r> {
    req: &'r IngestRequest,
    bundle: Bundle,
    /// In reading order: nsys, kineto, ncu.
    facts: Vec<SourceFacts>,
    /// `None` until an input becomes the timing source.
    timing: Option<Timing>,
    /// The PyTorch profiler trace's operator calls, aggregated and resolved against the
    /// stages once they exist.
    operator_calls: Option<kineto::OperatorCalls>,
    /// Token counts the timing source's operator shapes give, before flags and metadata.
    base_workload: Workload,
    ncu: Option<ncu::NcuInput>,
    /// The timing source's communication kernels, for [`communication::of`] once warm-up
    /// instances are marked.
    collectives: Vec<llmprof_bundle::Collective>,
}

impl<'r> Assembly<'r> {
    fn new(req: &'r IngestRequest) -> Self {
        let mut bundle = Bundle::new(String::new());
        bundle.llmprof_version = env!("CARGO_PKG_VERSION").to_string();
        bundle.label = req.label.clone();
        Self {
            req,
            bundle,
            facts: Vec::new(),
            timing: None,
            operator_calls: None,
            base_workload: Workload::default(),
            ncu: None,
            collectives: Vec::new(),
        }
    }

    /// How the bundle names the request's files.
    fn names(&self) -> PathNames<'r> {
        PathNames::new(self.req.relative_to.as_deref())
    }

    /// Reads the Nsight Systems export, which becomes the timing source.
    fn read_nsys(
        &mut self,
        path: &Path,
        progress: &mut dyn FnMut(Step<'_>),
    ) -> Result<(), IngestError> {
        progress(Step::Reading {
            source: Source::Nsys,
            path,
        });
        let conv = TraceConverter::with_stage_names(self.req.stage_names.clone());
        let mut diags = Diagnostics::new(Source::Nsys, self.names().file(path));
        let process = self.req.nsys_process;
        let spill = spill_dir(self.req);
        let (facts, conv) = nsys::read_process(path, process, conv, &spill, &mut diags)?;
        self.facts.push(facts);
        self.bundle.inputs.push(self.input_file(Source::Nsys, path));
        self.bundle.timing_source = Some(Source::Nsys);
        self.timing = Some(Timing { conv, diags });
        Ok(())
    }

    /// Reads the PyTorch profiler trace: its operators always, and its stages, kernels and
    /// timeline when no Nsight Systems export came first.
    fn read_kineto(
        &mut self,
        path: &Path,
        progress: &mut dyn FnMut(Step<'_>),
    ) -> Result<(), IngestError> {
        progress(Step::Reading {
            source: Source::Kineto,
            path,
        });
        let mut diags = Diagnostics::new(Source::Kineto, self.names().file(path));
        let is_timing = self.timing.is_none();
        let mut conv = TraceConverter::with_stage_names(self.req.stage_names.clone());
        let of = match input::is_gzip(path) {
            true => input::gzip_inflated_size(path),
            false => std::fs::metadata(path).ok().map(|m| m.len()),
        };
        let mut read = |bytes| progress(Step::Read { bytes, of });
        let k = kineto::read(path, is_timing.then_some(&mut conv), &mut diags, &mut read)?;
        self.facts.push(k.facts.clone());
        self.bundle
            .inputs
            .push(self.input_file(Source::Kineto, path));
        if is_timing {
            self.bundle.timing_source = Some(Source::Kineto);
            // Shapes describe this trace's own pass only: use them when it is the timing
            // source (with --nsys the passes differ, e.g. in decode steps).
            self.base_workload = workload::from_inferred(&k.inferred);
            self.timing = Some(Timing {
                conv: Conversion::Batch(conv),
                diags,
            });
        } else {
            diags.note(
                "kineto.timing_from_nsys",
                Severity::Info,
                || {
                    "stages, kernels and the timeline come from the Nsight Systems export; this \
                     trace contributes the operator table"
                        .into()
                },
                String::new,
            );
            self.bundle.diagnostics.extend(diags.finish());
        }
        self.operator_calls = Some(k.calls);
        Ok(())
    }

    /// Reads the Nsight Compute CSVs (files or directories).
    fn read_ncu(&mut self, progress: &mut dyn FnMut(Step<'_>)) -> Result<(), IngestError> {
        for path in &self.req.ncu {
            progress(Step::Reading {
                source: Source::Ncu,
                path,
            });
        }
        let mut n = ncu::read_ncu_paths(&self.req.ncu)?;
        let names = self.names();
        for k in &mut n.kernels {
            k.file = names.text(&k.file);
        }
        for d in &mut n.diagnostics {
            d.file = names.text(&d.file);
        }
        for path in &self.req.ncu {
            self.bundle.inputs.push(self.input_file(Source::Ncu, path));
        }
        self.ncu = Some(n);
        Ok(())
    }

    /// Reads the model config and the workload's metadata, then fills the workload: flags
    /// win over metadata, which wins over the inferred token counts.
    fn read_model_config_and_metadata(&mut self) -> Result<(), IngestError> {
        let req = self.req;
        let names = self.names();
        if let Some(path) = &req.model_config {
            let mut model = read_model_config(path)?;
            model.source = names.file(path);
            self.bundle.model = Some(model);
            let input = self.input_file(Source::ModelConfig, path);
            self.bundle.inputs.push(input);
        }
        let metadata = match &req.metadata {
            Some(path) => {
                let m = read_metadata(path)?;
                let input = self.input_file(Source::Metadata, path);
                self.bundle.inputs.push(input);
                Some((names.file(path), m))
            }
            None => None,
        };
        let base = std::mem::take(&mut self.base_workload);
        workload::assemble(&mut self.bundle, req, metadata.as_ref(), base);
        Ok(())
    }

    /// Finishes the timing source's converter into the bundle's stages, kernels, totals and
    /// timeline info; its diagnostics go before those recorded so far. Returns the timeline.
    /// `before_timeline` runs before the timeline is built (or at once, with no timing source).
    fn finish_timing(
        &mut self,
        before_timeline: impl FnOnce(),
    ) -> Result<Option<RunTimeline>, IngestError> {
        let Some(Timing { conv, mut diags }) = self.timing.take() else {
            before_timeline();
            return Ok(None);
        };
        let parts = conv.finish_then(&mut diags, before_timeline)?;
        let bundle = &mut self.bundle;
        bundle.stages = parts.stages;
        bundle.kernels = parts.kernels;
        bundle.instance_kernels = parts.instance_kernels;
        bundle.totals = parts.totals;
        self.collectives = parts.collectives;
        let mut t = parts.timeline;
        let (kernels, mem_ops, ranges) = t.lens();
        let head = t.head_mut();
        // The timing source's facts come first: nsys is read before kineto.
        head.t0_epoch_ns = self
            .facts
            .first()
            .and_then(|f| f.clock_zero_epoch_ns)
            .map(|zero| zero.saturating_add(head.t0_ns));
        bundle.timeline = Some(TimelineInfo {
            path: TIMELINE_FILE.to_string(),
            kernels: kernels as u64,
            mem_ops: mem_ops as u64,
            ranges: ranges as u64,
            t0_ns: Some(head.t0_ns),
            t0_epoch_ns: head.t0_epoch_ns,
        });
        let mut d = diags.finish();
        d.append(&mut bundle.diagnostics);
        bundle.diagnostics = d;
        Ok(Some(t))
    }

    /// `path` as an input of the bundle, named as [`PathNames`] says.
    fn input_file(&self, source: Source, path: &Path) -> InputFile {
        InputFile {
            source,
            path: self.names().file(path),
            bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        }
    }

    /// Puts the trace's operators into the bundle, their stages mapped to bundle stage ids.
    fn attach_operators(&mut self, operators: Option<kineto::TraceOperators>) {
        let Some(t) = operators else {
            return;
        };
        let names = self.names();
        let file = self.req.kineto.as_ref().map(|p| names.file(p));
        let mut diags = Diagnostics::new(Source::Kineto, file.unwrap_or_default());
        self.bundle.operators =
            resolve_operator_stages(t.operators, &t.stage_names, &self.bundle.stages, &mut diags);
        self.bundle.diagnostics.extend(diags.finish());
    }

    /// Joins the ncu kernels to the bundle's kernels by name, reports those that match none
    /// (when there is a timing source), and adds ncu's device facts and diagnostics.
    fn attach_ncu(&mut self) {
        let Some(mut n) = self.ncu.take() else {
            return;
        };
        let names = self.names();
        let bundle = &mut self.bundle;
        ncu::join_ncu(&mut bundle.kernels, &mut n.kernels);
        if bundle.timing_source.is_some() {
            let files: Vec<String> = self.req.ncu.iter().map(|p| names.file(p)).collect();
            bundle.diagnostics.push(unmatched_ncu(&files, &n.kernels));
            bundle.diagnostics.retain(|d| d.count > 0);
        }
        self.facts.push(SourceFacts {
            device: n.device,
            ..SourceFacts::default()
        });
        bundle.ncu = n.kernels;
        bundle.diagnostics.extend(n.diagnostics);
    }

    /// Merges the device and environment facts, marks the warm-up instances and names the
    /// run.
    fn finish(mut self, timeline: Option<RunTimeline>) -> Result<Ingested, IngestError> {
        let names = self.names();
        merge_facts(&mut self.bundle, self.facts);
        let env = &mut self.bundle.environment;
        env.command = env.command.as_deref().map(|c| names.command(c));
        let leading = self.req.warmup_instances.unwrap_or(0);
        self.bundle
            .mark_warmup(leading, Some(WARMUP_FLAG.to_string()));
        let collectives = std::mem::take(&mut self.collectives);
        if let (Some(t), false) = (&timeline, collectives.is_empty()) {
            // A spilled timeline is loaded whole here: only a run with collectives needs it.
            let spill = spill_dir(self.req);
            let loaded = t.load().map_err(|source| IngestError::Spill {
                path: spill,
                source,
            })?;
            self.bundle.communication = communication::of(&self.bundle, &loaded, collectives);
        }
        self.bundle.run_id = llmprof_store::run_id(&self.bundle);
        Ok(Ingested {
            bundle: self.bundle,
            timeline,
        })
    }
}

/// Where a timeline built on disk goes ([`IngestRequest::spill_dir`]).
fn spill_dir(req: &IngestRequest) -> PathBuf {
    (req.spill_dir.clone()).unwrap_or_else(std::env::temp_dir)
}

/// The diagnostic counting ncu kernels whose name matches no kernel of the timing source.
fn unmatched_ncu(files: &[String], kernels: &[NcuKernel]) -> llmprof_bundle::Diagnostic {
    let unmatched = kernels.iter().filter(|k| k.kernel.is_none()).count() as u64;
    let example = kernels
        .iter()
        .find(|k| k.kernel.is_none())
        .map(|k| k.name.clone())
        .unwrap_or_default();
    llmprof_bundle::Diagnostic {
        source: Source::Ncu,
        file: files.join(", "),
        code: "ncu.unmatched_kernels".into(),
        severity: Severity::Info,
        message: "ncu kernels whose name matches no kernel of the timing source".into(),
        count: unmatched,
        example,
    }
}

/// Applies the token counts, metadata, peaks and warm-up count of `req` to an existing bundle
/// (flags and metadata win over what the bundle holds): `llmprof analyze` with new numbers.
/// Warm-up instances are marked again, with the bundle's own leading count unless `req` gives
/// one, so bundles written before warm-up marks get them.
pub fn apply_overrides(bundle: &mut Bundle, req: &IngestRequest) -> Result<(), IngestError> {
    let names = PathNames::new(req.relative_to.as_deref());
    let metadata = match &req.metadata {
        Some(path) => Some((names.file(path), read_metadata(path)?)),
        None => None,
    };
    if let Some(path) = &req.model_config {
        let mut model = read_model_config(path)?;
        model.source = names.file(path);
        bundle.model = Some(model);
    }
    let base = bundle.workload.clone().unwrap_or_default();
    workload::assemble(bundle, req, metadata.as_ref(), base);
    let (leading, source) = match (req.warmup_instances, &bundle.warmup) {
        (Some(n), _) => (n, Some(WARMUP_FLAG.to_string())),
        (None, Some(w)) => (w.leading, w.source.clone()),
        (None, None) => (0, None),
    };
    bundle.mark_warmup(leading, source);
    Ok(())
}

fn read_metadata(path: &Path) -> Result<llmprof_bundle::RunMetadata, IngestError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| IngestError::io(what::METADATA, path, e))?;
    if text.trim().is_empty() {
        return Err(IngestError::Empty {
            what: what::METADATA,
            path: path.to_path_buf(),
        });
    }
    serde_json::from_str(&text).map_err(|e| {
        IngestError::invalid(
            what::METADATA,
            path,
            format!("not a run metadata JSON object ({e})"),
        )
    })
}

fn read_model_config(path: &Path) -> Result<ModelInfo, IngestError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| IngestError::io(what::MODEL_CONFIG, path, e))?;
    if text.trim().is_empty() {
        return Err(IngestError::Empty {
            what: what::MODEL_CONFIG,
            path: path.to_path_buf(),
        });
    }
    let config: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        IngestError::invalid(what::MODEL_CONFIG, path, format!("not valid JSON ({e})"))
    })?;
    if !config.is_object() {
        return Err(IngestError::invalid(
            what::MODEL_CONFIG,
            path,
            "expected a JSON object (a Hugging Face config.json)",
        ));
    }
    let model_type = config
        .get("model_type")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Ok(ModelInfo {
        model_type,
        source: path.display().to_string(),
        config,
    })
}

/// Maps operator stages from annotation names to bundle stage ids (by name, default domain).
fn resolve_operator_stages(
    mut operators: Vec<Operator>,
    stage_names: &[String],
    stages: &[llmprof_bundle::Stage],
    diags: &mut Diagnostics,
) -> Vec<Operator> {
    let ids: Vec<Option<u32>> = stage_names
        .iter()
        .map(|n| {
            stages
                .iter()
                .filter(|s| &s.name == n && s.domain.is_empty())
                .map(|s| s.id)
                .next()
        })
        .collect();
    for op in &mut operators {
        op.by_stage
            .retain_mut(|s| match ids.get(s.stage as usize).copied().flatten() {
                Some(id) => {
                    s.stage = id;
                    true
                }
                None => {
                    let name = stage_names
                        .get(s.stage as usize)
                        .cloned()
                        .unwrap_or_default();
                    diags.note(
                        "kineto.annotation_without_stage",
                        Severity::Info,
                        || {
                            "record_function annotations with no stage of the same name in the \
                         timing source: operator calls inside them have no per-stage row"
                                .into()
                        },
                        || name,
                    );
                    false
                }
            });
    }
    operators
}

/// Fills each device/environment field from the first input that knows it.
fn merge_facts(bundle: &mut Bundle, facts: Vec<SourceFacts>) {
    let mut device: Option<Device> = None;
    let mut env = Environment::default();
    let mut captured = None;
    for f in facts {
        if let Some(d) = f.device {
            match &mut device {
                None => device = Some(d),
                Some(cur) if cur.name == d.name => merge_device(cur, d),
                Some(_) => {}
            }
        }
        let e = f.environment;
        macro_rules! fill {
            ($($field:ident),*) => { $( if env.$field.is_none() { env.$field = e.$field; } )* };
        }
        fill!(
            driver_version,
            cuda_driver_version,
            cuda_runtime_version,
            cupti_version,
            os,
            cpu,
            cpu_cores,
            hostname,
            nsys_export_schema,
            command
        );
        env.tools.extend(e.tools);
        if env.distributed.is_none() {
            env.distributed = e.distributed;
        }
        captured = captured.or(f.captured_at_epoch_ns);
    }
    bundle.device = device;
    bundle.environment = env;
    bundle.captured_at = captured.map(llmprof_bundle::time::rfc3339_utc);
}

fn merge_device(cur: &mut Device, other: Device) {
    macro_rules! fill {
        ($($field:ident),*) => { $( if cur.$field.is_none() { cur.$field = other.$field; } )* };
    }
    fill!(
        index,
        uuid,
        chip,
        compute_capability,
        sm_count,
        memory_bytes,
        memory_bandwidth_bytes_per_s,
        sm_clock_max_hz,
        memory_clock_max_hz,
        l2_cache_bytes,
        bus_location
    );
    for s in other.sources {
        if !cur.sources.contains(&s) {
            cur.sources.push(s);
        }
    }
}
