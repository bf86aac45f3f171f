//! Requests fed to the engine in chunks (bounded-memory runs): a [`RequestSource`] yields the request
//! table in arrival order, a chunk at a time, and can start again from the first request (the engine reads
//! it twice: once to count and describe the requests, once to run them — see `engine::stream`).
//!
//! The core implements it for a request table already in memory ([`TableSource`]) and for the seeded
//! generator ([`GeneratedSource`]); the Python bindings implement it over a Python iterator of numpy chunks
//! (a lazily scanned trace file). Every chunk is checked by [`ChunkChecker`] with the same rules and messages
//! as a whole table ([`super::Trace::from_columns`]), rows numbered from the start of the table.

use super::{Arrivals, LengthDist, Trace};
use crate::error::{Error, Result};
use crate::workload::cpython_random::CpythonRandom;

/// Some consecutive requests: three columns of equal length (checked by [`ChunkChecker`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    pub arrival_s: Vec<f64>,
    pub prompt_tokens: Vec<i64>,
    pub output_tokens: Vec<i64>,
}

/// A request table read in chunks, in arrival order.
pub trait RequestSource: Send {
    /// The next chunk, or `None` after the last request. Empty chunks are allowed (skipped).
    fn next_chunk(&mut self) -> Result<Option<Chunk>>;
    /// Start again from the first request; the same requests must follow.
    fn rewind(&mut self) -> Result<()>;
    /// The name errors give the table (`requests`, `workload.trace`).
    fn path(&self) -> &str {
        "requests"
    }
}

/// Checks chunk after chunk as one table: arrival times finite, in [0, `MAX_ARRIVAL_S`] and non-decreasing
/// across chunk boundaries, prompts ≥ 1, outputs ≥ 0, all ≤ `u32::MAX`; errors name the column and the row
/// counted from the start of the table.
#[derive(Clone, Debug)]
pub struct ChunkChecker {
    path: String,
    /// Rows checked so far (the index of the next chunk's first row).
    pub rows: u64,
    prev: f64,
}

impl ChunkChecker {
    pub fn new(path: &str) -> Self {
        ChunkChecker { path: path.to_string(), rows: 0, prev: 0.0 }
    }

    /// Check one chunk and convert its token counts.
    pub fn check(&mut self, c: &Chunk) -> Result<(Vec<u32>, Vec<u32>)> {
        let (prompt, output) = super::trace::check_columns(
            &self.path,
            self.rows,
            self.prev,
            &c.arrival_s,
            &c.prompt_tokens,
            &c.output_tokens,
        )?;
        if let Some(&last) = c.arrival_s.last() {
            self.prev = last;
        }
        self.rows += c.arrival_s.len() as u64;
        Ok((prompt, output))
    }

    /// The error for a source that held no request at all.
    pub fn empty(&self) -> Error {
        Error::trace(self.path.clone(), "the request table is empty: give at least one request")
    }
}

/// A request table held in memory, yielded in chunks of `chunk_rows`.
pub struct TableSource {
    trace: Trace,
    chunk_rows: usize,
    next: usize,
    path: &'static str,
}

impl TableSource {
    pub fn new(trace: Trace, chunk_rows: usize) -> Self {
        TableSource { trace, chunk_rows: chunk_rows.max(1), next: 0, path: "requests" }
    }

    /// The same source, naming the table `path` in errors.
    pub fn named(self, path: &'static str) -> Self {
        TableSource { path, ..self }
    }
}

impl RequestSource for TableSource {
    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        let n = self.trace.len();
        if self.next >= n {
            return Ok(None);
        }
        let end = (self.next + self.chunk_rows).min(n);
        let r = self.next..end;
        self.next = end;
        Ok(Some(Chunk {
            arrival_s: self.trace.arrival_s()[r.clone()].to_vec(),
            prompt_tokens: self.trace.prompt_tokens()[r.clone()].iter().map(|&x| x as i64).collect(),
            output_tokens: self.trace.output_tokens()[r].iter().map(|&x| x as i64).collect(),
        }))
    }

    fn rewind(&mut self) -> Result<()> {
        self.next = 0;
        Ok(())
    }

    fn path(&self) -> &str {
        self.path
    }
}

/// The seeded generator (`workload.requests` …), drawn `chunk_rows` requests at a time: the same requests
/// as [`super::generate`], without holding them all.
pub struct GeneratedSource {
    n: usize,
    seed: u64,
    arrivals: Arrivals,
    prompt: LengthDist,
    output: LengthDist,
    chunk_rows: usize,
    rng: CpythonRandom,
    t: f64,
    done: usize,
}

impl GeneratedSource {
    pub fn new(
        n: usize,
        seed: u64,
        arrivals: Arrivals,
        prompt: LengthDist,
        output: LengthDist,
        chunk_rows: usize,
    ) -> Self {
        GeneratedSource {
            n,
            seed,
            arrivals,
            prompt,
            output,
            chunk_rows: chunk_rows.max(1),
            rng: CpythonRandom::new(seed),
            t: 0.0,
            done: 0,
        }
    }
}

impl RequestSource for GeneratedSource {
    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        let k = self.chunk_rows.min(self.n - self.done);
        if k == 0 {
            return Ok(None);
        }
        let mut c = Chunk {
            arrival_s: Vec::with_capacity(k),
            prompt_tokens: Vec::with_capacity(k),
            output_tokens: Vec::with_capacity(k),
        };
        for i in 0..k {
            let (t, p, o) = super::draw_one(&mut self.rng, &mut self.t, self.arrivals, self.prompt, self.output);
            if !t.is_finite() {
                return Err(Error::field(
                    "workload.arrivals",
                    format!("the arrival process produced a non-finite time at request {}", self.done + i),
                ));
            }
            c.arrival_s.push(t);
            c.prompt_tokens.push(p as i64);
            c.output_tokens.push(o as i64);
        }
        self.done += k;
        Ok(Some(c))
    }

    fn rewind(&mut self) -> Result<()> {
        self.rng = CpythonRandom::new(self.seed);
        self.t = 0.0;
        self.done = 0;
        Ok(())
    }

    fn path(&self) -> &str {
        "workload"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: LengthDist = LengthDist::Lognormal { mean: 2048.0, cv: 0.5, min: 1, max: 32768 };
    const O: LengthDist = LengthDist::Lognormal { mean: 256.0, cv: 0.5, min: 1, max: 32768 };

    fn drain(s: &mut dyn RequestSource) -> Chunk {
        let mut all = Chunk::default();
        while let Some(c) = s.next_chunk().unwrap() {
            all.arrival_s.extend(c.arrival_s);
            all.prompt_tokens.extend(c.prompt_tokens);
            all.output_tokens.extend(c.output_tokens);
        }
        all
    }

    /// The chunked generator draws exactly the requests of the whole-table generator, for any chunk size,
    /// and the same again after a rewind.
    #[test]
    fn generated_chunks_equal_the_whole_table() {
        let whole = super::super::generate(1000, 3, Arrivals::Poisson { rate_per_s: 8.0 }, P, O).unwrap();
        for rows in [1, 7, 1000, 5000] {
            let mut s = GeneratedSource::new(1000, 3, Arrivals::Poisson { rate_per_s: 8.0 }, P, O, rows);
            for _ in 0..2 {
                let c = drain(&mut s);
                assert_eq!(c.arrival_s, whole.arrival_s());
                assert_eq!(c.prompt_tokens, whole.prompt_tokens().iter().map(|&x| x as i64).collect::<Vec<_>>());
                assert_eq!(c.output_tokens, whole.output_tokens().iter().map(|&x| x as i64).collect::<Vec<_>>());
                s.rewind().unwrap();
            }
        }
    }

    /// Chunk checks number rows from the start of the table and see order across chunk boundaries.
    #[test]
    fn checker_names_global_rows_across_chunks() {
        let mut k = ChunkChecker::new("requests");
        let c = |a: &[f64], p: &[i64], o: &[i64]| Chunk {
            arrival_s: a.to_vec(),
            prompt_tokens: p.to_vec(),
            output_tokens: o.to_vec(),
        };
        k.check(&c(&[0.0, 1.0], &[1, 1], &[0, 0])).unwrap();
        let e = k.check(&c(&[0.5], &[1], &[0])).unwrap_err();
        assert_eq!(e.path(), "requests.arrival_s[2]");
        assert!(e.to_string().contains("row 2 (0.5) comes before row 1 (1)"), "{e}");
        let mut k = ChunkChecker::new("requests");
        k.check(&c(&[0.0, 1.0, 2.0], &[1, 1, 1], &[0, 0, 0])).unwrap();
        assert_eq!(k.check(&c(&[3.0, 4.0], &[1, 0], &[0, 0])).unwrap_err().path(), "requests.prompt_tokens[4]");
        assert_eq!(k.check(&c(&[3.0], &[1], &[-1])).unwrap_err().path(), "requests.output_tokens[3]");
        assert_eq!(k.check(&c(&[3.0], &[1, 2], &[1])).unwrap_err().path(), "requests.prompt_tokens");
    }
}
