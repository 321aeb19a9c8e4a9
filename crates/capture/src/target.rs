//! Capture targets (`configs/*.toml`): the model, the inputs and how to run it. A new model needs
//! only a new file.
//!
//! ```toml
//! name = "qwen2.5-0.5b"
//! [model]                     # random weights from `config`, or `path` = a local checkpoint
//! dtype = "bfloat16"
//! attn_implementation = "sdpa"
//! [model.config]              # a Hugging Face config.json, inline
//! model_type = "qwen2"
//! hidden_size = 896
//! [inputs]
//! prompt_tokens = 512
//! max_new_tokens = 64
//! batch_size = 1
//! [stages.modules]            # optional NVTX sub-stages by module path
//! sam = "model.vision_tower.sam_encoder"
//! [run]
//! warmup = 2
//! repeats = 6                 # measured iterations per process (the fewest with a 95% median CI)
//! python = "python3"
//! [optimize]                  # optional: how the decode step runs (default: eager, dynamic)
//! compile = "reduce-overhead" # none | default | reduce-overhead | max-autotune (torch.compile)
//! cache = "static"            # dynamic | static (transformers' StaticCache: fixed shapes)
//! ```
//!
//! Any key can be overridden from the command line (`llmprof capture --set
//! optimize.compile=reduce-overhead --set run.repeats=5`): the overrides are applied to the
//! TOML before it is checked, and the run records them, so one target file gives a before run
//! and an after run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::CaptureError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub model: ModelSpec,
    pub inputs: Inputs,
    #[serde(default)]
    pub stages: Stages,
    #[serde(default)]
    pub run: RunSpec,
    #[serde(default)]
    pub optimize: Optimize,
}

/// How the decode step runs: compiled or eager, with a static or a growing KV cache. The
/// driver compiles and captures before the measured iterations, outside every measured range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Optimize {
    #[serde(default)]
    pub compile: CompileMode,
    #[serde(default)]
    pub cache: KvCache,
}

/// `torch.compile` mode of the decode step (`none`: eager).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompileMode {
    #[default]
    None,
    Default,
    /// CUDA graphs (CUDAGraph Trees) around the compiled step.
    ReduceOverhead,
    /// Autotuned kernels, with CUDA graphs.
    MaxAutotune,
}

/// The KV cache of the decode loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvCache {
    /// transformers' DynamicCache: grows every step.
    #[default]
    Dynamic,
    /// transformers' StaticCache: allocated once, fixed shapes, so a compiled step is one graph.
    Static,
}

impl Optimize {
    /// `compile=reduce-overhead cache=static`, or `None` when eager with a dynamic cache.
    pub fn describe(&self) -> Option<String> {
        (*self != Optimize::default()).then(|| {
            format!(
                "compile={} cache={}",
                self.compile.as_str(),
                self.cache.as_str()
            )
        })
    }
}

impl CompileMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CompileMode::None => "none",
            CompileMode::Default => "default",
            CompileMode::ReduceOverhead => "reduce-overhead",
            CompileMode::MaxAutotune => "max-autotune",
        }
    }
}

impl KvCache {
    pub fn as_str(self) -> &'static str {
        match self {
            KvCache::Dynamic => "dynamic",
            KvCache::Static => "static",
        }
    }
}

/// One `--set KEY=VALUE`: a dotted key of the target file and a TOML value (a bare word that
/// is not valid TOML, such as `reduce-overhead`, is a string).
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub key: Vec<String>,
    pub value: toml::Value,
    /// As given, for the run's record.
    pub text: String,
}

impl Override {
    pub fn parse(text: &str) -> Result<Override, String> {
        let (key, value) = text.split_once('=').ok_or_else(|| {
            format!("--set `{text}`: give KEY=VALUE, such as optimize.compile=reduce-overhead")
        })?;
        let key: Vec<String> = key
            .trim()
            .split('.')
            .map(|k| k.trim().to_string())
            .collect();
        if key.iter().any(|k| k.is_empty()) {
            return Err(format!(
                "--set `{text}`: the key must be dotted names, such as run.repeats"
            ));
        }
        let value = value.trim();
        // A TOML value (3, true, "x", [1, 2]); anything else is taken as a string.
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        Ok(Override {
            key,
            value: parsed,
            text: text.trim().to_string(),
        })
    }

    /// Sets the value in `doc`, creating tables on the way.
    fn apply(&self, doc: &mut toml::Table) -> Result<(), String> {
        let (last, path) = self.key.split_last().ok_or("empty key")?;
        let mut table = doc;
        for (i, k) in path.iter().enumerate() {
            let entry = table
                .entry(k.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = entry.as_table_mut().ok_or_else(|| {
                format!(
                    "--set `{}`: `{}` is a value, not a table",
                    self.text,
                    self.key[..=i].join(".")
                )
            })?;
        }
        table.insert(last.clone(), self.value.clone());
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// A Hugging Face config for random weights (the default: nothing is downloaded).
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// A local checkpoint directory (`from_pretrained(path)`).
    #[serde(default)]
    pub path: Option<PathBuf>,
    #[serde(default = "default_dtype")]
    pub dtype: String,
    #[serde(default)]
    pub attn_implementation: Option<String>,
}

fn default_dtype() -> String {
    "bfloat16".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    pub prompt_tokens: u64,
    pub max_new_tokens: u64,
    #[serde(default = "one")]
    pub batch_size: u64,
    /// A folder of document images (OCR targets).
    #[serde(default)]
    pub images: Option<PathBuf>,
    #[serde(default)]
    pub seed: u64,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stages {
    /// Sub-stage name -> module path, marked with NVTX and `record_function` by forward hooks.
    #[serde(default)]
    pub modules: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    #[serde(default = "two")]
    pub warmup: u64,
    /// Measured iterations per process: 6 by default, the fewest whose median has a 95%
    /// distribution-free confidence interval (order statistics).
    #[serde(default = "six")]
    pub repeats: u64,
    /// The Python interpreter that has torch and transformers.
    #[serde(default = "python")]
    pub python: String,
    /// Seconds one pass may run before it is stopped.
    #[serde(default = "timeout")]
    pub timeout_s: u64,
    /// Under `--nproc`: seconds a rank waits in a collective its peers never join before it
    /// fails naming itself (the NCCL process group's timeout), instead of hanging the group.
    #[serde(default = "collective_timeout")]
    pub collective_timeout_s: u64,
}

fn two() -> u64 {
    2
}
fn six() -> u64 {
    6
}
fn python() -> String {
    "python3".into()
}
fn timeout() -> u64 {
    900
}
fn collective_timeout() -> u64 {
    300
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            warmup: two(),
            repeats: six(),
            python: python(),
            timeout_s: timeout(),
            collective_timeout_s: collective_timeout(),
        }
    }
}

impl Target {
    /// Reads and validates a target file.
    pub fn load(path: &Path) -> Result<Target, CaptureError> {
        Target::load_with(path, &[])
    }

    /// Reads a target file, applies `--set` overrides, and validates the result.
    pub fn load_with(path: &Path, overrides: &[Override]) -> Result<Target, CaptureError> {
        let err = |message: String| CaptureError::Target {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read ({e})")))?;
        let mut doc: toml::Table = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        for o in overrides {
            o.apply(&mut doc).map_err(&err)?;
        }
        let mut target: Target = doc.try_into().map_err(|e: toml::de::Error| {
            let set: Vec<&str> = overrides.iter().map(|o| o.text.as_str()).collect();
            let (message, section) = schema_error(&e);
            let message = if set.is_empty() {
                message
            } else {
                format!("{message} (with --set {})", set.join(" --set "))
            };
            err(with_example(message, &section))
        })?;
        // Relative paths in a target are relative to the target file.
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [&mut target.model.path, &mut target.inputs.images]
            .into_iter()
            .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        target.validate().map_err(|m| {
            let section = validation_section(&m).to_string();
            err(with_example(m, &section))
        })?;
        Ok(target)
    }

    fn validate(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("`name` is empty".into());
        }
        match (&self.model.config, &self.model.path) {
            (None, None) => {
                return Err(
                    "[model] needs `config` (random weights) or `path` (a checkpoint)".into(),
                )
            }
            (Some(_), Some(_)) => {
                return Err("[model] has both `config` and `path`: pick one".into())
            }
            (Some(c), None) => {
                if c.get("model_type").and_then(|v| v.as_str()).is_none() {
                    return Err("[model.config] has no `model_type`".into());
                }
            }
            (None, Some(p)) => {
                if !p.join("config.json").is_file() {
                    return Err(format!(
                        "model path `{}` has no config.json: is it a Hugging Face checkpoint?",
                        p.display()
                    ));
                }
            }
        }
        if !matches!(
            self.model.dtype.as_str(),
            "bfloat16" | "float16" | "float32"
        ) {
            return Err(format!(
                "[model] dtype `{}`: use bfloat16, float16 or float32",
                self.model.dtype
            ));
        }
        let i = &self.inputs;
        if i.prompt_tokens == 0 || i.max_new_tokens == 0 || i.batch_size == 0 {
            return Err("[inputs] prompt_tokens, max_new_tokens and batch_size must be > 0".into());
        }
        if let Some(images) = &i.images {
            if !images.is_dir() {
                return Err(format!(
                    "[inputs] images folder `{}` does not exist",
                    images.display()
                ));
            }
        }
        if self.run.repeats == 0 {
            return Err("[run] repeats must be > 0".into());
        }
        if !(1..=86_400).contains(&self.run.collective_timeout_s) {
            return Err("[run] collective_timeout_s must be 1 to 86400 seconds".into());
        }
        Ok(())
    }

    /// The model config to store with the run (inline config, or the checkpoint's).
    pub fn model_config(&self) -> Option<serde_json::Value> {
        if let Some(c) = &self.model.config {
            return Some(c.clone());
        }
        let p = self.model.path.as_ref()?.join("config.json");
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    }
}

/// The tables of a target file.
const SECTIONS: &[&str] = &["model", "inputs", "stages", "run", "optimize"];

/// A toml error in words that name the key (`inputs.prompt_tokens: invalid type: …`, `[inputs]
/// is missing`), and the section (`inputs`, or `` for a top-level key) whose example helps.
fn schema_error(e: &toml::de::Error) -> (String, String) {
    let text = e.to_string();
    let (what, path) = match text.rsplit_once("\nin `") {
        Some((what, rest)) => (what.trim(), rest.trim().trim_end_matches('`')),
        None => (text.trim(), ""),
    };
    let missing = what
        .strip_prefix("missing field `")
        .and_then(|f| f.strip_suffix('`'));
    match (missing, path) {
        (Some(f), "") if SECTIONS.contains(&f) => (format!("`[{f}]` is missing"), f.to_string()),
        (Some(f), "") => (format!("`{f}` is missing"), String::new()),
        (Some(f), p) => (format!("`{p}.{f}` is missing"), section_of(p)),
        (None, p) if what.starts_with("unknown field `") => {
            let (field, rest) = what["unknown field `".len()..]
                .split_once('`')
                .unwrap_or((what, ""));
            let key = if p.is_empty() {
                field.to_string()
            } else {
                format!("{p}.{field}")
            };
            let rest = rest.trim_start_matches(',').trim();
            (format!("`{key}`: unknown key; {rest}"), section_of(p))
        }
        (None, "") => (what.to_string(), String::new()),
        (None, p) => (format!("`{p}`: {what}"), section_of(p)),
    }
}

/// `inputs` of `inputs.prompt_tokens`, `model` of `model.config`.
fn section_of(path: &str) -> String {
    path.split('.').next().unwrap_or_default().to_string()
}

/// The section a validation message starts with (`[model] dtype …` → `model`).
fn validation_section(message: &str) -> &str {
    message
        .strip_prefix('[')
        .and_then(|m| m.split([']', '.']).next())
        .unwrap_or_default()
}

/// `message`, then how `section` looks in a working target.
fn with_example(message: String, section: &str) -> String {
    let example = example(section).unwrap_or(EXAMPLE_TOP);
    let indented: Vec<String> = example.lines().map(|l| format!("    {l}")).collect();
    format!(
        "{message}. In a working target (configs/qwen2.5-0.5b.toml is one) that reads:\n{}",
        indented.join("\n")
    )
}

const EXAMPLE_TOP: &str = "name = \"qwen2.5-0.5b\"            # the run's name\n\
    [model] …  [inputs] …  [run] …  (optional: [stages.modules], [optimize])";

/// What each section of a target holds, as it looks in a working target.
fn example(section: &str) -> Option<&'static str> {
    Some(match section {
        "" | "name" | "description" => EXAMPLE_TOP,
        "model" => {
            "[model]                          # random weights from `config`, or path = \"/models/ckpt\"\n\
             dtype = \"bfloat16\"               # bfloat16 | float16 | float32\n\
             attn_implementation = \"sdpa\"\n\
             [model.config]                   # a Hugging Face config.json, inline\n\
             model_type = \"qwen2\"\n\
             hidden_size = 896"
        }
        "inputs" => {
            "[inputs]\n\
             prompt_tokens = 512\n\
             max_new_tokens = 64\n\
             batch_size = 1"
        }
        "stages" => {
            "[stages.modules]                 # NVTX sub-stages by module path\n\
             sam = \"model.vision_tower.sam_encoder\""
        }
        "run" => {
            "[run]\n\
             warmup = 2\n\
             repeats = 6\n\
             python = \"python3\"\n\
             timeout_s = 3600\n\
             collective_timeout_s = 300       # --nproc: a rank stuck in a collective fails"
        }
        "optimize" => {
            "[optimize]\n\
             compile = \"reduce-overhead\"      # none | default | reduce-overhead | max-autotune\n\
             cache = \"static\"                 # dynamic | static"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../configs")
            .join(name)
    }

    #[test]
    fn shipped_targets_load() {
        for name in [
            "qwen2.5-0.5b.toml",
            "qwen3-moe-small.toml",
            "deepseek-ocr2.toml",
        ] {
            let t = Target::load(&shipped(name)).unwrap();
            assert!(t.model_config().is_some(), "{name}");
        }
    }

    #[test]
    fn set_overrides_any_key_and_typos_are_errors() {
        let path = shipped("qwen2.5-0.5b.toml");
        let set = |s: &[&str]| -> Vec<Override> {
            s.iter().map(|t| Override::parse(t).unwrap()).collect()
        };
        let t = Target::load_with(
            &path,
            &set(&[
                "optimize.compile=reduce-overhead",
                "optimize.cache=static",
                "run.repeats=5",
                "run.collective_timeout_s=30",
                "inputs.prompt_tokens = 128",
            ]),
        )
        .unwrap();
        assert_eq!(t.run.collective_timeout_s, 30);
        assert_eq!(t.optimize.compile, CompileMode::ReduceOverhead);
        assert_eq!(t.optimize.cache, KvCache::Static);
        assert_eq!((t.run.repeats, t.inputs.prompt_tokens), (5, 128));
        assert_eq!(
            t.optimize.describe().as_deref(),
            Some("compile=reduce-overhead cache=static")
        );
        assert_eq!(Target::load(&path).unwrap().optimize, Optimize::default());
        for (bad, says) in [
            ("optimize.compil=default", "`optimize.compil`: unknown key"),
            ("optimize.compile=fast", "unknown variant `fast`"),
            ("name.x=1", "is a value, not a table"),
            ("run.repeats=0", "repeats must be > 0"),
            (
                "run.collective_timeout_s=0",
                "collective_timeout_s must be 1 to 86400",
            ),
        ] {
            let e = Target::load_with(&path, &set(&[bad]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("qwen2.5-0.5b.toml") && e.contains(says),
                "{bad}: {e}"
            );
        }
        assert!(Override::parse("no-equals").is_err());
        assert!(Override::parse("a..b=1").is_err());
        assert_eq!(
            Override::parse("model.dtype=\"float16\"").unwrap().value,
            toml::Value::String("float16".into())
        );
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let write = |body: &str| {
            let p = dir.path().join("t.toml");
            std::fs::write(&p, body).unwrap();
            p
        };
        let cases = [
            ("name = \"x\"\n[model]\n[inputs]\nprompt_tokens = 1\nmax_new_tokens = 1\n", "needs `config`"),
            ("name = \"x\"\n[model]\ndtype = \"int3\"\n[model.config]\nmodel_type = \"qwen2\"\n[inputs]\nprompt_tokens = 1\nmax_new_tokens = 1\n", "dtype"),
            ("name = \"x\"\n[model.config]\nmodel_type = \"qwen2\"\n[inputs]\nprompt_tokens = 0\nmax_new_tokens = 1\n", "> 0"),
            ("name = \"x\"\nbogus = 1\n", "`bogus`: unknown key"),
            ("not toml at all [", "TOML"),
        ];
        for (body, says) in cases {
            let e = Target::load(&write(body)).unwrap_err().to_string();
            assert!(
                e.contains("t.toml") && e.to_lowercase().contains(&says.to_lowercase()),
                "{e}"
            );
        }
    }
}
