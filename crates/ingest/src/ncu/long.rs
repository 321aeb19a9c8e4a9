//! The long format (`--page details`, `--metrics`, `--section`): one row per metric, each row
//! repeating the launch's descriptive columns, with the unit chosen per row.

use std::path::Path;

use super::fields::KernelBuilder;
use super::number::{parse_dim3, parse_number, parse_u64, unit_factor, LocaleCheck};
use super::{no_kernels, no_readable_rows, Collected, FileCtx, LaunchKey, Table};
use crate::error::IngestError;

/// Reads a long-format table into `out`: each row's launch (by [`LaunchKey`]) gets the row's
/// launch configuration and metric.
pub(super) fn read(
    table: &Table,
    ctx: &mut FileCtx<'_>,
    out: &mut Collected,
) -> Result<(), IngestError> {
    let cols = Columns::find(table, ctx)?;
    if table.rows.is_empty() {
        return Err(no_kernels(ctx));
    }
    check_locale(table, cols.value, ctx)?;

    // Files of one launch lie side by side; rows from different directories are different
    // launches even when their `ID`s (each file counts from 0) agree.
    let dir = ctx.path.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut read_rows = 0usize;
    for row in &table.rows {
        let Some(kernel) = launch_of(row, &cols, &dir, ctx, out) else {
            continue;
        };
        read_rows += 1;
        kernel.launch(
            parse_dim3(cell(row, cols.grid)),
            parse_dim3(cell(row, cols.block)),
            parse_u64(cell(row, cols.stream)),
        );
        read_metric(row, &cols, ctx, kernel);
    }
    if read_rows == 0 {
        return Err(no_readable_rows(ctx, table.rows.len()));
    }
    Ok(())
}

/// The columns of the long format; the optional ones are `None` where the file lacks them.
struct Columns {
    id: usize,
    name: usize,
    metric: usize,
    value: usize,
    process: Option<usize>,
    section: Option<usize>,
    label: Option<usize>,
    unit: Option<usize>,
    grid: Option<usize>,
    block: Option<usize>,
    stream: Option<usize>,
}

impl Columns {
    /// Finds the columns by header name; `Kernel Name`, `Metric Name` and `Metric Value` must
    /// be there (`ID` defaults to the first column).
    fn find(table: &Table, ctx: &FileCtx<'_>) -> Result<Self, IngestError> {
        let col = |name: &str| table.column(name);
        let (Some(name), Some(metric), Some(value)) =
            (col("Kernel Name"), col("Metric Name"), col("Metric Value"))
        else {
            return Err(
                ctx.invalid("the header row lacks `Kernel Name`, `Metric Name` or `Metric Value`")
            );
        };
        Ok(Columns {
            id: col("ID").unwrap_or(0),
            name,
            metric,
            value,
            process: col("Process ID"),
            section: col("Section Name"),
            label: col("Body Item Label"),
            unit: col("Metric Unit"),
            grid: col("Grid Size"),
            block: col("Block Size"),
            stream: col("Stream"),
        })
    }

    /// Cells a row needs: rows end after `Metric Value` when the rule columns are empty, so
    /// only the columns up to the metric's name must be there.
    fn needed(&self) -> usize {
        self.id.max(self.name).max(self.metric) + 1
    }
}

/// The trimmed cell of column `c`; empty when the column or the cell is missing.
fn cell(row: &csv::StringRecord, c: Option<usize>) -> &str {
    c.and_then(|c| row.get(c)).unwrap_or("").trim()
}

/// Refuses numbers written in another locale's format; reports a file that mixes formats.
fn check_locale(table: &Table, value_col: usize, ctx: &mut FileCtx<'_>) -> Result<(), IngestError> {
    let mut locale = LocaleCheck::default();
    for row in &table.rows {
        if let Some(cell) = row.get(value_col) {
            locale.observe(cell);
        }
    }
    locale.check(ctx.path)?;
    if let Some(example) = locale.conflicting_example() {
        ctx.locale_conflict(example);
    }
    Ok(())
}

/// The kernel of the launch a row belongs to, added at its first row. `None`, with a
/// diagnostic, for a row too short or without an `ID` or a kernel name.
fn launch_of<'o>(
    row: &csv::StringRecord,
    cols: &Columns,
    dir: &Path,
    ctx: &mut FileCtx<'_>,
    out: &'o mut Collected,
) -> Option<&'o mut KernelBuilder> {
    if row.len() < cols.needed() {
        ctx.malformed_row("the row has fewer cells than the header", row);
        return None;
    }
    let id_cell = row.get(cols.id).unwrap_or("").trim();
    let Some(id) = parse_u64(id_cell) else {
        ctx.malformed_row("the `ID` cell is not a number", row);
        return None;
    };
    let name = row.get(cols.name).unwrap_or("").trim();
    if name.is_empty() {
        ctx.malformed_row("the `Kernel Name` cell is empty", row);
        return None;
    }
    let key = LaunchKey {
        dir: dir.to_path_buf(),
        process_id: cell(row, cols.process).to_string(),
        id: id_cell.to_string(),
        kernel_name: name.to_string(),
    };
    // A launch spread over several files keeps the first file that named it as its `file`.
    let kernels = &mut out.kernels;
    let index = *out.long_index.entry(key).or_insert_with(|| {
        kernels.push(KernelBuilder::new(
            id,
            name.to_string(),
            ctx.name.to_string(),
        ));
        kernels.len() - 1
    });
    out.kernels.get_mut(index)
}

/// Adds a row's metric, converted to base units, under `section/metric [label]`. Rule rows
/// (a section's advice) carry no metric; a value that is not a number is skipped.
fn read_metric(
    row: &csv::StringRecord,
    cols: &Columns,
    ctx: &mut FileCtx<'_>,
    kernel: &mut KernelBuilder,
) {
    let metric = row.get(cols.metric).unwrap_or("").trim();
    if metric.is_empty() {
        return;
    }
    let Some(value_cell) = row.get(cols.value) else {
        ctx.malformed_row("the row ends before `Metric Value`", row);
        return;
    };
    let Some(value) = parse_number(value_cell) else {
        return;
    };
    let unit = cell(row, cols.unit);
    let factor = match unit_factor(unit) {
        Some(f) => f,
        None => {
            ctx.unknown_unit(metric, value_cell.trim(), unit);
            1.0
        }
    };
    let section = cell(row, cols.section);
    let label = cell(row, cols.label);
    let key = || {
        let mut k = if section.is_empty() {
            metric.to_string()
        } else {
            format!("{section}/{metric}")
        };
        if !label.is_empty() {
            k.push_str(&format!(" [{label}]"));
        }
        k
    };
    kernel.metric(key, Some(section), metric, unit, value * factor);
}
