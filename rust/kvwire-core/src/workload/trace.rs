//! An explicit request table (three columns), validated once at the boundary.

use crate::error::{Error, Result};

/// Latest arrival time a request table may hold, s (about 31,700 years): later ones would make the simulated
/// times and energies overflow.
pub const MAX_ARRIVAL_S: f64 = 1e12;

/// Requests sorted by arrival: `arrival_s` (s, finite, ≥ 0, non-decreasing), `prompt_tokens` (≥ 1),
/// `output_tokens` (≥ 0; 0 and 1 finish at the end of prefill).
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    arrival_s: Vec<f64>,
    prompt_tokens: Vec<u32>,
    output_tokens: Vec<u32>,
    /// Per-request prompt block hashes (Mooncake's `hash_ids`); empty: no request has blocks.
    hashes: super::BlockHashes,
}

impl Trace {
    /// Validate three columns. `path` names the table in errors (e.g. `requests` or `workload.trace`);
    /// every error names the column and the first offending row.
    pub fn from_columns(path: &str, arrival_s: &[f64], prompt_tokens: &[i64], output_tokens: &[i64]) -> Result<Self> {
        if arrival_s.is_empty() {
            return Err(Error::trace(path, "the request table is empty: give at least one request"));
        }
        let (prompt, output) = check_columns(path, 0, 0.0, arrival_s, prompt_tokens, output_tokens)?;
        Ok(Trace {
            arrival_s: arrival_s.to_vec(),
            prompt_tokens: prompt,
            output_tokens: output,
            hashes: Default::default(),
        })
    }

    /// A one-request stand-in, for validating a scenario whose requests will come from a stream.
    pub(crate) fn placeholder() -> Self {
        Trace { arrival_s: vec![0.0], prompt_tokens: vec![1], output_tokens: vec![0], hashes: Default::default() }
    }

    /// Wrap columns that are valid by construction (the generators).
    pub(crate) fn from_parts_unchecked(arrival_s: Vec<f64>, prompt_tokens: Vec<u32>, output_tokens: Vec<u32>) -> Self {
        Trace { arrival_s, prompt_tokens, output_tokens, hashes: Default::default() }
    }

    pub fn len(&self) -> usize {
        self.arrival_s.len()
    }
    pub fn is_empty(&self) -> bool {
        self.arrival_s.is_empty()
    }
    pub fn arrival_s(&self) -> &[f64] {
        &self.arrival_s
    }
    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt_tokens
    }
    pub fn output_tokens(&self) -> &[u32] {
        &self.output_tokens
    }
    /// Whether each request's prompt + output exceeds `max_context` tokens.
    pub fn over_context(&self, max_context: u32) -> Result<Vec<bool>> {
        let mut out = crate::metrics::table::try_filled(self.len(), false)?;
        for ((x, &p), &o) in out.iter_mut().zip(&self.prompt_tokens).zip(&self.output_tokens) {
            *x = over_context(max_context, p, o);
        }
        Ok(out)
    }

    /// Fit every request into `max_context` (≥ 2) tokens: the prompt cut to at most `max_context − 1`, then
    /// the output to at most `max_context − prompt`. Requests that fit are unchanged.
    pub fn clip_to_context(&mut self, max_context: u32) {
        for (p, o) in self.prompt_tokens.iter_mut().zip(self.output_tokens.iter_mut()) {
            (*p, *o) = clip_to_context(max_context, *p, *o);
        }
    }

    /// Attach per-request block hashes (`offsets`, `ids`: the CSR pair of [`super::BlockHashes`]), validated
    /// against this table's rows; errors name `{path}.hash_offsets` / `{path}.hash_ids` and the row.
    pub fn with_hashes(mut self, path: &str, offsets: &[i64], ids: &[i64]) -> Result<Self> {
        self.hashes = super::BlockHashes::from_columns(path, self.len(), offsets, ids)?;
        Ok(self)
    }

    /// The per-request block hashes (empty when the table has none).
    pub fn hashes(&self) -> &super::BlockHashes {
        &self.hashes
    }

    /// Take the block hashes out (moved beside the result table).
    pub(crate) fn take_hashes(&mut self) -> super::BlockHashes {
        std::mem::take(&mut self.hashes)
    }

    /// Take the columns back (moved into the result table).
    pub fn into_parts(self) -> (Vec<f64>, Vec<u32>, Vec<u32>) {
        (self.arrival_s, self.prompt_tokens, self.output_tokens)
    }
}

/// One request fitted into `max_context` (≥ 2) tokens ([`Trace::clip_to_context`]).
#[inline]
pub(crate) fn clip_to_context(max_context: u32, prompt: u32, output: u32) -> (u32, u32) {
    let p = prompt.min(max_context - 1);
    (p, output.min(max_context - p))
}

/// Whether prompt + output exceeds `max_context` tokens ([`Trace::over_context`]).
#[inline]
pub(crate) fn over_context(max_context: u32, prompt: u32, output: u32) -> bool {
    prompt as u64 + output as u64 > max_context as u64
}

/// Check rows `offset..` of a table (columns of one chunk; `prev` is the arrival before it, 0 for the
/// first chunk) and convert the token counts. Errors name the column and the row from the table's start.
pub(crate) fn check_columns(
    path: &str,
    offset: u64,
    prev: f64,
    arrival_s: &[f64],
    prompt_tokens: &[i64],
    output_tokens: &[i64],
) -> Result<(Vec<u32>, Vec<u32>)> {
    let n = arrival_s.len();
    for (name, len) in [("prompt_tokens", prompt_tokens.len()), ("output_tokens", output_tokens.len())] {
        if len != n {
            return Err(Error::trace(
                format!("{path}.{name}"),
                format!("has {len} rows but arrival_s has {n}: the columns must have equal length"),
            ));
        }
    }
    let mut prev = prev;
    for (j, &a) in arrival_s.iter().enumerate() {
        let i = offset + j as u64;
        if !(0.0..=MAX_ARRIVAL_S).contains(&a) {
            return Err(Error::trace(
                format!("{path}.arrival_s[{i}]"),
                format!("arrival time must be a finite number of seconds ≥ 0 and ≤ {MAX_ARRIVAL_S:e}, got {a}"),
            ));
        }
        if a < prev {
            return Err(Error::trace(
                format!("{path}.arrival_s[{i}]"),
                format!("the table must be sorted by arrival_s: row {i} ({a}) comes before row {} ({prev})", i - 1),
            ));
        }
        prev = a;
    }
    let prompt = to_u32(path, "prompt_tokens", prompt_tokens, 1, offset)?;
    let output = to_u32(path, "output_tokens", output_tokens, 0, offset)?;
    Ok((prompt, output))
}

fn to_u32(path: &str, name: &str, col: &[i64], min: i64, offset: u64) -> Result<Vec<u32>> {
    col.iter()
        .enumerate()
        .map(|(j, &v)| {
            let i = offset + j as u64;
            if v < min || v > u32::MAX as i64 {
                Err(Error::trace(
                    format!("{path}.{name}[{i}]"),
                    format!("must be an integer in [{min}, {}], got {v}", u32::MAX),
                ))
            } else {
                Ok(v as u32)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_valid_table() {
        let t = Trace::from_columns("requests", &[0.0, 0.0, 1.5], &[1, 2, 3], &[0, 1, 9]).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.output_tokens(), &[0, 1, 9]);
    }

    #[test]
    fn names_column_and_row_of_bad_values() {
        let e = |a: &[f64], p: &[i64], o: &[i64]| Trace::from_columns("requests", a, p, o).unwrap_err();
        assert_eq!(e(&[], &[], &[]).path(), "requests");
        assert_eq!(e(&[0.0, f64::NAN], &[1, 1], &[1, 1]).path(), "requests.arrival_s[1]");
        assert_eq!(e(&[0.0, -1.0], &[1, 1], &[1, 1]).path(), "requests.arrival_s[1]");
        assert_eq!(e(&[0.0, f64::INFINITY], &[1, 1], &[1, 1]).path(), "requests.arrival_s[1]");
        assert_eq!(e(&[2.0, 1.0], &[1, 1], &[1, 1]).path(), "requests.arrival_s[1]");
        assert_eq!(e(&[0.0, 1.0], &[1, 0], &[1, 1]).path(), "requests.prompt_tokens[1]");
        assert_eq!(e(&[0.0, 1.0], &[1, 1], &[-3, 1]).path(), "requests.output_tokens[0]");
        assert_eq!(e(&[0.0, 1.0], &[1], &[1, 1]).path(), "requests.prompt_tokens");
        assert_eq!(e(&[0.0], &[1 << 40], &[1]).path(), "requests.prompt_tokens[0]");
        let msg = e(&[2.0, 1.0], &[1, 1], &[1, 1]).to_string();
        assert!(msg.contains("sorted"), "{msg}");
    }
}
