//! Checked reads from a `config.json` object: every number is validated (non-negative integer,
//! at most [`MAX_DIM`]) so that nothing downstream can overflow, divide by zero or allocate
//! without bound, whatever JSON it was given.

use serde_json::{Map, Value};

use super::ModelError;

/// Largest integer accepted for any dimension, count or layer index (2^24 = 16,777,216).
///
/// Real models are far below it (the largest vocabularies are ~262k, hidden sizes ~16k); the
/// bound keeps every product of a few dimensions finite and exact enough in `f64`.
pub(super) const MAX_DIM: u64 = 1 << 24;

/// One JSON object of the config (the top level or a nested `text_config`, ...), with the path
/// used in error messages and the model type errors name.
#[derive(Debug, Clone)]
pub(super) struct Section<'a> {
    obj: &'a Map<String, Value>,
    prefix: String,
    model_type: String,
}

impl<'a> Section<'a> {
    pub(super) fn new(obj: &'a Map<String, Value>, prefix: &str, model_type: &str) -> Self {
        Section {
            obj,
            prefix: prefix.to_owned(),
            model_type: model_type.to_owned(),
        }
    }

    /// The dotted path of `key` in this section, as error messages print it.
    pub(super) fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    pub(super) fn missing(&self, key: &str) -> ModelError {
        ModelError::MissingField {
            model_type: self.model_type.clone(),
            field: self.path(key),
        }
    }

    pub(super) fn invalid(&self, key: &str, reason: impl Into<String>) -> ModelError {
        ModelError::InvalidField {
            model_type: self.model_type.clone(),
            field: self.path(key),
            reason: reason.into(),
        }
    }

    /// The value of `key`; JSON `null` reads as absent (transformers writes `null` for unset).
    pub(super) fn raw(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    /// `true` when `key` is present and not `null`.
    pub(super) fn has(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    /// A non-negative integer, or `None` when absent/null.
    pub(super) fn opt_u64(&self, key: &str) -> Result<Option<u64>, ModelError> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => count(v).map(Some).map_err(|why| self.invalid(key, why)),
        }
    }

    /// A required integer >= 1.
    pub(super) fn req_pos(&self, key: &str) -> Result<u64, ModelError> {
        let v = self.opt_u64(key)?.ok_or_else(|| self.missing(key))?;
        self.at_least_one(key, v)
    }

    /// A required integer >= 0.
    pub(super) fn req_u64(&self, key: &str) -> Result<u64, ModelError> {
        self.opt_u64(key)?.ok_or_else(|| self.missing(key))
    }

    /// The first present key of `keys` (aliases such as GPT-2's `n_embd` / `hidden_size`),
    /// an integer >= 1. A missing error names the first key.
    pub(super) fn req_pos_any(&self, keys: &[&str]) -> Result<u64, ModelError> {
        for key in keys {
            if let Some(v) = self.opt_u64(key)? {
                return self.at_least_one(key, v);
            }
        }
        Err(self.missing(keys.first().copied().unwrap_or("?")))
    }

    /// An optional integer >= 1 (absent/null gives `None`).
    pub(super) fn opt_pos(&self, key: &str) -> Result<Option<u64>, ModelError> {
        match self.opt_u64(key)? {
            None => Ok(None),
            Some(v) => self.at_least_one(key, v).map(Some),
        }
    }

    /// An integer >= 1, `default` when absent/null.
    pub(super) fn pos_or(&self, key: &str, default: u64) -> Result<u64, ModelError> {
        Ok(self.opt_pos(key)?.unwrap_or(default))
    }

    /// An integer >= 0, `default` when absent/null.
    pub(super) fn u64_or(&self, key: &str, default: u64) -> Result<u64, ModelError> {
        Ok(self.opt_u64(key)?.unwrap_or(default))
    }

    fn at_least_one(&self, key: &str, v: u64) -> Result<u64, ModelError> {
        if v == 0 {
            Err(self.invalid(key, "0; it must be at least 1"))
        } else {
            Ok(v)
        }
    }

    /// A boolean, `default` when absent/null.
    pub(super) fn bool_or(&self, key: &str, default: bool) -> Result<bool, ModelError> {
        match self.raw(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.invalid(key, "not true or false")),
        }
    }

    /// A finite positive number (integer or float), or `None` when absent/null.
    pub(super) fn opt_positive_f64(&self, key: &str) -> Result<Option<f64>, ModelError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) if f.is_finite() && f > 0.0 && f <= MAX_DIM as f64 => Ok(Some(f)),
                _ => Err(self.invalid(key, "not a positive number")),
            },
            Some(_) => Err(self.invalid(key, "not a number")),
        }
    }

    /// A list of non-negative integers, or `None` when absent/null.
    pub(super) fn opt_u64_list(&self, key: &str) -> Result<Option<Vec<u64>>, ModelError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| count(v).map_err(|why| self.invalid(key, format!("an element is {why}"))))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.invalid(key, "not a list of integers")),
        }
    }

    /// A list of strings, or `None` when absent/null.
    pub(super) fn opt_str_list(&self, key: &str) -> Result<Option<Vec<&'a str>>, ModelError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.as_str()),
                    _ => Err(self.invalid(key, "not a list of strings")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.invalid(key, "not a list of strings")),
        }
    }

    /// An integer >= 1 or a pair of them (`image_size: 1024` or `[1024, 1024]`), as (height, width).
    pub(super) fn pair_or(&self, key: &str, default: u64) -> Result<(u64, u64), ModelError> {
        let pos = |v: &Value| match count(v) {
            Ok(0) => Err(self.invalid(key, "0; it must be at least 1")),
            Ok(n) => Ok(n),
            Err(why) => Err(self.invalid(key, why)),
        };
        match self.raw(key) {
            None => Ok((default, default)),
            Some(Value::Array(items)) => match items.as_slice() {
                [h, w] => Ok((pos(h)?, pos(w)?)),
                _ => Err(self.invalid(key, "not an integer or a pair of integers")),
            },
            Some(v) => {
                let n = pos(v)?;
                Ok((n, n))
            }
        }
    }

    /// A nested object (`text_config`, ...), or `None` when absent/null.
    pub(super) fn sub(
        &self,
        key: &str,
        model_type: &str,
    ) -> Result<Option<Section<'a>>, ModelError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Object(obj)) => Ok(Some(Section::new(
                obj,
                &format!("{}{key}.", self.prefix),
                model_type,
            ))),
            Some(_) => Err(self.invalid(key, "not an object")),
        }
    }
}

/// A JSON value as a count: a non-negative integer no larger than [`MAX_DIM`]. Integral floats
/// (`4096.0`) are accepted, as Python writes them sometimes.
fn count(v: &Value) -> Result<u64, &'static str> {
    let Value::Number(n) = v else {
        return Err(match v {
            Value::String(_) => "a string, not an integer",
            _ => "not an integer",
        });
    };
    if let Some(u) = n.as_u64() {
        return if u > MAX_DIM {
            Err("larger than 2^24")
        } else {
            Ok(u)
        };
    }
    if n.as_i64().is_some() {
        return Err("negative");
    }
    match n.as_f64() {
        Some(f) if !f.is_finite() => Err("not finite"),
        Some(f) if f < 0.0 => Err("negative"),
        Some(f) if f.fract() != 0.0 => Err("not an integer"),
        Some(f) if f > MAX_DIM as f64 => Err("larger than 2^24"),
        // In range and integral: the cast is exact.
        Some(f) => Ok(f as u64),
        None => Err("not a number"),
    }
}
