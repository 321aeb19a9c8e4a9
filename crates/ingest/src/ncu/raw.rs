//! The raw page (`ncu --csv --page raw`): one row per profiled launch, one column per metric,
//! and a row of units under the header.

use csv::StringRecord;
use llmprof_bundle::{Device, Severity, Source};

use super::fields::KernelBuilder;
use super::number::{
    parse_dim3, parse_number, parse_u64, unit_factor, whole_u32, whole_u64, LocaleCheck,
};
use super::{no_kernels, no_readable_rows, Collected, FileCtx, Table};
use crate::error::IngestError;

/// Column families that describe the machine or the profiler rather than the launch; they are
/// the same on every row and would bloat every kernel's `metrics`. The device is read from
/// `device__attribute_*` once instead.
const NOT_METRICS: &[&str] = &["device__attribute_", "nvlink__", "numa__", "profiler__"];

/// A metric column: ncu metric names are `unit__counter[.rollup...]`; the descriptive columns
/// before them (`Kernel Name`, `Grid Size`, ...) never contain `__`.
fn is_metric_column(name: &str) -> bool {
    name.contains("__")
}

/// Whether `row` is the units row: no `ID`, and no cell that reads as a number.
fn is_units_row(row: &StringRecord, id_col: usize) -> bool {
    row.get(id_col).is_none_or(|c| c.trim().is_empty())
        && row.iter().all(|c| parse_number(c).is_none())
}

pub(super) fn read(
    table: &Table,
    ctx: &mut FileCtx<'_>,
    out: &mut Collected,
) -> Result<(), IngestError> {
    let header = &table.header;
    let id_col = table.column("ID").unwrap_or(0);
    let Some(name_col) = table.column("Kernel Name") else {
        return Err(ctx.invalid("the header row has no `Kernel Name` column"));
    };

    let (units, data): (Option<&StringRecord>, &[StringRecord]) = match table.rows.split_first() {
        Some((first, rest)) if is_units_row(first, id_col) => (Some(first), rest),
        _ => (None, &table.rows),
    };
    if data.is_empty() {
        return Err(no_kernels(ctx));
    }
    let unit_of = |col: usize| units.and_then(|u| u.get(col)).unwrap_or("").trim();

    // Metric columns kept, with their factor to base units.
    let mut metrics: Vec<(usize, &str, &str, f64)> = Vec::new();
    let mut locale = LocaleCheck::default();
    for (col, name) in header.iter().enumerate() {
        let name = name.trim();
        if !is_metric_column(name) {
            continue;
        }
        for row in data {
            if let Some(cell) = row.get(col) {
                locale.observe(cell);
            }
        }
        if NOT_METRICS.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let unit = unit_of(col);
        let factor = match unit_factor(unit) {
            Some(f) => f,
            None => {
                let example = data.iter().find_map(|r| r.get(col)).unwrap_or("");
                ctx.unknown_unit(name, example, unit);
                1.0
            }
        };
        metrics.push((col, name, unit, factor));
    }
    locale.check(ctx.path)?;
    if let Some(example) = locale.conflicting_example() {
        ctx.locale_conflict(example);
    }

    let cols = Columns::new(table);
    let mut read_rows = 0usize;
    for row in data {
        if row.len() < header.len() {
            ctx.malformed_row("the row has fewer cells than the header", row);
            continue;
        }
        let Some(id) = row.get(id_col).and_then(parse_u64) else {
            ctx.malformed_row("the `ID` cell is not a number", row);
            continue;
        };
        let name = row.get(name_col).unwrap_or("").trim();
        if name.is_empty() {
            ctx.malformed_row("the `Kernel Name` cell is empty", row);
            continue;
        }
        let mut kernel = KernelBuilder::new(id, name.to_string(), ctx.name.to_string());
        let cell = |col: Option<usize>| col.and_then(|c| row.get(c));
        kernel.launch(
            cell(cols.grid).and_then(parse_dim3),
            cell(cols.block).and_then(parse_dim3),
            cell(cols.stream).and_then(parse_u64),
        );
        let nvtx = cell(cols.push_pop)
            .and_then(|c| nvtx_range(c, 1))
            .or_else(|| cell(cols.start_end).and_then(|c| nvtx_range(c, 2)));
        kernel.set_nvtx_range(nvtx);
        for &(col, metric, unit, factor) in &metrics {
            if let Some(v) = row.get(col).and_then(parse_number) {
                kernel.metric(|| metric.to_string(), None, metric, unit, v * factor);
            }
        }
        if let Some(device) = device(table, units, row) {
            note_device(ctx, out, device);
        }
        out.kernels.push(kernel);
        read_rows += 1;
    }
    if read_rows == 0 {
        return Err(no_readable_rows(ctx, data.len()));
    }
    Ok(())
}

/// The descriptive columns a raw page may have.
#[derive(Debug)]
struct Columns {
    grid: Option<usize>,
    block: Option<usize>,
    stream: Option<usize>,
    /// `thread Domain:Push/Pop_Range:PL_Type:...`
    push_pop: Option<usize>,
    /// `Id:Domain:Start/Stop_Range:PL_Type:...`
    start_end: Option<usize>,
}

impl Columns {
    fn new(table: &Table) -> Self {
        let containing = |s: &str| table.header.iter().position(|h| h.contains(s));
        Columns {
            grid: table.column("Grid Size"),
            block: table.column("Block Size"),
            stream: table.column("Stream"),
            push_pop: containing("Push/Pop_Range"),
            start_end: containing("Start/Stop_Range"),
        }
    }
}

/// The NVTX range stack of an NVTX column cell, outermost first, joined with `/`.
///
/// A cell reads `591  "<default domain>:decode:none:none:none:none:none:none" `: the thread
/// id, then one quoted `Domain:Name:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg` per pushed
/// range (start/end ranges carry an `Id:` before the domain: `lead` is 2 there). A name may
/// itself contain `:`, so it is everything between the leading fields and the six trailing
/// ones. The default domain is dropped; a named domain is kept as `domain:name`.
///
/// Each domain has its own stack, listed one after the other: a library's range does not nest
/// in the stage (under torchrun NCCL's `ncclCommInitRankConfig` stays open on the thread for
/// the whole run). So the default domain's stack is the range when it has one, and the named
/// domains' ranges are the range only when it has none (a workload that marks its stages in a
/// domain of its own).
fn nvtx_range(cell: &str, lead: usize) -> Option<String> {
    let mut names: Vec<(bool, String)> = Vec::new();
    let mut rest = cell;
    while let Some(open) = rest.find('"') {
        let after = rest.get(open + 1..).unwrap_or("");
        let Some(close) = after.find('"') else {
            break;
        };
        if let Some(name) = after.get(..close).and_then(|r| range_name(r, lead)) {
            names.push(name);
        }
        rest = after.get(close + 1..).unwrap_or("");
    }
    if names.is_empty() {
        // No quotes: `591 domain:name:...` or nothing at all.
        let unquoted = cell.trim().trim_start_matches(|c: char| c.is_ascii_digit());
        return range_name(unquoted.trim(), lead).map(|(_, name)| name);
    }
    let in_default = names.iter().any(|(default, _)| *default);
    let stack: Vec<String> = names
        .into_iter()
        .filter(|(default, _)| *default == in_default)
        .map(|(_, name)| name)
        .collect();
    Some(stack.join("/"))
}

/// `domain:name` (or `name` for the default domain) of one `Domain:Name:...` range record,
/// and whether it is in the default domain.
fn range_name(record: &str, lead: usize) -> Option<(bool, String)> {
    const TRAILING: usize = 6;
    let parts: Vec<&str> = record.split(':').collect();
    if parts.len() <= lead {
        let name = record.trim();
        return (!name.is_empty() && lead == 1 && !name.contains(':'))
            .then(|| (true, name.to_string()));
    }
    let domain = parts.get(lead - 1).copied().unwrap_or("").trim();
    let end = if parts.len() >= lead + 1 + TRAILING {
        parts.len() - TRAILING
    } else {
        parts.len()
    };
    let name = parts.get(lead..end)?.join(":");
    let name = name.trim();
    if name.is_empty() || name == "none" {
        return None;
    }
    if domain.is_empty() || domain == "<default domain>" {
        Some((true, name.to_string()))
    } else {
        Some((false, format!("{domain}:{name}")))
    }
}

/// The GPU as the `device__attribute_*` columns of `row` describe it.
fn device(table: &Table, units: Option<&StringRecord>, row: &StringRecord) -> Option<Device> {
    let col = |name: &str| table.column(name);
    let unit_of = |c: usize| units.and_then(|u| u.get(c)).unwrap_or("").trim();
    let text = |name: &str| {
        col(name)
            .and_then(|c| row.get(c))
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    // In base units by the units row, bytes where it is blank.
    let number = |name: &str| {
        let c = col(name)?;
        let v = row.get(c).and_then(parse_number)?;
        Some(v * unit_factor(unit_of(c)).unwrap_or(1.0))
    };
    // `*_khz` columns are kHz when the units row leaves them blank.
    let khz = |name: &str| {
        let c = col(name)?;
        let v = row.get(c).and_then(parse_number)?;
        let unit = unit_of(c);
        if unit.is_empty() {
            whole_u64(v * 1000.0)
        } else {
            unit_factor(unit).and_then(|f| whole_u64(v * f))
        }
    };
    let name = text("device__attribute_display_name")?;
    Some(Device {
        name: name.to_string(),
        index: number("device__attribute_device_index")
            .and_then(whole_u32)
            .or_else(|| {
                text("Device")
                    .and_then(parse_u64)
                    .and_then(|n| u32::try_from(n).ok())
            }),
        compute_capability: text("CC").map(str::to_string),
        sm_count: number("device__attribute_multiprocessor_count").and_then(whole_u32),
        memory_bytes: number("device__attribute_total_memory").and_then(whole_u64),
        sm_clock_max_hz: khz("device__attribute_max_gpu_frequency_khz"),
        memory_clock_max_hz: khz("device__attribute_max_mem_frequency_khz"),
        l2_cache_bytes: number("device__attribute_l2_cache_size").and_then(whole_u64),
        sources: vec![Source::Ncu],
        ..Device::default()
    })
}

/// Keeps the first device seen; a different one later is reported, not merged.
fn note_device(ctx: &mut FileCtx<'_>, out: &mut Collected, device: Device) {
    match &out.device {
        None => out.device = Some(device),
        Some(first) if first.name == device.name && first.index == device.index => {}
        Some(first) => {
            let first = first.name.clone();
            ctx.diags.note(
                "ncu.several_devices",
                Severity::Info,
                || format!("launches ran on more than one GPU; the device shown is the first ({first})"),
                || device.name.clone(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvtx_cells() {
        let cell = r#"591  "<default domain>:decode:none:none:none:none:none:none" "#;
        assert_eq!(nvtx_range(cell, 1).as_deref(), Some("decode"));
        let nested = r#"7  "<default domain>:step:none:none:none:none:none:none" "<default domain>:layer:3:none:none:none:none:none:none" "#;
        assert_eq!(nvtx_range(nested, 1).as_deref(), Some("step/layer:3"));
        let domain = r#"7  "vllm:forward:none:none:none:none:none:none" "#;
        assert_eq!(nvtx_range(domain, 1).as_deref(), Some("vllm:forward"));
        // A rank of a tensor-parallel run under ncu (two H200s): NCCL's stack follows the
        // default domain's and does not nest in it.
        let nccl = r#"1216  "<default domain>:decode:none:none:none:none:none:none"  "NCCL:ncclCommInitRankConfig:none:none:none:none:REGISTERED:ncclCommInitRankConfig" "#;
        assert_eq!(nvtx_range(nccl, 1).as_deref(), Some("decode"));
        let two = r#"7  "vllm:step:none:none:none:none:none:none" "NCCL:ncclAllReduce:none:none:none:none:none:none" "#;
        assert_eq!(
            nvtx_range(two, 1).as_deref(),
            Some("vllm:step/NCCL:ncclAllReduce")
        );
        assert_eq!(nvtx_range("", 1), None);
        assert_eq!(nvtx_range("  ", 2), None);
    }
}
