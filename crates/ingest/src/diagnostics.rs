//! Collects each class of skipped or doubtful input record once, with a count and the first
//! example, so that a bundle says what was dropped without repeating itself a million times.

use std::collections::BTreeMap;

use llmprof_bundle::{Diagnostic, Severity, Source};

/// Longest example kept, in characters.
const EXAMPLE_CHARS: usize = 300;

/// Accumulates [`Diagnostic`]s for one input file.
#[derive(Debug, Clone)]
pub struct Diagnostics {
    source: Source,
    file: String,
    classes: BTreeMap<&'static str, Diagnostic>,
}

impl Diagnostics {
    pub fn new(source: Source, file: impl Into<String>) -> Self {
        Diagnostics {
            source,
            file: file.into(),
            classes: BTreeMap::new(),
        }
    }

    /// Records one occurrence of class `code`. `message` and `example` are kept from the first
    /// occurrence only; `example` is only called then.
    pub fn note(
        &mut self,
        code: &'static str,
        severity: Severity,
        message: impl FnOnce() -> String,
        example: impl FnOnce() -> String,
    ) {
        self.note_n(code, severity, 1, message, example);
    }

    /// Records `count` occurrences at once.
    pub fn note_n(
        &mut self,
        code: &'static str,
        severity: Severity,
        count: u64,
        message: impl FnOnce() -> String,
        example: impl FnOnce() -> String,
    ) {
        if count == 0 {
            return;
        }
        match self.classes.get_mut(code) {
            Some(d) => d.count += count,
            None => {
                let d = Diagnostic {
                    source: self.source,
                    file: self.file.clone(),
                    code: code.to_string(),
                    severity,
                    message: message(),
                    count,
                    example: shorten(&example()),
                };
                self.classes.insert(code, d);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    pub fn finish(self) -> Vec<Diagnostic> {
        self.classes.into_values().collect()
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= EXAMPLE_CHARS {
        return s.to_string();
    }
    let mut out: String = s.chars().take(EXAMPLE_CHARS).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_once_per_class_and_keeps_first_example() {
        let mut d = Diagnostics::new(Source::Kineto, "t.json");
        for i in 0..3 {
            d.note(
                "kineto.x",
                Severity::Warning,
                || "msg".into(),
                || format!("ex{i}"),
            );
        }
        let v = d.finish();
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].count, v[0].example.as_str()), (3, "ex0"));
    }
}
