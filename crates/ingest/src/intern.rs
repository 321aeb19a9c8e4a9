//! String interning: each distinct name stored once, referred to by a `u32`. Traces repeat a
//! few hundred names (kernels, operators, ranges) millions of times.

use rustc_hash::FxHashMap;

#[derive(Debug, Default)]
pub struct Interner {
    strings: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Interner {
    /// The id of `s`, adding it on first sight.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }

    /// The string of an id this interner returned.
    pub fn get(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", String::as_str)
    }

    /// How many distinct strings there are (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// All strings, indexed by id.
    pub fn into_strings(self) -> Vec<String> {
        self.strings
    }
}
