//! `llmprof site build`.

use std::io::{IsTerminal, Write};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use llmprof_site::{BuildOptions, Step};

use crate::args::SiteBuildArgs;

pub fn build(args: SiteBuildArgs) -> Result<()> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    });
    let opts = BuildOptions {
        runs_dir: args.runs,
        out_dir: args.out,
        chunk_above: args.chunk_above,
    };
    let report = llmprof_site::build(&opts, &mut |step| {
        if let Some(pb) = &bar {
            match step {
                Step::Run { done, total, id } => {
                    pb.set_length(total as u64);
                    pb.set_position(done as u64);
                    pb.set_message(id.to_string());
                }
                Step::Pages => pb.set_message("index and compare pages"),
            }
        }
    });
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    let report = report?;
    let mut err = std::io::stderr().lock();
    for s in &report.skipped {
        let _ = writeln!(err, "warning: skipped {s}");
    }
    let _ = writeln!(
        err,
        "{} run(s): {} updated, {} unchanged",
        report.runs, report.updated, report.unchanged
    );
    let compare = report.index.with_file_name("compare.html");
    for (before, after) in &report.before_after {
        let _ = writeln!(
            err,
            "before/after: {before} → {after} ({}#before-after)",
            compare.display()
        );
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "Site written to {}", report.index.display())?;
    Ok(())
}
