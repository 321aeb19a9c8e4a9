//! Nsight Compute CSV exports: per-launch metrics for the kernels ncu profiled.
//!
//! Two shapes of CSV come out of `ncu --csv`, and both are read:
//!
//! * **raw page** (`--page raw`): one row per profiled launch, one column per metric, and a
//!   row of units right after the header;
//! * **long format** (`--page details`, `--metrics`, `--section`): one row per metric with
//!   `Section Name`, `Metric Name`, `Metric Unit` and `Metric Value` columns. Scripts commonly
//!   write one file per section for the same launch into one directory, each numbering its
//!   launches from `ID` 0, so long rows are merged by (directory, `Process ID`, `ID`,
//!   `Kernel Name`) into one [`NcuKernel`] per launch.
//!
//! The CSV is what ncu printed to its log, so the table can be preceded (and interleaved) by
//! the program's own stdout and by `==PROF==`/`==WARNING==`/`==ERROR==` lines; the header is
//! found as the first line whose first cell is `ID`. Values are formatted for people:
//! thousands separators, `n/a`, and units scaled per cell; [`number`] turns them into base
//! units (ns, bytes, Hz, percent).
//!
//! ncu shortens kernel names differently from Nsight Systems, so [`join_ncu`] matches them on
//! [`llmprof_bundle::names::match_key`], not on the text.

mod fields;
mod long;
mod number;
mod raw;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use llmprof_bundle::{Device, Diagnostic, Kernel, NcuKernel, OpKind, Severity, Source};

use crate::diagnostics::Diagnostics;
use crate::error::{what, IngestError};
use crate::input;
use llmprof_bundle::names::match_key;

use fields::KernelBuilder;

/// What the ncu inputs yielded.
#[derive(Debug, Clone, PartialEq)]
pub struct NcuInput {
    pub kernels: Vec<NcuKernel>,
    /// The GPU as ncu's `device__attribute_*` columns describe it (raw page only), else `None`.
    pub device: Option<Device>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads each path: a CSV file, or a directory searched recursively for `*.csv` files (in
/// sorted, deterministic order). Launches are returned in the order their first row was read.
///
/// Fails, naming the file, on anything that is not a usable ncu export: a missing or empty
/// file, a failed ncu run (only `==ERROR==` lines), a CSV that is not ncu's, a table without
/// rows, a comma-decimal locale, or a directory without CSV files. Rows that cannot be read
/// inside an otherwise good file are skipped and reported in the diagnostics.
pub fn read_ncu_paths(paths: &[PathBuf]) -> Result<NcuInput, IngestError> {
    let mut collected = Collected::default();
    let mut diagnostics = Vec::new();
    // A file named twice (on its own and inside a named directory) is read once.
    let mut seen = HashSet::new();
    for path in paths {
        for file in csv_files(path)? {
            if !seen.insert(file.clone()) {
                continue;
            }
            let name = file.display().to_string();
            let mut diags = Diagnostics::new(Source::Ncu, name.clone());
            read_file(&file, &name, &mut diags, &mut collected)?;
            diagnostics.extend(diags.finish());
        }
    }
    Ok(collected.finish(diagnostics))
}

/// [`read_ncu_paths`] of one CSV already in memory, `name` standing for its file in errors
/// and diagnostics (what a fuzzer or a caller holding the bytes has).
pub fn read_ncu_bytes(name: &str, bytes: &[u8]) -> Result<NcuInput, IngestError> {
    let mut collected = Collected::default();
    let mut diags = Diagnostics::new(Source::Ncu, name.to_string());
    read_text(Path::new(name), name, bytes, &mut diags, &mut collected)?;
    Ok(collected.finish(diags.finish()))
}

/// Sets [`NcuKernel::kernel`] and [`Kernel::ncu`] where the names match: first on the exact
/// name, else on [`match_key`]. A name that matches more than one kernel row is left unjoined
/// rather than guessed. Rows whose kind is not [`OpKind::Kernel`] are skipped. Earlier joins
/// are cleared, so calling it again is harmless.
pub fn join_ncu(kernels: &mut [Kernel], ncu: &mut [NcuKernel]) {
    // Name → the one kernel row with it, or `None` when several rows share it.
    let mut by_name: HashMap<String, Option<usize>> = HashMap::new();
    let mut by_key: HashMap<String, Option<usize>> = HashMap::new();
    for (i, k) in kernels.iter_mut().enumerate() {
        k.ncu.clear();
        if k.kind != OpKind::Kernel {
            continue;
        }
        by_name
            .entry(k.name.clone())
            .and_modify(|e| *e = None)
            .or_insert(Some(i));
        let key = match_key(&k.name);
        if !key.is_empty() {
            by_key
                .entry(key)
                .and_modify(|e| *e = None)
                .or_insert(Some(i));
        }
    }
    for (i, n) in ncu.iter_mut().enumerate() {
        n.kernel = None;
        let hit = match by_name.get(&n.name) {
            Some(exact) => *exact,
            None => by_key.get(&match_key(&n.name)).copied().flatten(),
        };
        let (Some(row), Ok(index)) = (hit.and_then(|k| kernels.get_mut(k)), u32::try_from(i))
        else {
            continue;
        };
        n.kernel = Some(row.id);
        row.ncu.push(index);
    }
}

/// Long-format rows of one launch share this key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LaunchKey {
    dir: PathBuf,
    process_id: String,
    id: String,
    kernel_name: String,
}

/// Launches and the device found so far, across files.
#[derive(Debug, Default)]
struct Collected {
    kernels: Vec<KernelBuilder>,
    long_index: HashMap<LaunchKey, usize>,
    device: Option<Device>,
}

impl Collected {
    /// The launches read, in the order their first row was read, with the files' diagnostics.
    fn finish(self, diagnostics: Vec<Diagnostic>) -> NcuInput {
        NcuInput {
            kernels: self
                .kernels
                .into_iter()
                .map(KernelBuilder::finish)
                .collect(),
            device: self.device,
            diagnostics,
        }
    }
}

/// What the format parsers need to know about the file at hand.
#[derive(Debug)]
struct FileCtx<'a> {
    path: &'a Path,
    /// The path as a string, for [`NcuKernel::file`].
    name: &'a str,
    diags: &'a mut Diagnostics,
}

impl FileCtx<'_> {
    fn invalid(&self, message: impl Into<String>) -> IngestError {
        IngestError::invalid(what::NCU, self.path, message)
    }

    /// Records a row that was skipped.
    fn malformed_row(&mut self, why: &str, row: &csv::StringRecord) {
        let why = why.to_string();
        self.diags.note(
            "ncu.malformed_row",
            Severity::Warning,
            || format!("rows that could not be read were skipped (first: {why})"),
            || row_text(row),
        );
    }

    /// Records a unit the unit table does not know; the value is kept as printed.
    fn unknown_unit(&mut self, metric: &str, value: &str, unit: &str) {
        self.diags.note(
            "ncu.unknown_unit",
            Severity::Info,
            || {
                "metrics with a unit llmprof does not know were kept as printed, not converted \
                 to base units"
                    .to_string()
            },
            || format!("{metric} = {value} {unit}"),
        );
    }

    /// Reports values that read as comma-decimal in a file that is mostly dot-decimal.
    fn locale_conflict(&mut self, example: &str) {
        let example = example.to_string();
        self.diags.note(
            "ncu.mixed_number_format",
            Severity::Warning,
            || {
                "some values look comma-decimal although most are dot-decimal; they were \
                 read as dot-decimal"
                    .to_string()
            },
            || example,
        );
    }
}

/// The row as CSV-ish text, for a diagnostic's example.
fn row_text(row: &csv::StringRecord) -> String {
    row.iter().collect::<Vec<_>>().join(",")
}

/// `path` itself, or the `*.csv` files under it when it is a directory.
fn csv_files(path: &Path) -> Result<Vec<PathBuf>, IngestError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(path).sort_by_file_name() {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(path).to_path_buf();
            IngestError::io(what::NCU, at, e.into())
        })?;
        let is_csv = entry
            .path()
            .extension()
            .is_some_and(|x| x.eq_ignore_ascii_case("csv"));
        if entry.file_type().is_file() && is_csv {
            files.push(entry.into_path());
        }
    }
    if files.is_empty() {
        return Err(IngestError::invalid(
            what::NCU,
            path,
            "the directory holds no .csv files (expected `ncu --csv` exports)",
        ));
    }
    Ok(files)
}

/// One file's CSV table, with everything that is not part of it set aside.
#[derive(Debug)]
struct Table {
    header: csv::StringRecord,
    /// Header name → column index (the first, should a name repeat); raw pages have hundreds
    /// of columns and are looked up per row.
    columns: HashMap<String, usize>,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    fn new(header: csv::StringRecord, rows: Vec<csv::StringRecord>) -> Self {
        let mut columns = HashMap::with_capacity(header.len());
        for (i, name) in header.iter().enumerate() {
            columns.entry(name.trim().to_string()).or_insert(i);
        }
        Table {
            header,
            columns,
            rows,
        }
    }

    /// Index of the header column named `name`.
    fn column(&self, name: &str) -> Option<usize> {
        self.columns.get(name).copied()
    }
}

fn read_file(
    path: &Path,
    name: &str,
    diags: &mut Diagnostics,
    out: &mut Collected,
) -> Result<(), IngestError> {
    let bytes = input::read_bytes(what::NCU, path)?;
    read_text(path, name, &bytes, diags, out)
}

/// One file's bytes: the table found and read as a raw page or a long (section/metrics)
/// export.
fn read_text(
    path: &Path,
    name: &str,
    bytes: &[u8],
    diags: &mut Diagnostics,
    out: &mut Collected,
) -> Result<(), IngestError> {
    let text = String::from_utf8_lossy(bytes);
    let mut ctx = FileCtx { path, name, diags };
    let table = split_table(&text, &mut ctx)?;
    let long = table.column("Metric Name").is_some() && table.column("Metric Value").is_some();
    if long {
        long::read(&table, &mut ctx, out)
    } else {
        raw::read(&table, &mut ctx, out)
    }
}

/// The tag of an ncu log line (`==PROF==` → `PROF`), if `line` is one.
fn log_tag(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("==")?;
    let end = rest.find("==")?;
    let tag = rest.get(..end)?;
    (!tag.is_empty() && tag.bytes().all(|b| b.is_ascii_uppercase())).then_some(tag)
}

/// The cells of one line parsed as CSV.
fn line_cells(line: &str) -> Option<csv::StringRecord> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes())
        .into_records()
        .next()?
        .ok()
}

/// Finds the header, sets aside the log and program output around the table, and parses the
/// table. Fails when there is no ncu table at all, saying why in the user's terms.
fn split_table(text: &str, ctx: &mut FileCtx<'_>) -> Result<Table, IngestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut first_error: Option<&str> = None;
    let mut errors = 0u64;
    let mut warnings = 0u64;
    let mut first_warning: Option<&str> = None;
    let mut program_lines = 0u64;
    let mut first_program_line: Option<&str> = None;
    let mut interleaved = 0u64;
    let mut first_interleaved: Option<&str> = None;
    let mut id_line_without_name = false;
    let mut table_text: Option<String> = None;

    for line in text.lines() {
        if let Some(tag) = log_tag(line) {
            match tag {
                "ERROR" => {
                    errors += 1;
                    first_error.get_or_insert(line.trim());
                }
                "WARNING" => {
                    warnings += 1;
                    first_warning.get_or_insert(line.trim());
                }
                _ if table_text.is_some() => {
                    interleaved += 1;
                    first_interleaved.get_or_insert(line.trim());
                }
                _ => {}
            }
            continue;
        }
        if let Some(table) = table_text.as_mut() {
            if !line.trim().is_empty() {
                table.push_str(line);
                table.push('\n');
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let header = line_cells(line)
            .filter(|cells| cells.get(0).map(str::trim) == Some("ID"))
            .map(|cells| cells.iter().any(|c| c.trim() == "Kernel Name"));
        match header {
            Some(true) => {
                let mut t = String::with_capacity(text.len());
                t.push_str(line);
                t.push('\n');
                table_text = Some(t);
            }
            Some(false) => id_line_without_name = true,
            None => {
                program_lines += 1;
                first_program_line.get_or_insert(line.trim());
            }
        }
    }

    let Some(table_text) = table_text else {
        return Err(if id_line_without_name {
            ctx.invalid(
                "the header row has no `Kernel Name` column; expected `ncu --csv --page \
                 raw|details` output",
            )
        } else if let Some(error) = first_error {
            ctx.invalid(format!(
                "ncu failed and wrote no results; the file holds only its log: `{error}`"
            ))
        } else {
            ctx.invalid(
                "not an ncu CSV export: no header row starting with `ID` (expected `ncu --csv \
                 --page raw|details` output)",
            )
        });
    };

    let d = &mut *ctx.diags;
    d.note_n(
        "ncu.program_output",
        Severity::Info,
        program_lines,
        || "lines before the ncu table (the profiled program's output) were skipped".into(),
        || first_program_line.unwrap_or_default().to_string(),
    );
    d.note_n(
        "ncu.warning",
        Severity::Info,
        warnings,
        || "ncu printed warnings while profiling".into(),
        || first_warning.unwrap_or_default().to_string(),
    );
    d.note_n(
        "ncu.error",
        Severity::Warning,
        errors,
        || "ncu printed errors while profiling; some launches may be missing".into(),
        || first_error.unwrap_or_default().to_string(),
    );
    d.note_n(
        "ncu.interleaved_log",
        Severity::Info,
        interleaved,
        || "ncu log lines inside the table were skipped".into(),
        || first_interleaved.unwrap_or_default().to_string(),
    );

    let mut records = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(table_text.as_bytes())
        .into_records();
    let header = match records.next() {
        Some(Ok(h)) => h,
        Some(Err(e)) => return Err(ctx.invalid(format!("unreadable header row: {e}"))),
        None => return Err(ctx.invalid("no header row")),
    };
    let mut rows = Vec::new();
    for record in records {
        match record {
            Ok(r) => rows.push(r),
            Err(e) => {
                let why = e.to_string();
                ctx.diags.note(
                    "ncu.malformed_row",
                    Severity::Warning,
                    || format!("rows that could not be read were skipped (first: {why})"),
                    || why.clone(),
                );
            }
        }
    }
    Ok(Table::new(header, rows))
}

/// The error for a table without data rows.
fn no_kernels(ctx: &FileCtx<'_>) -> IngestError {
    ctx.invalid("the table has a header but no profiled kernels")
}

/// The error for a table none of whose rows could be read.
fn no_readable_rows(ctx: &FileCtx<'_>, rows: usize) -> IngestError {
    ctx.invalid(format!(
        "none of the {rows} rows of the table could be read (rows too short or without an `ID`)"
    ))
}
