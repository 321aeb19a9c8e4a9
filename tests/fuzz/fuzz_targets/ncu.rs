//! An Nsight Compute CSV (raw page, details, long formats) as `ingest --ncu` reads it, from
//! memory (`read_ncu_bytes`: the reader a file goes through, without the temporary file), then
//! joined to a kernel table named after its rows, as ingest joins it to a trace's kernels: any
//! bytes give ncu rows or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmprof_bundle::{names, Kernel, OpKind};
use llmprof_ingest::ncu::{join_ncu, read_ncu_bytes};

fuzz_target!(|data: &[u8]| {
    let Ok(mut input) = read_ncu_bytes("fuzz.csv", data) else {
        return;
    };
    let mut kernels: Vec<Kernel> = input
        .kernels
        .iter()
        .take(64)
        .zip(0u32..)
        .map(|(n, id)| kernel(id, &n.name))
        .collect();
    join_ncu(&mut kernels, &mut input.kernels);
});

fn kernel(id: u32, name: &str) -> Kernel {
    Kernel {
        id,
        kind: OpKind::Kernel,
        name: name.to_string(),
        short_name: names::short_name(name),
        category: names::category(name),
        calls: 1,
        total_ns: 1,
        mean_ns: 1.0,
        median_ns: 1.0,
        min_ns: 1,
        max_ns: 1,
        std_ns: 0.0,
        time_pct: 0.0,
        by_stage: Vec::new(),
        launch: None,
        launch_variants: 0,
        bytes: None,
        graph_calls: 0,
        ncu: Vec::new(),
    }
}
