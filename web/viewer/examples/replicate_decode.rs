//! Makes a large run for benchmarking the viewer ([`llmprof_viewer::replicate`]): a real run's
//! last decode-stage instance replicated until the timeline holds at least N kernels.
//!
//!     cargo run --release -p llmprof-viewer --example replicate_decode -- RUN_DIR OUT_RUNS_DIR [N]
//!
//! The result is a run directory (`bundle.json`, `timeline.json`) named `<run-id>-decode-xK`.

use std::error::Error;
use std::path::PathBuf;

use llmprof_bundle::{Bundle, Timeline, BUNDLE_FILE, TIMELINE_FILE};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(run), Some(out)) = (args.first(), args.get(1)) else {
        return Err(
            "usage: replicate_decode RUN_DIR OUT_RUNS_DIR [KERNELS, default 1000000]".into(),
        );
    };
    let target: usize = match args.get(2) {
        Some(n) => n
            .parse()
            .map_err(|_| format!("KERNELS `{n}` is not a number"))?,
        None => 1_000_000,
    };
    let run = PathBuf::from(run);
    let read = |name: &str| {
        let path = run.join(name);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let bundle = Bundle::from_json(&read(BUNDLE_FILE)?)?;
    let tl = Timeline::from_json(&read(TIMELINE_FILE)?)?;
    let (bundle, tl, copies) = llmprof_viewer::replicate::last_decode(&bundle, &tl, target)
        .map_err(|e| format!("{}: {e}", run.display()))?;
    let dir = PathBuf::from(out).join(&bundle.run_id);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(BUNDLE_FILE), serde_json::to_string(&bundle)?)?;
    std::fs::write(dir.join(TIMELINE_FILE), serde_json::to_string(&tl)?)?;
    println!(
        "{}: {} kernels ({copies} copies of the last decode instance), {} memcpy/memset, {} ranges",
        dir.display(),
        tl.kernels.start.len(),
        tl.mem_ops.start.len(),
        tl.ranges.start.len()
    );
    Ok(())
}
