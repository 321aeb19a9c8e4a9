//! The compare page's "Diff of two runs": the report crate's [`Diff`] of two loaded bundles —
//! the diff `llmprof diff A B` prints — as the JSON the page lays out with `textContent`. A is
//! the run captured first (run ids sort by capture time), B the other.

use llmprof_bundle::Bundle;
use llmprof_report::diff::Diff;
use serde::Serialize;

/// One column of the diff table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffColumn {
    pub header: String,
    pub numeric: bool,
}

/// The diff as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffView {
    /// Run ids of A and B.
    pub a: String,
    pub b: String,
    /// Which run is which, in one line.
    pub about: String,
    pub columns: Vec<DiffColumn>,
    /// The table's cells, as `Diff::table` formats them.
    pub rows: Vec<Vec<String>>,
    /// The unrounded number behind each cell (`data-value`), where there is one.
    pub values: Vec<Vec<Option<f64>>>,
    /// Each row's key, as a budget of `llmprof check` names it.
    pub keys: Vec<String>,
    /// What the runs cannot be diffed on, and why.
    pub notes: Vec<String>,
    pub source: String,
}

/// The diff of two runs, in either order: A is the one whose run id sorts first.
pub fn diff_view(x: &Bundle, y: &Bundle) -> DiffView {
    let (a, b) = if y.run_id < x.run_id { (y, x) } else { (x, y) };
    let d = Diff::of(a, b);
    let t = d.table();
    DiffView {
        about: format!(
            "B = {} against A = {} (A is the run captured first)",
            d.b, d.a
        ),
        a: d.a.clone(),
        b: d.b.clone(),
        columns: t
            .columns
            .iter()
            .map(|c| DiffColumn {
                header: c.header.clone(),
                numeric: c.numeric,
            })
            .collect(),
        values: (0..t.rows.len())
            .map(|i| (0..t.columns.len()).map(|j| t.value(i, j)).collect())
            .collect(),
        rows: t.rows,
        keys: d.rows.iter().map(|r| r.key.clone()).collect(),
        notes: d.notes,
        source: t.source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_is_the_run_captured_first_whichever_is_given_first() {
        let old = Bundle::new("20261101-000000-old");
        let new = Bundle::new("20261102-000000-new");
        let v = diff_view(&new, &old);
        assert_eq!(v, diff_view(&old, &new));
        assert_eq!(
            (v.a.as_str(), v.b.as_str()),
            ("20261101-000000-old", "20261102-000000-new")
        );
        assert!(v
            .about
            .starts_with("B = 20261102-000000-new against A = 20261101-000000-old"));
        assert_eq!(v.columns.len(), 7);
        assert!(v.columns[1].numeric && !v.columns[0].numeric);
        assert!(v.rows.is_empty() && v.notes.is_empty());
    }
}
