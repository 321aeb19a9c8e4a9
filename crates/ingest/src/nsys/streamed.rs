//! An export's GPU ops read in start order with their launch calls joined, both done by
//! SQLite on disk, into the [`StreamedConverter`]: the converter then keeps no op and no call.
//!
//! Two statements do it. The first writes the launch calls that ran a GPU op the converter
//! keeps into a temporary table, sorted by start (then runtime before driver calls, then row
//! order: the order of the batch converter's timeline calls), so that a call's rowid is its
//! place among them. The second reads the op tables as one, sorted by start, end, table and
//! row (the batch converter's order), each op joined on `(process, correlationId)` to its
//! call in that table. A `(process, correlationId)` that two calls share makes an op come
//! twice; the export is then read by the batch converter, which takes the last of them.

use std::collections::{HashMap, HashSet};

use super::{
    busiest_device, kernel_launch, kernel_name, note_untimed, op_times, sql_err, Export, KERNEL,
    TID_BITS,
};
use crate::convert::{JoinedCall, StreamedConverter};
use crate::diagnostics::Diagnostics;
use crate::error::IngestError;
use crate::records::{GpuOp, LaunchRecord};

const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
const GRAPHS: &str = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE";
const CALL_TABLES: [&str; 2] = ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"];

/// The temporary table of the calls that ran ops.
const CALLS: &str = "temp.llmprof_calls";

/// The op tables' columns, by the index [`op_times`], [`kernel_name`] and [`kernel_launch`]
/// read: 0-4 times, stream, correlation and process; 5-16 the kernel columns of
/// `Export::kernel_query`; then these.
const BYTES: usize = 17;
const COPY_KIND: usize = 18;
const GRAPH_ID: usize = 19;
const SOURCE: usize = 20;
const ROW: usize = 21;
const CALL: usize = 22;

/// Which table an op row comes from, in the batch converter's reading order.
const FROM_KERNEL: i64 = 0;
const FROM_MEMCPY: i64 = 1;
const FROM_MEMSET: i64 = 2;
const FROM_GRAPHS: i64 = 3;

impl Export<'_> {
    /// Reads the ops and their calls into `conv` (see the module docs); returns the device
    /// that ran most kernels, or `None` for the converter when two calls share an id.
    pub(super) fn read_streamed(
        &self,
        strings: &HashMap<i64, String>,
        conv: &mut StreamedConverter,
        diags: &mut Diagnostics,
    ) -> Result<Option<Option<i64>>, IngestError> {
        let graph_names = super::graph_launch_names(strings);
        let parts = self.op_selects();
        if parts.is_empty() {
            return Ok(Some(None));
        }
        let calls = self.call_selects();
        if !calls.is_empty() {
            self.write_calls(&calls)?;
            self.read_calls(strings, &graph_names, conv)?;
        }
        self.read_ops(
            &parts,
            !calls.is_empty(),
            strings,
            &graph_names,
            conv,
            diags,
        )
    }

    /// One SELECT per op table the export has, all with the same columns (see [`BYTES`]).
    fn op_selects(&self) -> Vec<String> {
        let mut out = Vec::new();
        let col = |t: &str, c: &str| self.column_or_null(t, c).to_string();
        let process = self.process_filter("COALESCE(globalPid, 0)");
        if self.has(KERNEL) {
            let kernel = self.kernel_query(KERNEL);
            let columns = kernel
                .strip_prefix("SELECT ")
                .and_then(|s| s.strip_suffix(&format!(" FROM {KERNEL}")))
                .unwrap_or_default();
            out.push(format!(
                "SELECT {columns}, NULL, NULL, NULL, {FROM_KERNEL}, rowid FROM {KERNEL}{process}"
            ));
        }
        let nulls = "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL";
        let times = "start, end, streamId, correlationId, globalPid";
        if self.has(MEMCPY) {
            out.push(format!(
                "SELECT {times}, {nulls}, {}, bytes, copyKind, NULL, {FROM_MEMCPY}, rowid \
                 FROM {MEMCPY}{process}",
                col(MEMCPY, "graphNodeId")
            ));
        }
        if self.has(MEMSET) {
            out.push(format!(
                "SELECT {times}, {nulls}, {}, bytes, NULL, NULL, {FROM_MEMSET}, rowid \
                 FROM {MEMSET}{process}",
                col(MEMSET, "graphNodeId")
            ));
        }
        if self.has(GRAPHS) {
            out.push(format!(
                "SELECT {times}, {nulls}, NULL, NULL, NULL, {}, {FROM_GRAPHS}, rowid \
                 FROM {GRAPHS}{process}",
                col(GRAPHS, "graphId")
            ));
        }
        out
    }

    /// ` WHERE <expr> = <process>` when one process is read, else nothing.
    fn process_filter(&self, expr: &str) -> String {
        match self.process {
            Some(p) => format!(" WHERE {expr} = {}", p as i64),
            None => String::new(),
        }
    }

    /// One SELECT per call table the export has: start, end, thread, correlation id, name
    /// id, table and row of each call that can be placed in a range.
    fn call_selects(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (source, table) in CALL_TABLES.iter().enumerate() {
            if !self.has(table) {
                continue;
            }
            let name = self.column_or_null(table, "nameId");
            let process = match self.process {
                Some(p) => format!(" AND (globalTid & ~{TID_BITS}) = {}", p as i64),
                None => String::new(),
            };
            out.push(format!(
                "SELECT start, end, globalTid AS tid, correlationId AS corr, {name} AS name, \
                 {source} AS source, rowid AS row FROM {table} WHERE correlationId IS NOT NULL \
                 AND start IS NOT NULL AND globalTid IS NOT NULL{process}"
            ));
        }
        out
    }

    /// The `(process, correlationId)` of every op the converter keeps: timed, not ending
    /// before it starts, a kernel only with a name in `StringIds`.
    fn kept_op_keys(&self) -> String {
        let named = if self.has("StringIds") {
            let name = format!(
                "COALESCE({}, {})",
                self.column_or_null(KERNEL, "demangledName"),
                self.column_or_null(KERNEL, "mangledName")
            );
            format!("{name} IN (SELECT id FROM StringIds)")
        } else {
            "0".to_string()
        };
        let mut out = Vec::new();
        for table in [KERNEL, MEMCPY, MEMSET, GRAPHS] {
            if !self.has(table) {
                continue;
            }
            let kernel = if table == KERNEL {
                format!(" AND {named}")
            } else {
                String::new()
            };
            out.push(format!(
                "SELECT COALESCE(globalPid, 0), correlationId FROM {table} WHERE correlationId \
                 IS NOT NULL AND start IS NOT NULL AND end IS NOT NULL AND end >= start{kernel}"
            ));
        }
        out.join(" UNION ALL ")
    }

    /// The temporary table [`CALLS`] (see the module docs).
    fn write_calls(&self, calls: &[String]) -> Result<(), IngestError> {
        let sql = format!(
            "CREATE TEMP TABLE {} AS SELECT start, end, tid, corr, name, source FROM ({}) \
             WHERE (tid & ~{TID_BITS}, corr) IN ({}) ORDER BY start, source, row",
            CALLS.trim_start_matches("temp."),
            calls.join(" UNION ALL "),
            self.kept_op_keys()
        );
        self.conn
            .execute_batch(&sql)
            .map_err(|e| sql_err(self.path, "the launch calls of the GPU ops", e))
    }

    /// The calls of [`CALLS`], in order, into the converter.
    fn read_calls(
        &self,
        strings: &HashMap<i64, String>,
        graph_names: &HashSet<i64>,
        conv: &mut StreamedConverter,
    ) -> Result<(), IngestError> {
        let err = |e| sql_err(self.path, "the launch calls of the GPU ops", e);
        let mut stmt = (self.conn)
            .prepare(&format!(
                "SELECT start, end, tid, corr, name, source FROM {CALLS} ORDER BY rowid"
            ))
            .map_err(err)?;
        let mut rows = stmt.query([]).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let start: i64 = r.get(0).map_err(err)?;
            let end: Option<i64> = r.get(1).map_err(err)?;
            let tid = r.get::<_, i64>(2).map_err(err)? as u64;
            let name: Option<i64> = r.get(4).map_err(err)?;
            let record = LaunchRecord {
                process: tid & !TID_BITS,
                thread: tid,
                tid: tid & TID_BITS,
                driver: r.get::<_, i64>(5).map_err(err)? == 1,
                start,
                end: end.unwrap_or(start),
                correlation: r.get(3).map_err(err)?,
                graph: name.is_some_and(|n| graph_names.contains(&n)),
            };
            conv.handle_call(
                record,
                name.and_then(|n| strings.get(&n)).map(String::as_str),
            );
        }
        Ok(())
    }

    /// The ops, in start order, each with its call, into the converter; returns the device
    /// that ran most kernels, or `None` when an op came twice.
    fn read_ops(
        &self,
        parts: &[String],
        with_calls: bool,
        strings: &HashMap<i64, String>,
        graph_names: &HashSet<i64>,
        conv: &mut StreamedConverter,
        diags: &mut Diagnostics,
    ) -> Result<Option<Option<i64>>, IngestError> {
        let union = parts.join(" UNION ALL ");
        let sql = if with_calls {
            format!(
                "SELECT o.*, c.rowid - 1, c.start, c.end, c.tid, c.name FROM ({union}) o \
                 LEFT JOIN {CALLS} c ON c.corr = o.correlationId \
                 AND (c.tid & ~{TID_BITS}) = COALESCE(o.globalPid, 0) \
                 ORDER BY 1, 2, 21, 22"
            )
        } else {
            format!(
                "SELECT o.*, NULL, NULL, NULL, NULL, NULL FROM ({union}) o \
                 ORDER BY 1, 2, 21, 22"
            )
        };
        let err = |e| sql_err(self.path, "the GPU ops", e);
        let mut stmt = self.conn.prepare(&sql).map_err(err)?;
        let mut rows = stmt.query([]).map_err(err)?;
        let nodes = self.graph_nodes();
        let directions = self.enum_labels("ENUM_CUDA_MEMCPY_OPER");
        let mut devices: HashMap<i64, u64> = HashMap::new();
        let mut spans = 0u64;
        let mut last: Option<(i64, i64)> = None;
        while let Some(r) = rows.next().map_err(err)? {
            let source: i64 = r.get(SOURCE).map_err(err)?;
            let key = (source, r.get::<_, i64>(ROW).map_err(err)?);
            if last.replace(key) == Some(key) {
                return Ok(None);
            }
            let call = joined_call(r, graph_names).map_err(err)?;
            let table = [KERNEL, MEMCPY, MEMSET, GRAPHS][source.clamp(0, 3) as usize];
            let op = match source {
                FROM_KERNEL => {
                    let Some(name) = kernel_name(r, strings, diags).map_err(err)? else {
                        continue;
                    };
                    let short = (r.get::<_, Option<i64>>(6).map_err(err)?)
                        .and_then(|i| strings.get(&i))
                        .map(String::as_str);
                    let launch = kernel_launch(r).map_err(err)?;
                    GpuOp::Kernel {
                        name,
                        short_name: short,
                        launch,
                        comm: None,
                    }
                }
                FROM_MEMCPY => {
                    let kind: Option<i64> = r.get(COPY_KIND).map_err(err)?;
                    GpuOp::Memcpy {
                        direction: (kind.and_then(|k| directions.get(&k)))
                            .map_or("Unknown", String::as_str),
                        bytes: r.get::<_, Option<i64>>(BYTES).map_err(err)?.unwrap_or(0) as u64,
                    }
                }
                FROM_MEMSET => GpuOp::Memset {
                    bytes: r.get::<_, Option<i64>>(BYTES).map_err(err)?.unwrap_or(0) as u64,
                },
                _ => GpuOp::Graph {
                    graph: (r.get::<_, Option<i64>>(GRAPH_ID).map_err(err)?)
                        .map_or(0, |g| u32::try_from(g).unwrap_or(u32::MAX)),
                },
            };
            let Some(t) = op_times(r).map_err(err)? else {
                note_untimed(diags, table);
                continue;
            };
            if source == FROM_KERNEL {
                if let Some(dev) = r.get::<_, Option<i64>>(15).map_err(err)? {
                    *devices.entry(dev).or_default() += 1;
                }
            }
            spans += u64::from(source == FROM_GRAPHS);
            let graph = match source {
                FROM_GRAPHS => None,
                _ => nodes.graph_of(r.get(16).map_err(err)?),
            };
            conv.handle_op(t.record(op, graph), call);
        }
        super::note_graphs_traced_whole(diags, spans);
        Ok(Some(busiest_device(devices, diags)))
    }
}

/// The call joined to an op row, if any.
fn joined_call(
    r: &rusqlite::Row<'_>,
    graph_names: &HashSet<i64>,
) -> rusqlite::Result<Option<JoinedCall>> {
    let Some(pos) = r.get::<_, Option<i64>>(CALL)? else {
        return Ok(None);
    };
    let start: i64 = r.get(CALL + 1)?;
    let end: Option<i64> = r.get(CALL + 2)?;
    let name: Option<i64> = r.get(CALL + 4)?;
    Ok(Some(JoinedCall {
        pos: u32::try_from(pos).unwrap_or(u32::MAX),
        start,
        end: end.unwrap_or(start),
        thread: r.get::<_, i64>(CALL + 3)? as u64,
        graph: name.is_some_and(|n| graph_names.contains(&n)),
    }))
}
