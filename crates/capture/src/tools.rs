//! Finding the external tools a capture needs and checking that they work.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Nsight tools live when they are not on PATH (the CUDA toolkit and Nsight Compute
/// installers put them here; the GPU test host has nsys only inside Nsight Compute's tree).
const NSIGHT_ROOTS: &[&str] = &["/opt/nvidia", "/usr/local/cuda/bin", "/usr/local/cuda"];

/// A tool found on this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub path: PathBuf,
    pub version: String,
}

/// `name` on PATH, else under the usual Nsight install roots (newest version first).
pub fn find(name: &str, env_override: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env_override).map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    if let Some(p) = on_path(name) {
        return Some(p);
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for root in NSIGHT_ROOTS {
        search(Path::new(root), name, 0, &mut found);
    }
    found.sort();
    found.pop()
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn search(dir: &Path, name: &str, depth: u32, found: &mut Vec<PathBuf>) {
    if depth > 5 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            search(&p, name, depth + 1, found);
        } else if p.file_name().is_some_and(|f| f == name) {
            found.push(p);
        }
    }
}

/// Runs `path args` and returns the first line of its output.
pub fn version(path: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new(path).args(args).output().ok()?;
    let text = String::from_utf8_lossy(if o.stdout.is_empty() {
        &o.stderr
    } else {
        &o.stdout
    })
    .into_owned();
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// The interpreter and what it imports, or why it cannot run the driver.
pub fn python(interpreter: &str) -> Result<Tool, String> {
    let path = if interpreter.contains('/') {
        PathBuf::from(interpreter)
    } else {
        on_path(interpreter).ok_or_else(|| format!("`{interpreter}` is not on PATH"))?
    };
    let probe = "import sys, torch, transformers; \
                 print(sys.version.split()[0], torch.__version__, transformers.__version__, \
                 torch.cuda.is_available())";
    let o = Command::new(&path)
        .args(["-c", probe])
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", path.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!(
            "`{}` cannot import torch and transformers: {}",
            path.display(),
            err.lines().last().unwrap_or("")
        ));
    }
    let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
    Ok(Tool { path, version: out })
}
