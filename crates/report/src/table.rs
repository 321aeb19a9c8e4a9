//! [`TableView`]: a table as every renderer receives it — columns with their header (unit
//! included), whether they hold numbers, whether a narrow renderer may leave them out, the
//! rows as formatted text, and where the numbers come from.

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The header, with the unit: `Wall (ms)`.
    pub header: String,
    /// Numbers are right-aligned.
    pub numeric: bool,
    /// A narrow renderer (the terminal) may leave the column out, rightmost first.
    pub optional: bool,
}

impl Column {
    /// A column of text.
    pub fn text(header: &str) -> Column {
        Column {
            header: header.into(),
            numeric: false,
            optional: false,
        }
    }

    /// A column of numbers.
    pub fn num(header: &str) -> Column {
        Column {
            numeric: true,
            ..Column::text(header)
        }
    }

    /// The column may be left out where the table does not fit.
    pub fn optional(self) -> Column {
        Column {
            optional: true,
            ..self
        }
    }
}

/// One cell as a template lays it out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell<'a> {
    pub text: &'a str,
    pub numeric: bool,
    /// The unrounded number, for `data-value`.
    pub value: Option<f64>,
}

/// A table: columns, rows of formatted cells, and the source of its numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableView {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<String>>,
    /// The unrounded number behind each cell, where a renderer can use it (a sort key, a
    /// browser test's check); parallel to `rows`, or empty.
    pub values: Vec<Vec<Option<f64>>>,
    /// Where the numbers come from (`Nsight Systems CUPTI kernel trace`), for a caption; empty
    /// when the section text says it.
    pub source: String,
}

impl TableView {
    /// An empty table with `columns`.
    pub fn new(columns: Vec<Column>) -> TableView {
        TableView {
            columns,
            rows: Vec::new(),
            values: Vec::new(),
            source: String::new(),
        }
    }

    /// The table with its source named.
    pub fn from_source(self, source: impl Into<String>) -> TableView {
        TableView {
            source: source.into(),
            ..self
        }
    }

    /// Appends a row.
    pub fn push(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Appends a row of cells and the numbers they show.
    pub fn push_values(&mut self, cells: Vec<String>, values: Vec<Option<f64>>) {
        self.values.resize(self.rows.len(), Vec::new());
        self.rows.push(cells);
        self.values.push(values);
    }

    /// The number behind cell `(row, col)`, when the table carries numbers.
    pub fn value(&self, row: usize, col: usize) -> Option<f64> {
        self.values.get(row)?.get(col).copied().flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The cells of row `i`, for templates.
    pub fn cells(&self, i: usize) -> Vec<Cell<'_>> {
        let Some(row) = self.rows.get(i) else {
            return Vec::new();
        };
        row.iter()
            .enumerate()
            .map(|(j, text)| Cell {
                text,
                numeric: self.columns.get(j).is_some_and(|c| c.numeric),
                value: self.value(i, j),
            })
            .collect()
    }

    /// The cell of the row whose first cell is `key`, in the column headed `header`.
    pub fn cell(&self, key: &str, header: &str) -> Option<&str> {
        let col = self.columns.iter().position(|c| c.header == header)?;
        let row = self
            .rows
            .iter()
            .find(|r| r.first().is_some_and(|k| k == key))?;
        row.get(col).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_carry_alignment_and_lookup_finds_them() {
        let mut t = TableView::new(vec![Column::text("Stage"), Column::num("Wall (ms)")]);
        t.push(vec!["decode".into(), "12.000".into()]);
        t.push_values(
            vec!["prefill".into(), "1.500".into()],
            vec![None, Some(1.5)],
        );
        let texts: Vec<(&str, bool)> = t.cells(0).iter().map(|c| (c.text, c.numeric)).collect();
        assert_eq!(texts, vec![("decode", false), ("12.000", true)]);
        assert_eq!(t.cells(1)[1].value, Some(1.5));
        assert_eq!(t.cells(0)[1].value, None);
        assert_eq!(t.cell("decode", "Wall (ms)"), Some("12.000"));
        assert_eq!(t.cell("encode", "Wall (ms)"), None);
        assert!(t.cells(3).is_empty());
    }
}
