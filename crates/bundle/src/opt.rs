//! [`OptU32`]: an `Option<u32>` in four bytes, for the timeline's optional columns.
//!
//! A timeline holds millions of kernels, and each has up to six optional indices (stage,
//! launch geometry, range, graph, graph node, launch call). `Option<u32>` takes eight bytes;
//! this takes four, with `u32::MAX` standing for `None`. Every value these columns hold is a
//! position in a list (which cannot reach `u32::MAX` entries) or an id read from a trace, and
//! an id of `u32::MAX` is taken as absent, as a larger one already is. In JSON it is exactly
//! an `Option<u32>`: a number or `null`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An `Option<u32>` in four bytes; `u32::MAX` is `None`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptU32(u32);

impl OptU32 {
    pub const NONE: OptU32 = OptU32(u32::MAX);

    /// `Some(v)`, except that `v == u32::MAX` is `None`.
    pub const fn some(v: u32) -> OptU32 {
        OptU32(v)
    }

    pub const fn get(self) -> Option<u32> {
        if self.0 == u32::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    pub const fn is_some(self) -> bool {
        self.0 != u32::MAX
    }

    pub const fn is_none(self) -> bool {
        self.0 == u32::MAX
    }

    /// Row `i` of an optional column; `None` too where the column is shorter (older
    /// timelines lack some columns, or have them empty).
    pub fn at(column: &[OptU32], i: usize) -> Option<u32> {
        column.get(i).and_then(|v| v.get())
    }

    /// A column of these from `Option`s.
    pub fn column(values: &[Option<u32>]) -> Vec<OptU32> {
        values.iter().map(|&v| OptU32::from(v)).collect()
    }

    /// The value plus one, `None` as 0: how chunk bytes store an optional column.
    pub const fn to_shifted(self) -> u64 {
        self.0.wrapping_add(1) as u64
    }
}

impl Default for OptU32 {
    fn default() -> OptU32 {
        OptU32::NONE
    }
}

impl From<Option<u32>> for OptU32 {
    fn from(v: Option<u32>) -> OptU32 {
        v.map_or(OptU32::NONE, OptU32::some)
    }
}

impl From<OptU32> for Option<u32> {
    fn from(v: OptU32) -> Option<u32> {
        v.get()
    }
}

impl PartialEq<Option<u32>> for OptU32 {
    fn eq(&self, other: &Option<u32>) -> bool {
        self.get() == *other
    }
}

impl fmt::Debug for OptU32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for OptU32 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for OptU32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OptU32, D::Error> {
        Option::<u32>::deserialize(d).map(OptU32::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_reads_and_writes_json_as_an_option_and_takes_four_bytes() {
        assert_eq!(std::mem::size_of::<OptU32>(), 4);
        let values: Vec<OptU32> = vec![Some(0).into(), None.into(), Some(7).into()];
        let text = serde_json::to_string(&values).unwrap();
        assert_eq!(text, "[0,null,7]");
        let back: Vec<OptU32> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, values);
        let as_options: Vec<Option<u32>> = back.iter().map(|v| v.get()).collect();
        assert_eq!(as_options, [Some(0), None, Some(7)]);
        assert_eq!(
            (
                OptU32::at(&back, 2),
                OptU32::at(&back, 1),
                OptU32::at(&back, 3)
            ),
            (Some(7), None, None)
        );
        // The reserved value reads as absent, in both directions.
        assert_eq!(OptU32::from(Some(u32::MAX)), OptU32::NONE);
        let max: Vec<OptU32> = serde_json::from_str("[4294967295]").unwrap();
        assert_eq!(max, [OptU32::NONE]);
        assert!(serde_json::from_str::<Vec<OptU32>>("[4294967296]").is_err());
        assert_eq!(OptU32::NONE.to_shifted(), 0);
        assert_eq!(OptU32::some(4).to_shifted(), 5);
    }
}
