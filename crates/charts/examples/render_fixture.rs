//! Renders every chart of the H200 Qwen2-0.5B fixture into a directory, to look at them:
//! `cargo run -p llmprof-charts --example render_fixture -- /tmp/charts`.

use std::path::PathBuf;

use llmprof_ingest::{ingest, IngestRequest};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/h200-qwen2-0.5b"
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "charts".to_string()),
    );
    std::fs::create_dir_all(&out)?;
    let req = IngestRequest {
        nsys: Some(format!("{FIXTURE}/nsys_export.sqlite.gz").into()),
        ncu: vec![format!("{FIXTURE}/ncu_decode_raw.csv").into()],
        label: Some("qwen2-0.5b h200".to_string()),
        ..Default::default()
    };
    let b = ingest(&req, &mut |_| {})?.bundle;
    let mut other = b.clone();
    other.run_id = "20260101-000000-other".to_string();
    other.label = None;
    for s in &mut other.stages {
        s.wall_ns /= 2;
    }
    let charts = [
        ("stage_breakdown", llmprof_charts::stage_breakdown(&b)),
        ("category_share", llmprof_charts::category_share(&b)),
        ("top_kernels", llmprof_charts::top_kernels(&b, 15)),
        ("speed_of_light", llmprof_charts::speed_of_light(&b)),
        (
            "compare_stages",
            llmprof_charts::compare_stages(&llmprof_report::Comparison::of(&[&b, &other])),
        ),
        (
            "compare_category_mix",
            llmprof_charts::compare_category_mix(&llmprof_report::Comparison::of(&[&b, &other])),
        ),
    ];
    for (name, svg) in charts {
        match svg {
            Some(svg) => {
                let path = out.join(format!("{name}.svg"));
                std::fs::write(&path, &svg)?;
                println!("{} ({} bytes)", path.display(), svg.len());
            }
            None => println!("{name}: no data"),
        }
    }
    Ok(())
}
