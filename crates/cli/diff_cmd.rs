//! `llmprof diff A B` and `llmprof check RUN --against BASE --budget …`: the report crate's
//! `Diff` of two runs on the terminal, as Markdown or as JSON, and budgets judged on it.

use std::io::Write;

use anyhow::Result;
use llmprof_report::diff::{parse_budget, verdict_text, BudgetResult, Diff};
use llmprof_report::TableView;
use serde_json::json;

use crate::args::{CheckArgs, DiffArgs};
use crate::table;

pub fn run(args: DiffArgs) -> Result<()> {
    let a = llmprof_store::read_bundle(&args.a)?;
    let b = llmprof_store::read_bundle(&args.b)?;
    let diff = Diff::of(&a, &b);
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &as_json(&diff))?;
        writeln!(out)?;
    } else if args.markdown {
        out.write_all(markdown(&diff).as_bytes())?;
    } else {
        writeln!(out, "B {} against A {}", diff.b, diff.a)?;
        if diff.rows.is_empty() {
            writeln!(out, "  (the runs have no top-level stage in common)")?;
        } else {
            out.write_all(table::render(&diff.table(), 160).as_bytes())?;
        }
        for n in &diff.notes {
            writeln!(out, "  note: {n}")?;
        }
        writeln!(out, "  source: {}", diff.table().source)?;
    }
    Ok(())
}

fn as_json(d: &Diff) -> serde_json::Value {
    let ci = |c: Option<(f64, f64, f64)>| c.map(|(lo, hi, level)| json!([lo, hi, level]));
    let rows: Vec<serde_json::Value> = d
        .rows
        .iter()
        .map(|r| {
            let median = |m: Option<llmprof_report::stats::MedianCi>| {
                m.map(|m| json!({"n": m.n, "median": m.median, "ci": ci(m.ci), "cv_pct": m.cv_pct}))
            };
            json!({
                "key": r.key,
                "metric": r.metric,
                "a": median(r.a),
                "b": median(r.b),
                "delta": r.shift.map(|s| s.delta),
                "delta_ci": r.shift.and_then(|s| ci(s.ci)),
                "delta_pct": r.delta_pct(),
                "verdict": verdict_text(r),
            })
        })
        .collect();
    json!({"a": d.a, "b": d.b, "rows": rows, "notes": d.notes})
}

/// A GitHub-flavoured Markdown table; `|` in cells escaped.
fn markdown(d: &Diff) -> String {
    let t: TableView = d.table();
    let cell = |s: &str| s.replace('|', "\\|");
    let mut s = format!(
        "**llmprof diff**: `{}` against `{}`\n\n",
        cell(&d.b),
        cell(&d.a)
    );
    let headers: Vec<String> = t.columns.iter().map(|c| cell(&c.header)).collect();
    s.push_str(&format!("| {} |\n", headers.join(" | ")));
    let align: Vec<&str> = t
        .columns
        .iter()
        .map(|c| if c.numeric { "---:" } else { "---" })
        .collect();
    s.push_str(&format!("|{}|\n", align.join("|")));
    for row in &t.rows {
        let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
        s.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    for n in &d.notes {
        s.push_str(&format!("\n_Note: {}._\n", cell(n)));
    }
    s.push_str(&format!("\n_Source: {}._\n", t.source));
    s
}

/// A budget that does not parse (exit 2).
#[derive(Debug)]
pub struct BadBudget(pub String);

impl std::fmt::Display for BadBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadBudget {}

/// `llmprof check`: the diff, each term's verdict, the step summary; an error (exit 1) when a
/// term is exceeded beyond noise.
pub fn check(args: CheckArgs) -> Result<()> {
    let budgets = parse_budget(&args.budget).map_err(BadBudget)?;
    if budgets.is_empty() {
        return Err(BadBudget("--budget holds no term".into()).into());
    }
    let base = llmprof_store::read_bundle(&args.against)?;
    let run = llmprof_store::read_bundle(&args.run)?;
    let diff = Diff::of(&base, &run);
    let mut lines = Vec::new();
    let mut exceeded = Vec::new();
    for b in &budgets {
        let (word, detail) = match diff.judge(b) {
            BudgetResult::Exceeded {
                delta_pct: (lo, hi),
            } => {
                exceeded.push(format!("{} (Δ {lo:+.1}% to {hi:+.1}%)", b.term));
                ("EXCEEDED", format!("Δ {lo:+.1}% to {hi:+.1}% (95% CI)"))
            }
            BudgetResult::Within {
                delta_pct: (lo, hi),
            } => ("within", format!("Δ {lo:+.1}% to {hi:+.1}% (95% CI)")),
            BudgetResult::Unknown(why) => ("not judged", why),
        };
        lines.push(format!("{}: {word}: {detail}", b.term));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "B {} against A {}", diff.b, diff.a)?;
    out.write_all(table::render(&diff.table(), 160).as_bytes())?;
    for n in &diff.notes {
        writeln!(out, "  note: {n}")?;
    }
    for l in &lines {
        writeln!(out, "  budget  {l}")?;
    }
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
        let mut md = markdown(&diff);
        md.push('\n');
        for l in &lines {
            md.push_str(&format!("- {}\n", l.replace('|', "\\|")));
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(md.as_bytes()))
            .map_err(|e| {
                anyhow::anyhow!("$GITHUB_STEP_SUMMARY `{}`: {e}", path.to_string_lossy())
            })?;
    }
    if exceeded.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("budget exceeded beyond noise: {}", exceeded.join(", "))
    }
}
