//! Escaping text for GitHub-flavoured Markdown table cells and paragraphs, so that names from
//! input data (`void k<(int)4>(T1 *)`, `a|b`, `<script>`) render as text in every preview.

/// Escapes `s` for Markdown: HTML-significant characters as entities, Markdown punctuation with
/// backslashes, `|` so table cells stay cells, and newlines as spaces.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_table_pipes() {
        assert_eq!(escape("a|b"), "a\\|b");
        assert_eq!(
            escape("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(
            escape("void k<(int)4>(T1 *)"),
            "void k&lt;(int)4&gt;(T1 \\*)"
        );
        assert_eq!(escape("nvjet_sm90"), "nvjet\\_sm90");
        assert_eq!(escape("x\ny"), "x y");
    }
}
