//! An Nsight Systems SQLite export built from structure, not bytes (fuzzing SQLite's file
//! format would mostly test SQLite): the tables llmprof's reader looks at, with the columns two
//! real exports declare (`nsys_tables.rs`, made by `make_nsys_tables.py`), some tables or
//! columns left out, the rows of a base export cut from a real one edited, and rows added —
//! values NULL, small, negative, huge, real, or a name from real exports. The export is read
//! as `llmprof ingest --nsys FILE` reads it (whole ingest, then analysis): any export gives a
//! bundle or an error, never a panic.
#![no_main]

mod nsys_tables;
mod scratch;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use nsys_tables::{BASES, TABLES};
use rusqlite::types::Value;
use rusqlite::Connection;

/// A value of a base row.
#[derive(Clone, Copy, Debug)]
pub enum V {
    N,
    I(i64),
    R(f64),
    T(&'static str),
}

/// What the fuzzer chooses.
#[derive(Arbitrary, Debug)]
struct Input {
    /// 0: no base rows; k: `BASES[k - 1]`.
    base: u8,
    /// Tables left out, one bit per `TABLES` entry.
    absent_tables: u32,
    /// Columns left out: (table, column), each modulo its count.
    absent_columns: Vec<(u8, u8)>,
    /// Base values replaced: (table, row, column, value), each index modulo its count.
    edits: Vec<(u8, u8, u8, Val)>,
    /// Rows added: a table and its values in column order (missing ones NULL).
    rows: Vec<(u8, Vec<Val>)>,
}

#[derive(Arbitrary, Debug, Clone)]
enum Val {
    Null,
    Small(u8),
    Neg(i8),
    Time(u32),
    Big(i64),
    Real(f64),
    Word(u8),
    Text(String),
}

/// Names that mean something to the reader: kernels, API calls, NVTX ranges and domains.
const WORDS: &[&str] = &[
    "decode",
    "prefill",
    "warmup_decode",
    "step",
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaGraphLaunch",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    "NCCL:ncclAllReduce",
    "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT",
    "void at::native::vectorized_elementwise_kernel<4>(int, T2, T3)",
    "triton_poi_fused_add_0",
    "flash_fwd_kernel",
    "NVTX_PUSHPOP_RANGE",
    "NVTX_STARTEND_RANGE",
    "CUDA_MEMCPY_OPER_KIND_HTOD",
    "NVIDIA H100 80GB HBM3",
    "",
];

impl Val {
    fn sql(&self) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Small(v) => Value::Integer(i64::from(*v)),
            Val::Neg(v) => Value::Integer(i64::from(*v)),
            Val::Time(v) => Value::Integer(i64::from(*v) * 1000),
            Val::Big(v) => Value::Integer(*v),
            Val::Real(v) => Value::Real(*v),
            Val::Word(i) => Value::Text(WORDS[*i as usize % WORDS.len()].to_string()),
            Val::Text(s) => Value::Text(s.chars().take(256).collect()),
        }
    }
}

fn base_value(v: &V) -> Value {
    match *v {
        V::N => Value::Null,
        V::I(i) => Value::Integer(i),
        V::R(r) => Value::Real(r),
        V::T(t) => Value::Text(t.to_string()),
    }
}

fuzz_target!(|input: Input| {
    let Ok(file) = tempfile::Builder::new().suffix(".sqlite").tempfile_in(scratch::dir()) else {
        return;
    };
    let Ok(conn) = Connection::open(file.path()) else {
        return;
    };
    if build(&conn, &input).is_err() {
        return;
    }
    drop(conn);
    // The streamed reading's spill files in memory too: in `/tmp` on the GPU host's disk, 32
    // workers made 15 executions a second each, against 400 on this machine.
    let req = llmprof_ingest::IngestRequest {
        nsys: Some(file.path().to_path_buf()),
        spill_dir: Some(scratch::dir().into()),
        ..Default::default()
    };
    if let Ok(run) = llmprof_ingest::ingest(&req, &mut |_| {}) {
        let _ = llmprof_analysis::analyze(&run.bundle);
    }
});

/// Writes the export `input` describes.
fn build(conn: &Connection, input: &Input) -> rusqlite::Result<()> {
    conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;")?;
    let base = match input.base as usize % (BASES.len() + 1) {
        0 => None,
        k => Some(BASES[k - 1].1),
    };
    for (ti, (table, columns)) in TABLES.iter().enumerate() {
        if input.absent_tables & (1 << (ti % 32)) != 0 {
            continue;
        }
        let kept: Vec<usize> = (0..columns.len())
            .filter(|&ci| {
                !input.absent_columns.iter().take(16).any(|&(t, c)| {
                    t as usize % TABLES.len() == ti && c as usize % columns.len() == ci
                })
            })
            .collect();
        if kept.is_empty() {
            continue;
        }
        let decl: Vec<String> = kept
            .iter()
            .map(|&ci| format!("\"{}\" {}", columns[ci].0, columns[ci].1))
            .collect();
        conn.execute_batch(&format!("CREATE TABLE \"{table}\" ({});", decl.join(", ")))?;
        let names: Vec<String> = kept.iter().map(|&ci| format!("\"{}\"", columns[ci].0)).collect();
        let marks = vec!["?"; kept.len()].join(", ");
        let mut insert = conn.prepare(&format!(
            "INSERT INTO \"{table}\" ({}) VALUES ({marks})",
            names.join(", ")
        ))?;
        let mut rows: Vec<Vec<Value>> = base
            .and_then(|b| b.iter().find(|(t, _)| t == table))
            .map(|(_, rows)| rows.iter().map(|r| r.iter().map(base_value).collect()).collect())
            .unwrap_or_default();
        for (t, r, c, v) in input.edits.iter().take(256) {
            if *t as usize % TABLES.len() == ti && !rows.is_empty() {
                let n = rows.len();
                let row = &mut rows[*r as usize % n];
                let w = row.len();
                row[*c as usize % w] = v.sql();
            }
        }
        for (t, values) in input.rows.iter().take(512) {
            if *t as usize % TABLES.len() == ti {
                let mut row: Vec<Value> = values.iter().take(columns.len()).map(Val::sql).collect();
                row.resize(columns.len(), Value::Null);
                rows.push(row);
            }
        }
        for row in &rows {
            let picked = kept.iter().map(|&ci| row.get(ci).cloned().unwrap_or(Value::Null));
            insert.execute(rusqlite::params_from_iter(picked))?;
        }
    }
    conn.execute_batch("COMMIT;")
}
