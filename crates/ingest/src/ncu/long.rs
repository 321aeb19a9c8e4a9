//! The long format (`--page details`, `--metrics`, `--section`): one row per metric, each row
//! repeating the launch's descriptive columns, with the unit chosen per row.

use std::path::Path;

use super::fields::KernelBuilder;
use super::number::{parse_dim3, parse_number, parse_u64, unit_factor, LocaleCheck};
use super::{no_kernels, no_readable_rows, Collected, FileCtx, LaunchKey, Table};
use crate::error::IngestError;

pub(super) fn read(
    table: &Table,
    ctx: &mut FileCtx<'_>,
    out: &mut Collected,
) -> Result<(), IngestError> {
    let col = |name: &str| table.column(name);
    let id_col = col("ID").unwrap_or(0);
    let (Some(name_col), Some(metric_col), Some(value_col)) =
        (col("Kernel Name"), col("Metric Name"), col("Metric Value"))
    else {
        return Err(
            ctx.invalid("the header row lacks `Kernel Name`, `Metric Name` or `Metric Value`")
        );
    };
    let process_col = col("Process ID");
    let section_col = col("Section Name");
    let label_col = col("Body Item Label");
    let unit_col = col("Metric Unit");
    let (grid_col, block_col, stream_col) = (col("Grid Size"), col("Block Size"), col("Stream"));
    if table.rows.is_empty() {
        return Err(no_kernels(ctx));
    }

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

    // Files of one launch lie side by side; rows from different directories are different
    // launches even when their `ID`s (each file counts from 0) agree.
    let dir = ctx.path.parent().unwrap_or(Path::new("")).to_path_buf();
    // Rows end after `Metric Value` when the rule columns are empty, so only the columns up to
    // the metric's name must be there.
    let needed = id_col.max(name_col).max(metric_col) + 1;
    let mut read_rows = 0usize;
    for row in &table.rows {
        if row.len() < needed {
            ctx.malformed_row("the row has fewer cells than the header", row);
            continue;
        }
        let id_cell = row.get(id_col).unwrap_or("").trim();
        let Some(id) = parse_u64(id_cell) else {
            ctx.malformed_row("the `ID` cell is not a number", row);
            continue;
        };
        let name = row.get(name_col).unwrap_or("").trim();
        if name.is_empty() {
            ctx.malformed_row("the `Kernel Name` cell is empty", row);
            continue;
        }
        let cell = |c: Option<usize>| c.and_then(|c| row.get(c)).unwrap_or("").trim();
        let key = LaunchKey {
            dir: dir.clone(),
            process_id: cell(process_col).to_string(),
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
        let Some(kernel) = out.kernels.get_mut(index) else {
            continue;
        };
        read_rows += 1;
        kernel.launch(
            parse_dim3(cell(grid_col)),
            parse_dim3(cell(block_col)),
            parse_u64(cell(stream_col)),
        );

        // Rule rows (a section's advice) carry no metric.
        let metric = row.get(metric_col).unwrap_or("").trim();
        if metric.is_empty() {
            continue;
        }
        let Some(value_cell) = row.get(value_col) else {
            ctx.malformed_row("the row ends before `Metric Value`", row);
            continue;
        };
        let Some(value) = parse_number(value_cell) else {
            continue;
        };
        let unit = cell(unit_col);
        let factor = match unit_factor(unit) {
            Some(f) => f,
            None => {
                ctx.unknown_unit(metric, value_cell.trim(), unit);
                1.0
            }
        };
        let section = cell(section_col);
        let label = cell(label_col);
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
    if read_rows == 0 {
        return Err(no_readable_rows(ctx, table.rows.len()));
    }
    Ok(())
}
