//! Plain-text tables for the terminal: aligned columns, numbers right-aligned, long names cut
//! to fit the terminal width with an ellipsis.

use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table whose one flexible column (the name) shrinks to fit `width`.
#[derive(Debug)]
pub struct Table {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
    flex: usize,
}

impl Table {
    /// `flex` is the index of the column that is cut when the table is too wide.
    pub fn new(headers: &[(&str, Align)], flex: usize) -> Self {
        Table {
            headers: headers.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
            flex,
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self, width: usize) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .map(|(h, _)| h.chars().count())
            .collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let total: usize = widths.iter().sum::<usize>() + 2 * n;
        if total > width && self.flex < n {
            let others = total - widths[self.flex];
            widths[self.flex] = width.saturating_sub(others).max(12);
        }
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::from("  ");
            for (i, (w, (_, align))) in widths.iter().zip(&self.headers).enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let cell = cut(cell, *w);
                let pad = w.saturating_sub(cell.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                match align {
                    Align::Left => {
                        s.push_str(&cell);
                        if i + 1 < n {
                            s.push_str(&" ".repeat(pad));
                        }
                    }
                    Align::Right => {
                        s.push_str(&" ".repeat(pad));
                        s.push_str(&cell);
                    }
                }
            }
            let _ = writeln!(out, "{}", s.trim_end());
        };
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        line(&headers, &mut out);
        for row in &self.rows {
            line(row, &mut out);
        }
        out
    }
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `20505` → `20,505`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Nanoseconds as milliseconds with three decimals.
pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Nanoseconds (float) as microseconds with two decimals.
pub fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

/// A percentage with one decimal.
pub fn pct(p: f64) -> String {
    format!("{p:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(thousands(20505), "20,505");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(ms(397_911_601), "397.912");
    }

    #[test]
    fn cuts_the_flexible_column() {
        let mut t = Table::new(&[("name", Align::Left), ("n", Align::Right)], 0);
        t.row(vec!["a".repeat(100), "1".into()]);
        let s = t.render(40);
        assert!(s.lines().all(|l| l.chars().count() <= 40), "{s}");
        assert!(s.contains('…'));
    }
}
