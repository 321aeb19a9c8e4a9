//! Nsight Systems SQLite export (`nsys export --type sqlite`): [`read`] feeds a whole export
//! to the converter; [`top_kernels_by_time`] answers capture's one question of an export (which
//! kernels Nsight Compute should profile). Nothing else in llmprof opens an export.
//!
//! Exports carry no indexes and their tables and columns change between schema versions, so
//! every table and column is checked (`sqlite_master`, `PRAGMA table_info`) before it is read,
//! and enum values (NVTX event types, memcpy directions) are read from the export's own
//! `ENUM_*` tables rather than hard-coded.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use llmprof_bundle::{names, Category, Device, Launch, Severity, Source, StageKind, ToolInfo};
use rusqlite::{Connection, OpenFlags};

use crate::convert::{Conversion, TraceConverter};

mod streamed;

use crate::diagnostics::Diagnostics;
use crate::error::{what::NSYS, IngestError};
use crate::input;
use crate::records::{GpuOp, GpuOpRecord, GraphRef, LaunchRecord, RangeRecord};
use crate::SourceFacts;
use streamed::Budgets;

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

/// Bits of `globalTid` below the process id: `globalTid = hw << 56 | pid << 24 | tid`.
const TID_BITS: u64 = 0xFF_FFFF;

/// Reads the export at `path` into `conv`; returns what it reveals about the device and the
/// environment.
pub fn read(
    path: &Path,
    conv: TraceConverter,
    spill: &Path,
    diags: &mut Diagnostics,
) -> Result<(SourceFacts, Conversion), IngestError> {
    read_process(path, None, conv, spill, diags)
}

/// [`read`] of one process's records only (`process`: its `globalPid`, as
/// [`gpu_processes`] lists it); `None` reads every process.
pub fn read_process(
    path: &Path,
    process: Option<u64>,
    conv: TraceConverter,
    spill: &Path,
    diags: &mut Diagnostics,
) -> Result<(SourceFacts, Conversion), IngestError> {
    let (_inflated, mut db) = open(path)?;
    db.process = process;
    let budgets = Budgets::of_export(db.bytes());
    db.read_into(conv, Mode::Streamed { spill, budgets }, diags)
}

/// A process that ran kernels in an export: its `globalPid`, OS pid, the device it ran most
/// kernels on, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProcess {
    pub global_pid: u64,
    pub pid: u32,
    pub device: Option<i64>,
    pub kernels: u64,
}

/// The processes that ran kernels in the export at `path`, in rank order as `torchrun` assigns
/// devices: by device, then pid. Empty without a kernel table.
pub fn gpu_processes(path: &Path) -> Result<Vec<GpuProcess>, IngestError> {
    let (_inflated, db) = open(path)?;
    db.gpu_processes()
}

/// The short names of the `k` kernels with the most GPU time (the sum of their `end - start`)
/// in the export at `path`, most first, ties by name. Kernels whose name is not in `StringIds`
/// or whose times are missing are left out, and so are communication kernels (NCCL's and
/// the like, by [`llmprof_bundle::names::category`]): Nsight Compute replays a kernel to
/// measure it, and a collective replayed on one rank waits for peers that never replay it (a
/// tensor-parallel run's top kernel is its all-reduce). Fails when the export cannot be read
/// or its kernel table lacks the columns this needs.
pub fn top_kernels_by_time(path: &Path, k: usize) -> Result<Vec<String>, IngestError> {
    let (_inflated, db) = open(path)?;
    db.top_kernels(k)
}

/// Opens the export read-only, its tables listed; a gzip export is inflated to a temporary
/// file first (SQLite needs a real file); keep it alive, declared before the handle, while the
/// handle is used.
fn open(path: &Path) -> Result<(Option<tempfile::NamedTempFile>, Export<'_>), IngestError> {
    input::open_file(NSYS, path)?;
    let inflated = if input::is_gzip(path) {
        Some(input::gunzip_to_temp(NSYS, path)?)
    } else {
        None
    };
    let db_path = inflated.as_ref().map_or(path, |t| t.path());
    check_magic(path, db_path)?;
    let conn = Connection::open_with_flags(
        db_path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| IngestError::invalid(NSYS, path, format!("cannot open as SQLite: {e}")))?;
    let db = Export {
        conn,
        path,
        tables: HashSet::new(),
        process: None,
    }
    .load_tables()?;
    Ok((inflated, db))
}

fn check_magic(path: &Path, db_path: &Path) -> Result<(), IngestError> {
    let mut head = [0u8; 16];
    let n = std::fs::File::open(db_path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| IngestError::io(NSYS, path, e))?;
    if n == 16 && &head == SQLITE_MAGIC {
        return Ok(());
    }
    let is_rep = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"));
    let hint = if is_rep {
        "this is an Nsight Systems report, not its SQLite export; run \
         `nsys export --type sqlite <file>.nsys-rep` (llmprof does this itself when `nsys` is on PATH)"
    } else {
        "not an SQLite database; pass the output of `nsys export --type sqlite`"
    };
    Err(IngestError::invalid(NSYS, path, hint))
}

/// How [`Export::read_into`] reads.
#[derive(Debug, Clone, Copy)]
enum Mode<'a> {
    /// Through the streamed converter, spilling to `spill`.
    Streamed { spill: &'a Path, budgets: Budgets },
    /// Through the batch converter.
    #[cfg_attr(not(test), allow(dead_code))] // what the tests hold the streamed reading to
    Batch,
}

struct Export<'p> {
    conn: Connection,
    path: &'p Path,
    tables: HashSet<String>,
    /// Only this process's records (`globalPid`, `hw << 56 | pid << 24`): one rank of an
    /// export that traced several.
    process: Option<u64>,
}

fn sql_err(path: &Path, what: &str, e: rusqlite::Error) -> IngestError {
    IngestError::invalid(NSYS, path, format!("cannot read {what}: {e}"))
}

impl Export<'_> {
    /// Whether records of `process` (a `globalPid`, or a `globalTid` with its thread bits
    /// cleared) are read.
    fn keeps(&self, process: u64) -> bool {
        self.process.is_none_or(|p| p == process)
    }

    fn load_tables(mut self) -> Result<Self, IngestError> {
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(|e| {
                IngestError::invalid(
                    NSYS,
                    self.path,
                    format!("not a readable SQLite database: {e}"),
                )
            })?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<HashSet<_>, _>>())
            .map_err(|e| {
                IngestError::invalid(
                    NSYS,
                    self.path,
                    format!("not a readable SQLite database: {e}"),
                )
            })?;
        drop(stmt);
        self.tables = names;
        Ok(self)
    }

    fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// `column` when `table` has it, else `NULL`, for a SELECT list.
    fn column_or_null<'c>(&self, table: &str, column: &'c str) -> &'c str {
        if self.columns(table).contains(column) {
            column
        } else {
            "NULL"
        }
    }

    fn columns(&self, table: &str) -> HashSet<String> {
        let Ok(mut stmt) = self.conn.prepare(&format!("PRAGMA table_info({table})")) else {
            return HashSet::new();
        };
        stmt.query_map([], |r| r.get::<_, String>(1))
            .and_then(|rows| rows.collect())
            .unwrap_or_default()
    }

    /// Reads the export through the streamed converter, or, where two launch calls share
    /// an id or `mode` says so, the batch converter (see `streamed.rs`).
    fn read_into(
        &self,
        mut conv: TraceConverter,
        mode: Mode<'_>,
        diags: &mut Diagnostics,
    ) -> Result<(SourceFacts, Conversion), IngestError> {
        const NVTX: &str = "NVTX_EVENTS";
        if !self.has(KERNEL) && !self.has(NVTX) {
            return Err(IngestError::invalid(
                NSYS,
                self.path,
                "lacks the Nsight Systems tables (no CUPTI_ACTIVITY_KIND_KERNEL, no NVTX_EVENTS); \
                 pass the output of `nsys export --type sqlite` of a profile taken with `-t cuda,nvtx`",
            ));
        }
        let strings = self.strings()?;
        let streamed = match mode {
            Mode::Streamed { spill, budgets } => {
                let (fresh, before) = (conv.empty_like(), diags.clone());
                self.read_ranges(&strings, &mut conv, diags)?;
                let mut streamed = conv.into_streamed(spill);
                match self.read_streamed(&strings, &mut streamed, spill, budgets, diags)? {
                    Some(device) => Ok((device, Conversion::Streamed(streamed))),
                    None => {
                        *diags = before;
                        Err(fresh)
                    }
                }
            }
            Mode::Batch => Err(conv),
        };
        let conversion = match streamed {
            Ok(done) => done,
            Err(mut conv) => {
                let device = self.read_batch(&strings, &mut conv, diags)?;
                (device, Conversion::Batch(conv))
            }
        };
        if !self.has(KERNEL) {
            diags.note(
                "nsys.no_kernel_table",
                Severity::Warning,
                || {
                    "the export has no CUPTI_ACTIVITY_KIND_KERNEL table: no CUDA trace was \
                     collected (profile with `nsys profile -t cuda,nvtx`); stages have no GPU time"
                        .into()
                },
                String::new,
            );
        }
        Ok((self.facts(conversion.0), conversion.1))
    }

    /// Reads ranges, ops and launch calls into the batch converter; returns the device that
    /// ran most kernels.
    fn read_batch(
        &self,
        strings: &HashMap<i64, String>,
        conv: &mut TraceConverter,
        diags: &mut Diagnostics,
    ) -> Result<Option<i64>, IngestError> {
        self.read_ranges(strings, conv, diags)?;
        if self.process.is_none() {
            // Room for every GPU op at once: millions of them, never in doubled vectors.
            let rows = |t: &str| self.row_bound(t);
            conv.reserve_ops(
                rows(KERNEL)
                    + rows("CUPTI_ACTIVITY_KIND_MEMCPY")
                    + rows("CUPTI_ACTIVITY_KIND_MEMSET"),
            );
        }
        let device_id = self.read_ops(strings, &mut |op| conv.handle_gpu_op(op), diags)?;
        // The ops first: of the launch calls, only those that ran one are kept.
        conv.keep_only_launches_of_ops();
        self.read_launches(strings, &mut |l, api| conv.handle_launch(l, api))?;
        Ok(device_id)
    }

    /// Every GPU op, table by table (kernels, memcpys, memsets, whole-graph spans), each in
    /// row order; returns the device that ran most kernels.
    fn read_ops(
        &self,
        strings: &HashMap<i64, String>,
        sink: &mut dyn FnMut(GpuOpRecord<'_>),
        diags: &mut Diagnostics,
    ) -> Result<Option<i64>, IngestError> {
        let nodes = self.graph_nodes();
        let device_id = self.read_kernels(strings, &nodes, sink, diags)?;
        self.read_memops(&nodes, sink, diags)?;
        self.read_graph_spans(sink, diags)?;
        Ok(device_id)
    }

    /// The row count of `table` as its largest rowid (exact for an export, whose rows are
    /// never deleted; a B-tree lookup, not a scan), 0 when absent. Never more than the
    /// database's bytes / 32 (no row is smaller), so a forged rowid cannot make a reservation
    /// larger than the file.
    /// The database's size in bytes (its pages).
    fn bytes(&self) -> usize {
        let int = |sql: &str| {
            (self.conn.query_row(sql, [], |r| r.get::<_, i64>(0)))
                .map_or(0, |n| usize::try_from(n).unwrap_or(0))
        };
        int("PRAGMA page_count").saturating_mul(int("PRAGMA page_size"))
    }

    fn row_bound(&self, table: &str) -> usize {
        if !self.has(table) {
            return 0;
        }
        let rows = (self.conn)
            .query_row(
                &format!("SELECT COALESCE(MAX(rowid), 0) FROM {table}"),
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_or(0, |n| usize::try_from(n).unwrap_or(0));
        rows.min(self.bytes() / 32)
    }

    /// See [`gpu_processes`].
    fn gpu_processes(&self) -> Result<Vec<GpuProcess>, IngestError> {
        const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
        if !self.has(KERNEL) {
            return Ok(Vec::new());
        }
        let device = self.column_or_null(KERNEL, "deviceId");
        let sql = format!(
            "SELECT globalPid, {device}, COUNT(*) FROM {KERNEL} WHERE globalPid IS NOT NULL \
             GROUP BY globalPid, {device}"
        );
        let err = |e| sql_err(self.path, KERNEL, e);
        let mut stmt = self.conn.prepare(&sql).map_err(err)?;
        let rows: Vec<(i64, Option<i64>, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(err)?;
        let mut out: Vec<GpuProcess> = Vec::new();
        for (gpid, device, n) in rows {
            let (gpid, n) = (gpid as u64, n.max(0) as u64);
            match out.iter_mut().find(|p| p.global_pid == gpid) {
                Some(p) => {
                    if n > p.kernels {
                        p.device = device;
                    }
                    p.kernels += n;
                }
                None => out.push(GpuProcess {
                    global_pid: gpid,
                    pid: ((gpid >> 24) & TID_BITS) as u32,
                    device,
                    kernels: n,
                }),
            }
        }
        out.sort_by_key(|p| (p.device, p.pid));
        Ok(out)
    }

    /// See [`top_kernels_by_time`].
    fn top_kernels(&self, k: usize) -> Result<Vec<String>, IngestError> {
        const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
        let cols = self.columns(KERNEL);
        if !["start", "end", "shortName"]
            .iter()
            .all(|c| cols.contains(*c))
        {
            return Err(IngestError::invalid(
                NSYS,
                self.path,
                "has no CUPTI_ACTIVITY_KIND_KERNEL table with start, end and shortName columns; \
                 profile with `nsys profile -t cuda,nvtx`",
            ));
        }
        let strings = self.strings()?;
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT shortName, SUM(end - start) FROM {KERNEL} \
                 WHERE start IS NOT NULL AND end IS NOT NULL GROUP BY shortName"
            ))
            .map_err(|e| sql_err(self.path, KERNEL, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| sql_err(self.path, KERNEL, e))?;
        let mut by_name: HashMap<&str, i64> = HashMap::new();
        for (id, ns) in rows {
            if let (Some(name), Some(ns)) = (id.and_then(|i| strings.get(&i)), ns) {
                if names::category(name) != Category::Communication {
                    *by_name.entry(name).or_default() += ns;
                }
            }
        }
        let mut names: Vec<(&str, i64)> = by_name.into_iter().collect();
        names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        Ok(names
            .into_iter()
            .take(k)
            .map(|(n, _)| n.to_string())
            .collect())
    }

    fn strings(&self) -> Result<HashMap<i64, String>, IngestError> {
        if !self.has("StringIds") {
            return Ok(HashMap::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT id, value FROM StringIds")
            .map_err(|e| sql_err(self.path, "StringIds", e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .and_then(|rows| rows.collect::<Result<HashMap<_, _>, _>>())
            .map_err(|e| sql_err(self.path, "StringIds", e))?;
        Ok(rows)
    }

    /// `(id, column)` rows of an `ENUM_*` table; empty when the export lacks the table.
    fn enum_rows(&self, table: &str, column: &str) -> Vec<(i64, String)> {
        if !self.has(table) {
            return Vec::new();
        }
        let Ok(mut stmt) = self
            .conn
            .prepare(&format!("SELECT id, {column} FROM {table}"))
        else {
            return Vec::new();
        };
        stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .and_then(|rows| rows.collect())
            .unwrap_or_default()
    }

    /// Values of an `ENUM_*` table by its `name` column.
    fn enum_ids(&self, table: &str) -> HashMap<String, i64> {
        self.enum_rows(table, "name")
            .into_iter()
            .map(|(id, name)| (name, id))
            .collect()
    }

    /// Feeds the NVTX ranges (push/pop and start/end) with their domains' names; counts marks
    /// and skips ranges never closed, with a diagnostic for each.
    fn read_ranges(
        &self,
        strings: &HashMap<i64, String>,
        conv: &mut TraceConverter,
        diags: &mut Diagnostics,
    ) -> Result<(), IngestError> {
        const NVTX: &str = "NVTX_EVENTS";
        if !self.has(NVTX) {
            diags.note(
                "nsys.no_nvtx",
                Severity::Warning,
                || {
                    "the export has no NVTX_EVENTS table: the workload marked no NVTX ranges (or \
                     nsys ran without `-t nvtx`), so there are no stages"
                        .into()
                },
                String::new,
            );
            return Ok(());
        }
        let types = self.nvtx_types();
        let rows = self.nvtx_rows(NVTX, strings)?;
        let domains = domain_names(&rows, types.domain_create);
        let mut marks = 0u64;
        for r in rows.iter().filter(|r| self.keeps(r.tid & !TID_BITS)) {
            let Some(kind) = types.stage_kind(r.kind) else {
                if r.kind == types.mark {
                    marks += 1;
                }
                continue;
            };
            r.feed(kind, &domains, conv, diags);
        }
        diags.note_n(
            "nsys.nvtx_marks",
            Severity::Info,
            marks,
            || "NVTX marks (instant events) are not stages and were not used".into(),
            String::new,
        );
        Ok(())
    }

    /// The NVTX event type ids of `ENUM_NSYS_EVENT_TYPE`, with the usual values where the
    /// export lacks the table.
    fn nvtx_types(&self) -> NvtxTypes {
        let types = self.enum_ids("ENUM_NSYS_EVENT_TYPE");
        let id = |name: &str, fallback: i64| types.get(name).copied().unwrap_or(fallback);
        NvtxTypes {
            push_pop: id("NvtxPushPopRange", 59),
            start_end: id("NvtxStartEndRange", 60),
            domain_create: id("NvtxDomainCreate", 75),
            mark: id("NvtxMark", 34),
        }
    }

    /// Every row of the NVTX table `nvtx`, its text from `text` or else through `textId`.
    fn nvtx_rows(
        &self,
        nvtx: &str,
        strings: &HashMap<i64, String>,
    ) -> Result<Vec<NvtxRow>, IngestError> {
        let cols = self.columns(nvtx);
        let text_expr = match (cols.contains("text"), cols.contains("textId")) {
            (true, true) => "text, textId",
            (true, false) => "text, NULL",
            (false, true) => "NULL, textId",
            (false, false) => "NULL, NULL",
        };
        let domain_expr = if cols.contains("domainId") {
            "domainId"
        } else {
            "0"
        };
        let end_tid_expr = if cols.contains("endGlobalTid") {
            "endGlobalTid"
        } else {
            "NULL"
        };
        let sql = format!(
            "SELECT start, end, eventType, {text_expr}, globalTid, {domain_expr}, {end_tid_expr} \
             FROM {nvtx}"
        );
        let mut stmt = self
            .conn
            .prepare(&sql)
            .map_err(|e| sql_err(self.path, nvtx, e))?;
        stmt.query_map([], |r| {
            let text: Option<String> = r.get(3)?;
            let text_id: Option<i64> = r.get(4)?;
            Ok(NvtxRow {
                start: r.get(0)?,
                end: r.get(1)?,
                kind: r.get(2)?,
                text: text.or_else(|| text_id.and_then(|i| strings.get(&i).cloned())),
                tid: r.get::<_, Option<i64>>(5)?.unwrap_or(0) as u64,
                domain: r.get::<_, Option<i64>>(6)?.unwrap_or(0),
                end_tid: r.get::<_, Option<i64>>(7)?.map(|t| t as u64),
            })
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| sql_err(self.path, nvtx, e))
    }

    /// Every launch call that can be placed in a range, in table order (runtime, then
    /// driver), with its API name.
    fn read_launches(
        &self,
        strings: &HashMap<i64, String>,
        sink: &mut dyn FnMut(LaunchRecord, Option<&str>),
    ) -> Result<(), IngestError> {
        let graph_names = graph_launch_names(strings);
        for table in ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"] {
            if !self.has(table) {
                continue;
            }
            let name = self.column_or_null(table, "nameId");
            let mut stmt = self
                .conn
                .prepare(&format!(
                    "SELECT start, globalTid, correlationId, end, {name} FROM {table} \
                     WHERE correlationId IS NOT NULL"
                ))
                .map_err(|e| sql_err(self.path, table, e))?;
            let err = |e| sql_err(self.path, table, e);
            let mut rows = stmt.query([]).map_err(err)?;
            while let Some(r) = rows.next().map_err(err)? {
                let start: Option<i64> = r.get(0).map_err(err)?;
                let tid: Option<i64> = r.get(1).map_err(err)?;
                let (Some(start), Some(tid)) = (start, tid) else {
                    continue; // cannot be placed in a range: its ops stay unattributed
                };
                let tid = tid as u64;
                if !self.keeps(tid & !TID_BITS) {
                    continue;
                }
                let end: Option<i64> = r.get(3).map_err(err)?;
                let name: Option<i64> = r.get(4).map_err(err)?;
                let record = LaunchRecord {
                    process: tid & !TID_BITS,
                    thread: tid,
                    tid: tid & TID_BITS,
                    driver: table.ends_with("DRIVER"),
                    start,
                    end: end.unwrap_or(start),
                    correlation: r.get(2).map_err(err)?,
                    graph: name.is_some_and(|n| graph_names.contains(&n)),
                };
                sink(
                    record,
                    name.and_then(|n| strings.get(&n)).map(String::as_str),
                );
            }
        }
        Ok(())
    }

    /// Executable-graph node id -> the node id in the captured graph it was instantiated
    /// from (`CUDA_GRAPH_NODE_EVENTS`, node-level traces), so kernels name the graph
    /// `CUPTI_ACTIVITY_KIND_GRAPH_TRACE` calls `graphId`. Empty when the export lacks it.
    fn graph_nodes(&self) -> GraphNodes {
        const TABLE: &str = "CUDA_GRAPH_NODE_EVENTS";
        if !self.has(TABLE) || !self.columns(TABLE).contains("originalGraphNodeId") {
            return GraphNodes::default();
        }
        let Ok(mut stmt) = self.conn.prepare(&format!(
            "SELECT graphNodeId, originalGraphNodeId FROM {TABLE} \
             WHERE graphNodeId IS NOT NULL AND originalGraphNodeId IS NOT NULL"
        )) else {
            return GraphNodes::default();
        };
        let map = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .and_then(|rows| rows.collect())
            .unwrap_or_default();
        GraphNodes(map)
    }

    /// Graph launches traced whole (`--cuda-graph-trace=graph`): one GPU op per launch.
    fn read_graph_spans(
        &self,
        sink: &mut dyn FnMut(GpuOpRecord<'_>),
        diags: &mut Diagnostics,
    ) -> Result<(), IngestError> {
        const GRAPHS: &str = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE";
        if !self.has(GRAPHS) {
            return Ok(());
        }
        let id = self.column_or_null(GRAPHS, "graphId");
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT start, end, streamId, correlationId, globalPid, {id} FROM {GRAPHS}"
            ))
            .map_err(|e| sql_err(self.path, GRAPHS, e))?;
        let err = |e| sql_err(self.path, GRAPHS, e);
        let mut rows = stmt.query([]).map_err(err)?;
        let mut spans = 0u64;
        while let Some(r) = rows.next().map_err(err)? {
            let Some(t) = op_times(r).map_err(err)? else {
                note_untimed(diags, GRAPHS);
                continue;
            };
            if !self.keeps(t.process) {
                continue;
            }
            let graph = r.get::<_, Option<i64>>(5).map_err(err)?.unwrap_or(0);
            spans += 1;
            sink(t.record(
                GpuOp::Graph {
                    graph: u32::try_from(graph).unwrap_or(u32::MAX),
                },
                None,
            ));
        }
        note_graphs_traced_whole(diags, spans);
        Ok(())
    }

    /// Feeds kernels; returns the device that ran most of them.
    fn read_kernels(
        &self,
        strings: &HashMap<i64, String>,
        nodes: &GraphNodes,
        sink: &mut dyn FnMut(GpuOpRecord<'_>),
        diags: &mut Diagnostics,
    ) -> Result<Option<i64>, IngestError> {
        const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
        if !self.has(KERNEL) {
            return Ok(None);
        }
        let mut stmt = self
            .conn
            .prepare(&self.kernel_query(KERNEL))
            .map_err(|e| sql_err(self.path, KERNEL, e))?;
        let mut rows = stmt.query([]).map_err(|e| sql_err(self.path, KERNEL, e))?;
        let mut devices: HashMap<i64, u64> = HashMap::new();
        let err = |e| sql_err(self.path, KERNEL, e);
        while let Some(r) = rows.next().map_err(err)? {
            let Some(name) = kernel_name(r, strings, diags).map_err(err)? else {
                continue;
            };
            let short = r
                .get::<_, Option<i64>>(6)
                .map_err(err)?
                .and_then(|i| strings.get(&i))
                .map(String::as_str);
            let launch = kernel_launch(r).map_err(err)?;
            let Some(t) = op_times(r).map_err(err)? else {
                note_untimed(diags, KERNEL);
                continue;
            };
            if !self.keeps(t.process) {
                continue;
            }
            if let Some(dev) = r.get::<_, Option<i64>>(15).map_err(err)? {
                *devices.entry(dev).or_default() += 1;
            }
            sink(t.record(
                GpuOp::Kernel {
                    name,
                    short_name: short,
                    launch,
                    comm: None,
                },
                nodes.graph_of(r.get(16).map_err(err)?),
            ));
        }
        Ok(busiest_device(devices, diags))
    }

    /// The SELECT of the kernel table `kernel`: the [`OpTimes`] columns, then the name ids
    /// (5-7), the launch configuration (8-14), `deviceId` (15) and `graphNodeId` (16), each
    /// NULL where the export lacks it.
    fn kernel_query(&self, kernel: &str) -> String {
        let cols = self.columns(kernel);
        let col = |c: &str| {
            if cols.contains(c) {
                c.to_string()
            } else {
                "NULL".to_string()
            }
        };
        format!(
            "SELECT start, end, streamId, correlationId, globalPid, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM {kernel}",
            col("demangledName"),
            col("shortName"),
            col("mangledName"),
            col("gridX"),
            col("gridY"),
            col("gridZ"),
            col("blockX"),
            col("blockY"),
            col("blockZ"),
            col("registersPerThread"),
            col("deviceId"),
            col("graphNodeId"),
        )
    }

    fn read_memops(
        &self,
        nodes: &GraphNodes,
        sink: &mut dyn FnMut(GpuOpRecord<'_>),
        diags: &mut Diagnostics,
    ) -> Result<(), IngestError> {
        let directions = self.enum_labels("ENUM_CUDA_MEMCPY_OPER");
        let memcpy = |r: &rusqlite::Row<'_>, bytes| {
            let kind: Option<i64> = r.get(6)?;
            let direction = kind
                .and_then(|k| directions.get(&k))
                .map(String::as_str)
                .unwrap_or("Unknown");
            Ok(GpuOp::Memcpy { direction, bytes })
        };
        let memset = |_: &rusqlite::Row<'_>, bytes| Ok(GpuOp::Memset { bytes });
        const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
        const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
        self.read_memop_table(MEMCPY, "copyKind", nodes, sink, diags, memcpy)?;
        self.read_memop_table(MEMSET, "NULL", nodes, sink, diags, memset)
    }

    /// The rows of the memory-op table `table`, where the export has it: the [`OpTimes`]
    /// columns, `bytes` (5), `extra` (6, for `op`) and `graphNodeId` (7). Each row of a kept
    /// process goes to `sink` as the op `op` makes of it and its bytes.
    fn read_memop_table<'d>(
        &self,
        table: &str,
        extra: &str,
        nodes: &GraphNodes,
        sink: &mut dyn FnMut(GpuOpRecord<'_>),
        diags: &mut Diagnostics,
        op: impl Fn(&rusqlite::Row<'_>, u64) -> rusqlite::Result<GpuOp<'d>>,
    ) -> Result<(), IngestError> {
        if !self.has(table) {
            return Ok(());
        }
        let node = self.column_or_null(table, "graphNodeId");
        let err = |e| sql_err(self.path, table, e);
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT start, end, streamId, correlationId, globalPid, bytes, {extra}, {node} FROM {table}"
            ))
            .map_err(err)?;
        let mut rows = stmt.query([]).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let Some(t) = op_times(r).map_err(err)? else {
                note_untimed(diags, table);
                continue;
            };
            if !self.keeps(t.process) {
                continue;
            }
            let bytes = r.get::<_, Option<i64>>(5).map_err(err)?.unwrap_or(0) as u64;
            let op = op(r, bytes).map_err(err)?;
            sink(t.record(op, nodes.graph_of(r.get(7).map_err(err)?)));
        }
        Ok(())
    }

    /// `id -> label` of an `ENUM_*` table (`Host-to-Device` style labels).
    fn enum_labels(&self, table: &str) -> HashMap<i64, String> {
        self.enum_rows(table, "label").into_iter().collect()
    }

    /// `name -> value` pairs of a two-column metadata table.
    fn name_values(&self, table: &str) -> HashMap<String, String> {
        if !self.has(table) {
            return HashMap::new();
        }
        let Ok(mut stmt) = self
            .conn
            .prepare(&format!("SELECT name, CAST(value AS TEXT) FROM {table}"))
        else {
            return HashMap::new();
        };
        let mut out = HashMap::new();
        if let Ok(rows) = stmt.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        }) {
            for (k, v) in rows.flatten() {
                // Keep the first value of repeated names.
                out.entry(k).or_insert(v.unwrap_or_default());
            }
        }
        out
    }

    fn facts(&self, device_id: Option<i64>) -> SourceFacts {
        let mut facts = SourceFacts {
            device: self.device(device_id),
            ..SourceFacts::default()
        };
        let export = self.name_values("META_DATA_EXPORT");
        let system = self.name_values("TARGET_INFO_SYSTEM_ENV");
        let capture = self.name_values("META_DATA_CAPTURE");
        let env = &mut facts.environment;
        env.driver_version = system.get("NvDriverVersion").cloned();
        env.cuda_driver_version = system
            .get("CudaDriverVersion")
            .and_then(|v| v.parse::<u64>().ok())
            .map(cuda_version);
        env.os = system.get("OsDescription").cloned();
        env.cpu = system.get("CpuDescription").cloned();
        env.cpu_cores = system.get("CpuCores").and_then(|v| v.parse().ok());
        env.hostname = system.get("Hostname").cloned();
        env.nsys_export_schema = export.get("EXPORT_SCHEMA_VERSION").cloned();
        if let Some(v) = export.get("EXPORT_PRODUCT_VERSION") {
            env.tools.push(ToolInfo {
                name: "Nsight Systems".into(),
                version: v.clone(),
            });
        }
        if let Some(cmd) = capture.get("PROCESS_0:COMMAND") {
            let mut parts = vec![cmd.clone()];
            for i in 0.. {
                match capture.get(&format!("PROCESS_0:ARGUMENT_{i}")) {
                    Some(a) => parts.push(a.clone()),
                    None => break,
                }
            }
            env.command = Some(parts.join(" "));
        }
        facts.captured_at_epoch_ns = self.session_start();
        // Export timestamps are ns since the session start.
        facts.clock_zero_epoch_ns = facts.captured_at_epoch_ns;
        facts
    }

    fn session_start(&self) -> Option<i64> {
        if !self.has("TARGET_INFO_SESSION_START_TIME") {
            return None;
        }
        self.conn
            .query_row(
                "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .ok()
            .flatten()
    }

    fn device(&self, device_id: Option<i64>) -> Option<Device> {
        const TABLE: &str = "TARGET_INFO_GPU";
        if !self.has(TABLE) {
            return None;
        }
        let cols = self.columns(TABLE);
        let wanted = [
            "id",
            "name",
            "uuid",
            "chipName",
            "computeMajor",
            "computeMinor",
            "smCount",
            "totalMemory",
            "memoryBandwidth",
            "clockRate",
            "l2CacheSize",
            "busLocation",
        ];
        let select: Vec<String> = wanted
            .iter()
            .map(|c| {
                if cols.contains(*c) {
                    format!("CAST({c} AS TEXT)")
                } else {
                    "NULL".to_string()
                }
            })
            .collect();
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {} FROM {TABLE}", select.join(", ")))
            .ok()?;
        let rows: Vec<Vec<Option<String>>> = stmt
            .query_map([], |r| {
                (0..wanted.len())
                    .map(|i| r.get::<_, Option<String>>(i))
                    .collect()
            })
            .and_then(|rows| rows.collect())
            .ok()?;
        let row = rows
            .iter()
            .find(|r| {
                device_id.is_some_and(|d| r[0].as_deref().and_then(|v| v.parse().ok()) == Some(d))
            })
            .or(rows.first())?;
        let num = |i: usize| row[i].as_deref().and_then(|v| v.parse::<u64>().ok());
        let text = |i: usize| row[i].clone().filter(|s| !s.is_empty());
        Some(Device {
            name: text(1).unwrap_or_else(|| "unknown GPU".into()),
            index: num(0).map(|v| v as u32),
            uuid: text(2),
            chip: text(3),
            compute_capability: match (num(4), num(5)) {
                (Some(a), Some(b)) => Some(format!("{a}.{b}")),
                _ => None,
            },
            sm_count: num(6).map(|v| v as u32),
            memory_bytes: num(7),
            memory_bandwidth_bytes_per_s: num(8),
            sm_clock_max_hz: num(9),
            memory_clock_max_hz: None,
            l2_cache_bytes: num(10),
            bus_location: text(11),
            sources: vec![Source::Nsys],
        })
    }
}

/// NVTX event type ids (`ENUM_NSYS_EVENT_TYPE`).
struct NvtxTypes {
    push_pop: i64,
    start_end: i64,
    domain_create: i64,
    mark: i64,
}

impl NvtxTypes {
    /// The stage kind of a range event type; `None` for other events (marks, domains).
    fn stage_kind(&self, kind: i64) -> Option<StageKind> {
        if kind == self.push_pop {
            Some(StageKind::PushPop)
        } else if kind == self.start_end {
            Some(StageKind::StartEnd)
        } else {
            None
        }
    }
}

/// A row of `NVTX_EVENTS`, its text resolved.
struct NvtxRow {
    start: Option<i64>,
    end: Option<i64>,
    kind: i64,
    text: Option<String>,
    tid: u64,
    domain: i64,
    /// `endGlobalTid`: the thread that ended a start/end range, when the export records it.
    end_tid: Option<u64>,
}

impl NvtxRow {
    /// Feeds this range to `conv` under its domain's name; a range without a start or an end
    /// is skipped with a diagnostic.
    fn feed(
        &self,
        kind: StageKind,
        domains: &HashMap<i64, String>,
        conv: &mut TraceConverter,
        diags: &mut Diagnostics,
    ) {
        let (Some(start), Some(end)) = (self.start, self.end) else {
            diags.note(
                "nsys.nvtx_range_not_closed",
                Severity::Warning,
                || {
                    "NVTX ranges without a start or an end (never closed before the \
                     capture stopped) were skipped"
                        .into()
                },
                || {
                    format!(
                        "`{}` start {:?} end {:?}",
                        self.text.as_deref().unwrap_or(""),
                        self.start,
                        self.end
                    )
                },
            );
            return;
        };
        let domain = domains.get(&self.domain).map(String::as_str).unwrap_or("");
        conv.handle_range(RangeRecord {
            thread: self.tid,
            tid: self.tid & TID_BITS,
            domain,
            name: self.text.as_deref().unwrap_or(""),
            kind,
            start,
            end,
            ended_on_other_thread: self.end_tid.is_some_and(|t| t != self.tid),
        });
    }
}

/// Domain id -> name, from the domain-creation events (the last one of an id wins).
fn domain_names(rows: &[NvtxRow], domain_create: i64) -> HashMap<i64, String> {
    let mut domains: HashMap<i64, String> = HashMap::new();
    for r in rows.iter().filter(|r| r.kind == domain_create) {
        domains.insert(r.domain, r.text.clone().unwrap_or_default());
    }
    domains
}

/// CUPTI graph node ids: the graph's id in the upper 32 bits, the node's index in the lower
/// (observed in Nsight Systems 2025.3 exports), with executable-graph nodes mapped to the
/// captured graph's nodes where the export records the mapping.
#[derive(Debug, Default)]
struct GraphNodes(HashMap<i64, i64>);

impl GraphNodes {
    /// Where a GPU op with this `graphNodeId` ran; `None` outside graphs (NULL or 0).
    fn graph_of(&self, node: Option<i64>) -> Option<GraphRef> {
        let node = node.filter(|&n| n != 0)?;
        let id = *self.0.get(&node).unwrap_or(&node) as u64;
        Some(GraphRef {
            graph: u32::try_from(id >> 32).ok(),
            node: Some((id & 0xFFFF_FFFF) as u32),
        })
    }
}

/// The columns every GPU op table starts with, selected as
/// `start, end, streamId, correlationId, globalPid`. `None` when the row has no time.
struct OpTimes {
    start: i64,
    end: i64,
    stream: u64,
    correlation: Option<i64>,
    process: u64,
}

impl OpTimes {
    /// The converter's record of this op.
    fn record(self, op: GpuOp<'_>, graph: Option<GraphRef>) -> GpuOpRecord<'_> {
        GpuOpRecord {
            process: self.process,
            correlation: self.correlation,
            stream: self.stream,
            start: self.start,
            end: self.end,
            op,
            graph,
        }
    }
}

fn op_times(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<OpTimes>> {
    let (Some(start), Some(end)) = (r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)
    else {
        return Ok(None);
    };
    Ok(Some(OpTimes {
        start,
        end,
        stream: r.get::<_, Option<i64>>(2)?.unwrap_or(0) as u64,
        correlation: r.get(3)?,
        process: r.get::<_, Option<i64>>(4)?.unwrap_or(0) as u64,
    }))
}

/// A kernel row's name (demangled, else mangled) from `StringIds`; `None`, with a diagnostic,
/// when its id is not there.
fn kernel_name<'s>(
    r: &rusqlite::Row<'_>,
    strings: &'s HashMap<i64, String>,
    diags: &mut Diagnostics,
) -> rusqlite::Result<Option<&'s String>> {
    let name_id: Option<i64> = r.get::<_, Option<i64>>(5)?.or(r.get::<_, Option<i64>>(7)?);
    let name = name_id.and_then(|i| strings.get(&i));
    if name.is_none() {
        diags.note(
            "nsys.kernel_without_name",
            Severity::Warning,
            || "kernels whose name id is not in StringIds were skipped".into(),
            || format!("kernel row with name id {name_id:?}"),
        );
    }
    Ok(name)
}

/// A kernel row's grid, block and registers per thread; `None` unless all six dimensions are
/// there.
fn kernel_launch(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<Launch>> {
    let dim = |i: usize| -> rusqlite::Result<Option<u32>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v as u32))
    };
    Ok(
        match (dim(8)?, dim(9)?, dim(10)?, dim(11)?, dim(12)?, dim(13)?) {
            (Some(gx), Some(gy), Some(gz), Some(bx), Some(by), Some(bz)) => Some(Launch {
                grid: [gx, gy, gz],
                block: [bx, by, bz],
                registers_per_thread: dim(14)?,
            }),
            _ => None,
        },
    )
}

/// The device id that ran most kernels (the lowest id on a tie); several devices are reported.
fn busiest_device(devices: HashMap<i64, u64>, diags: &mut Diagnostics) -> Option<i64> {
    if devices.len() > 1 {
        let mut list: Vec<_> = devices.iter().collect();
        list.sort();
        diags.note(
            "nsys.multiple_devices",
            Severity::Info,
            || "kernels ran on several GPUs; `device` describes the one that ran most".into(),
            || format!("kernels per device id: {list:?}"),
        );
    }
    devices
        .into_iter()
        .max_by_key(|&(d, n)| (n, -d))
        .map(|(d, _)| d)
}

/// Says how many graph launches were traced whole, as one span each.
fn note_graphs_traced_whole(diags: &mut Diagnostics, spans: u64) {
    diags.note_n(
        "nsys.graphs_traced_whole",
        Severity::Warning,
        spans,
        || {
            "CUDA graph launches were traced whole (`nsys profile --cuda-graph-trace=graph`, \
             nsys's default): each is one span in GPU busy time and the timeline, and the \
             kernels inside are not in the kernel table; profile with \
             `--cuda-graph-trace=node` (llmprof capture's default) to see them"
                .into()
        },
        String::new,
    );
}

/// The ids of the `StringIds` that name a CUDA graph launch API function.
fn graph_launch_names(strings: &HashMap<i64, String>) -> HashSet<i64> {
    strings
        .iter()
        .filter(|(_, v)| LaunchRecord::is_graph_launch(v))
        .map(|(&id, _)| id)
        .collect()
}

fn note_untimed(diags: &mut Diagnostics, table: &str) {
    diags.note(
        "nsys.gpu_op_without_time",
        Severity::Warning,
        || "GPU op rows without a start or end time were skipped".into(),
        || format!("a row of {table}"),
    );
}

/// CUDA's integer version (`13000`, `12080`) as `13.0`, `12.8`.
pub(crate) fn cuda_version(v: u64) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Schema variants of the export, on small databases with the real tables' columns.
#[cfg(test)]
mod tests {
    use super::*;
    use llmprof_bundle::StageKind;

    /// globalTid of pid 728, tid 730 as nsys encodes it (`hw << 56 | pid << 24 | tid`).
    const TID: i64 = (1 << 56) | (728 << 24) | 730;
    const PID: i64 = (1 << 56) | (728 << 24);

    fn export(sql: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER, name TEXT, label TEXT);
             INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34, 'NvtxMark', ''), (59, 'NvtxPushPopRange', ''),
               (60, 'NvtxStartEndRange', ''), (75, 'NvtxDomainCreate', '');
             CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER,
               category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
               textId INTEGER, domainId INTEGER);
             CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER,
               globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,
               contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
               demangledName INTEGER, shortName INTEGER, mangledName INTEGER);
             {sql}"
        ))
        .unwrap();
        (dir, path)
    }

    fn ingest(path: &Path) -> (crate::convert::TraceParts, Vec<llmprof_bundle::Diagnostic>) {
        let mut diags = Diagnostics::new(Source::Nsys, "x.sqlite");
        let spill = path.parent().unwrap();
        let (_, conv) = read(path, TraceConverter::new(), spill, &mut diags).unwrap();
        let parts = conv.finish(&mut diags).unwrap();
        (parts, diags.finish())
    }

    #[test]
    fn range_text_from_string_ids_and_named_domains() {
        // Registered strings put the range name in textId; a domain is created by event 75.
        let (_d, path) = export(&format!(
            "INSERT INTO StringIds VALUES (1, 'vision'), (2, 'kern');
             INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)
               VALUES (0, NULL, 75, 'llmprof', {TID}, 5);
             INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid, domainId)
               VALUES (100, 200, 59, 1, {TID}, 5);
             INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (150, 160, 0, {TID}, 42, 0, 0);
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (300, 310, 0, 1, 7, 42, {PID}, 2, 2, 2);"
        ));
        let (p, _) = ingest(&path);
        let s = &p.stages[0];
        assert_eq!((s.domain.as_str(), s.name.as_str()), ("llmprof", "vision"));
        assert_eq!(
            s.instance_list[0].tid, 730,
            "TID is the low 24 bits of globalTid"
        );
        assert_eq!(
            s.gpu_ops, 1,
            "the kernel's launch matched on (globalPid, correlationId)"
        );
    }

    #[test]
    fn start_end_ranges_unclosed_ranges_and_marks() {
        let (_d, path) = export(&format!(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES
               (100, 200, 60, 'load', {TID}, 0),
               (300, NULL, 59, 'never popped', {TID}, 0),
               (400, NULL, 34, 'a mark', {TID}, 0);"
        ));
        let (p, d) = ingest(&path);
        assert_eq!(p.stages.len(), 1);
        assert_eq!(p.stages[0].kind, StageKind::StartEnd);
        let codes: Vec<&str> = d.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(codes, ["nsys.nvtx_marks", "nsys.nvtx_range_not_closed"]);
    }

    #[test]
    fn top_kernels_by_time_sum_each_short_name() {
        let (_d, path) = export(
            "INSERT INTO StringIds VALUES (1, 'nvjet_sm90_tst_64x8'), (2, 'elementwise_kernel'),
               (3, 'op<x>.y'), (4, 'ncclDevKernel_AllReduce_Sum_bf16_RING_LL');
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, shortName) VALUES
               (0, 50, 1), (0, 30, 2), (0, 30, 2), (0, 10, 3), (NULL, 99, 3), (0, 99, 7),
               (0, 900, 4);",
        );
        assert_eq!(
            top_kernels_by_time(&path, 2).unwrap(),
            ["elementwise_kernel", "nvjet_sm90_tst_64x8"]
        );
        assert_eq!(top_kernels_by_time(&path, 9).unwrap().len(), 3);
        let e = top_kernels_by_time(&path.with_file_name("none.sqlite"), 2).unwrap_err();
        assert!(e.to_string().contains("none.sqlite"), "{e}");
    }

    #[test]
    fn top_kernels_need_the_kernel_table_and_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.sqlite");
        let c = Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER);")
            .unwrap();
        drop(c);
        let e = top_kernels_by_time(&path, 2).unwrap_err().to_string();
        assert!(e.contains("k.sqlite") && e.contains("shortName"), "{e}");
    }

    #[test]
    fn kernels_with_null_times_are_skipped_not_fatal() {
        let (_d, path) = export(&format!(
            "INSERT INTO StringIds VALUES (2, 'kern');
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (NULL, 310, 0, 1, 7, 42, {PID}, 2, 2, 2),
               (400, 410, 0, 1, NULL, NULL, {PID}, 2, 2, 2);"
        ));
        let (p, d) = ingest(&path);
        assert_eq!(p.totals.kernels, 1);
        assert!(d.iter().any(|d| d.code == "nsys.gpu_op_without_time"));
    }

    /// The export at `path` read as `mode` says, for one process or all: what the bundle
    /// gets of it, the timeline's JSON and the launch calls' JSON, and whether the batch
    /// converter read it.
    fn read_as(path: &Path, process: Option<u64>, mode: Mode<'_>) -> (String, bool) {
        let (_inflated, mut db) = open(path).unwrap();
        db.process = process;
        let mut diags = Diagnostics::new(Source::Nsys, "x.sqlite");
        let (facts, conv) = db
            .read_into(TraceConverter::new(), mode, &mut diags)
            .unwrap();
        let batch = matches!(conv, Conversion::Batch(_));
        let p = conv.finish(&mut diags).unwrap();
        let t = p.timeline.into_timeline().unwrap();
        let text = serde_json::to_string(&(
            (
                &p.stages,
                &p.kernels,
                &p.instance_kernels,
                &p.totals,
                &p.collectives,
            ),
            (&t, &t.calls, diags.finish(), facts.device),
        ))
        .unwrap();
        (text, batch)
    }

    /// Budgets small enough that every sort writes runs and the calls take many partitions.
    const TINY: Budgets = Budgets {
        sort: 16 << 10,
        calls_per_partition: 512,
        marks: 16,
    };

    #[test]
    fn the_streamed_converter_gives_the_batch_converters_results_on_every_export_fixture() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let spill = tempfile::tempdir().unwrap();
        for name in [
            "h100-nsys-two-processes/nsys_export.sqlite.gz",
            "h100-nvtx-edges/nsys_export.sqlite.gz",
            "h200-qwen2-0.5b/nsys_export.sqlite.gz",
            "h100-cuda-graphs/nsys_node_level.sqlite.gz",
            "h100-cuda-graphs/nsys_graph_level.sqlite.gz",
            "h100-cuda-graphs/qwen2.5-0.5b-compiled/nsys_node_level.sqlite.gz",
        ] {
            let path = fixtures.join(name);
            let processes = gpu_processes(&path).unwrap();
            let one = processes.first().map(|p| p.global_pid);
            for process in [None, one] {
                let (batch, _) = read_as(&path, process, Mode::Batch);
                for budgets in [TINY, Budgets::of_export(1 << 30)] {
                    let spill = spill.path();
                    let (streamed, fell_back) =
                        read_as(&path, process, Mode::Streamed { spill, budgets });
                    assert!(!fell_back, "{name}");
                    assert!(streamed == batch, "{name} process {process:?} {budgets:?}");
                }
            }
        }
        assert_eq!(
            std::fs::read_dir(spill.path()).unwrap().count(),
            0,
            "nothing left behind"
        );
    }

    #[test]
    fn two_calls_of_one_correlation_id_send_the_export_to_the_batch_converter() {
        let (_d, path) = export(&format!(
            "INSERT INTO StringIds VALUES (2, 'kern'), (3, 'cudaLaunchKernel');
             INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)
               VALUES (100, 200, 59, 'a', {TID}), (300, 400, 59, 'b', {TID});
             INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (150, 160, 0, {TID}, 42, 3, 0),
               (350, 360, 0, {TID}, 42, 3, 0);
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (500, 510, 0, 1, 7, 42, {PID}, 2, 2, 2);"
        ));
        let spill = tempfile::tempdir().unwrap();
        let streamed = Mode::Streamed {
            spill: spill.path(),
            budgets: TINY,
        };
        let (got, fell_back) = read_as(&path, None, streamed);
        assert!(fell_back);
        assert!(got == read_as(&path, None, Mode::Batch).0);
        let (p, _) = ingest(&path);
        let b = p.stages.iter().find(|s| s.name == "b").unwrap();
        assert_eq!(b.gpu_ops, 1, "the last call of the id launched the kernel");
    }
}
