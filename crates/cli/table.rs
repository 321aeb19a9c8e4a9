//! A report table ([`TableView`]) as terminal text: aligned columns, numbers right-aligned,
//! optional columns left out when the table is too wide, and the widest text column cut to
//! the terminal width with an ellipsis.

use std::fmt::Write as _;

use llmprof_report::TableView;

/// The narrowest the flexible (cut) column gets before optional columns are left out.
const FLEX_MIN: usize = 40;

/// Renders `t` in at most `width` columns (the flexible column cut to at least 12).
pub fn render(t: &TableView, width: usize) -> String {
    let mut shown: Vec<usize> = (0..t.columns.len()).collect();
    let mut widths = natural_widths(t);
    let flex = flex_column(t, &widths);
    let total = |shown: &[usize], widths: &[usize]| -> usize {
        shown.iter().map(|&i| widths[i] + 2).sum::<usize>() + 2
    };
    // Leave out optional columns, rightmost first, while the flexible column would be cut
    // below FLEX_MIN.
    while total(&shown, &widths) > width {
        let others = total(&shown, &widths) - widths[flex];
        if width.saturating_sub(others) >= FLEX_MIN.min(widths[flex]) {
            break;
        }
        match shown.iter().rposition(|&i| t.columns[i].optional) {
            Some(pos) => {
                shown.remove(pos);
            }
            None => break,
        }
    }
    let over = total(&shown, &widths).saturating_sub(width);
    if over > 0 {
        widths[flex] = widths[flex].saturating_sub(over).max(12);
    }
    let mut out = String::new();
    let headers: Vec<&str> = t.columns.iter().map(|c| c.header.as_str()).collect();
    line(t, &shown, &widths, &headers, &mut out);
    for row in &t.rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(t, &shown, &widths, &cells, &mut out);
    }
    out
}

/// The widest cell (or header) of each column, in characters.
fn natural_widths(t: &TableView) -> Vec<usize> {
    let mut widths: Vec<usize> = t.columns.iter().map(|c| c.header.chars().count()).collect();
    for row in &t.rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths
}

/// The column that is cut when the table is too wide: the widest text column.
fn flex_column(t: &TableView, widths: &[usize]) -> usize {
    (0..t.columns.len())
        .filter(|&i| !t.columns[i].numeric)
        .max_by_key(|&i| (widths[i], std::cmp::Reverse(i)))
        .unwrap_or(0)
}

fn line(t: &TableView, shown: &[usize], widths: &[usize], cells: &[&str], out: &mut String) {
    let mut s = String::from("  ");
    for (n, &i) in shown.iter().enumerate() {
        let cell = cut(cells.get(i).copied().unwrap_or(""), widths[i]);
        let pad = widths[i].saturating_sub(cell.chars().count());
        if n > 0 {
            s.push_str("  ");
        }
        if t.columns[i].numeric {
            s.push_str(&" ".repeat(pad));
            s.push_str(&cell);
        } else {
            s.push_str(&cell);
            s.push_str(&" ".repeat(pad));
        }
    }
    let _ = writeln!(out, "{}", s.trim_end());
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use llmprof_report::Column;

    use super::*;

    fn table() -> TableView {
        let mut t = TableView::new(vec![
            Column::text("name"),
            Column::num("n"),
            Column::num("detail").optional(),
        ]);
        t.push(vec!["a".repeat(100), "1".into(), "12345".into()]);
        t
    }

    #[test]
    fn cuts_the_flexible_column() {
        let s = render(&table(), 70);
        assert!(s.lines().all(|l| l.chars().count() <= 70), "{s}");
        assert!(s.contains('…'));
        assert!(
            s.contains("detail"),
            "room enough to keep the optional column: {s}"
        );
    }

    #[test]
    fn leaves_out_optional_columns_before_cutting_names_short() {
        let s = render(&table(), 50);
        assert!(!s.contains("detail"), "{s}");
        assert!(s.lines().all(|l| l.chars().count() <= 50), "{s}");
        let wide = render(&table(), 200);
        assert!(
            wide.contains(&"a".repeat(100)) && wide.contains("12345"),
            "{wide}"
        );
    }
}
