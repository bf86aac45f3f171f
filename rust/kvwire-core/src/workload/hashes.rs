//! Per-request prompt block hashes (Mooncake's `hash_ids`), held as a CSR pair beside the request table:
//! request `r`'s hashes are `ids[offsets[r]..offsets[r + 1]]`, block `i` covering prompt tokens
//! `[HASH_BLOCK_TOKENS·i, HASH_BLOCK_TOKENS·(i + 1))`, the last block possibly partial. Equal ids at the
//! same position are reusable prefix KV. A request with no ids has no blocks (nothing of it can be cached).

use crate::error::{Error, Result};

/// Prompt tokens per hash block (Mooncake's layout).
pub const HASH_BLOCK_TOKENS: u32 = 512;

/// Block hashes of every request of a table (validated; see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockHashes {
    offsets: Vec<u64>,
    ids: Vec<u64>,
}

impl BlockHashes {
    /// Validate the CSR pair for a table of `rows` requests. `path` names the table in errors
    /// (`requests`): `offsets` must have `rows + 1` entries, start at 0, never decrease and end at the
    /// number of ids; ids must be ≥ 0. Errors name the column and the row (the request).
    pub fn from_columns(path: &str, rows: usize, offsets: &[i64], ids: &[i64]) -> Result<Self> {
        let col = |name: &str| format!("{path}.{name}");
        if offsets.len() != rows + 1 {
            return Err(Error::trace(
                col("hash_offsets"),
                format!("has {} entries but the table has {rows} rows: it must have rows + 1", offsets.len()),
            ));
        }
        if offsets[0] != 0 {
            return Err(Error::trace(col("hash_offsets[0]"), format!("must be 0, got {}", offsets[0])));
        }
        for (r, w) in offsets.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(Error::trace(
                    col(&format!("hash_offsets[{}]", r + 1)),
                    format!(
                        "offsets must not decrease: {} after {} (row {r} would have a negative length)",
                        w[1], w[0]
                    ),
                ));
            }
        }
        let last = offsets[rows];
        if last as u64 != ids.len() as u64 {
            return Err(Error::trace(
                col(&format!("hash_offsets[{rows}]")),
                format!("the last offset must equal the number of hash ids ({}), got {last}", ids.len()),
            ));
        }
        if let Some(k) = ids.iter().position(|&h| h < 0) {
            // The request the bad id belongs to: the last row whose first id is at or before k.
            let r = offsets.partition_point(|&o| o <= k as i64).saturating_sub(1);
            return Err(Error::trace(
                col(&format!("hash_ids[{r}]")),
                format!(
                    "block hash ids must be integers ≥ 0, got {} (block {} of row {r})",
                    ids[k],
                    k as i64 - offsets[r]
                ),
            ));
        }
        Ok(BlockHashes {
            offsets: offsets.iter().map(|&o| o as u64).collect(),
            ids: ids.iter().map(|&h| h as u64).collect(),
        })
    }

    /// Wrap a CSR pair valid by construction (the sessions generator's, `workload/sessions.rs`).
    pub(crate) fn from_parts_unchecked(offsets: Vec<u64>, ids: Vec<u64>) -> Self {
        BlockHashes { offsets, ids }
    }

    /// Requests described (0 for the empty value: no request has blocks).
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Request `r`'s block hashes (empty past the table or without hashes).
    #[inline]
    pub fn of(&self, r: usize) -> &[u64] {
        match (self.offsets.get(r), self.offsets.get(r + 1)) {
            (Some(&a), Some(&b)) => &self.ids[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Request `r`'s blocks within a prompt of `prompt` tokens (hashes past ⌈prompt / block⌉ are ignored:
    /// a prompt clipped to the model's context keeps its leading blocks only).
    #[inline]
    pub fn blocks(&self, r: usize, prompt: u32) -> &[u64] {
        let h = self.of(r);
        &h[..h.len().min(prompt.div_ceil(HASH_BLOCK_TOKENS) as usize)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CSR pair gives each request its own slice, and blocks past the prompt are ignored.
    #[test]
    fn rows_get_their_slices() {
        let h = BlockHashes::from_columns("requests", 3, &[0, 2, 2, 5], &[7, 8, 7, 9, 10]).unwrap();
        assert_eq!(h.rows(), 3);
        assert_eq!(h.of(0), &[7, 8]);
        assert!(h.of(1).is_empty());
        assert_eq!(h.of(2), &[7, 9, 10]);
        assert!(h.of(3).is_empty());
        assert_eq!(h.blocks(2, 513), &[7, 9]);
        assert_eq!(h.blocks(2, 512), &[7]);
        assert_eq!(h.blocks(2, 5000), &[7, 9, 10]);
    }

    /// Bad columns are refused with the column and row named.
    #[test]
    fn bad_columns_name_column_and_row() {
        let e = |rows, o: &[i64], i: &[i64]| BlockHashes::from_columns("requests", rows, o, i).unwrap_err();
        assert_eq!(e(2, &[0, 1], &[5]).path(), "requests.hash_offsets");
        assert_eq!(e(1, &[1, 1], &[5]).path(), "requests.hash_offsets[0]");
        assert_eq!(e(2, &[0, 2, 1], &[5, 6]).path(), "requests.hash_offsets[2]");
        assert_eq!(e(2, &[0, 1, 3], &[5, 6]).path(), "requests.hash_offsets[2]");
        assert_eq!(e(3, &[0, 1, 1, 3], &[5, 6, -2]).path(), "requests.hash_ids[2]");
        assert_eq!(e(2, &[0, 1, 3], &[-5, 6, 2]).path(), "requests.hash_ids[0]");
    }

    /// Id 0 is a valid block hash (the bound is "≥ 0", not "> 0"), and equal consecutive offsets (a
    /// request without blocks) are accepted: both are legal CSR input a trace may carry.
    #[test]
    fn zero_ids_and_empty_rows_are_valid() {
        let h = BlockHashes::from_columns("requests", 2, &[0, 0, 2], &[0, 3]).unwrap();
        assert!(h.of(0).is_empty());
        assert_eq!(h.of(1), &[0, 3]);
    }

    /// The unchecked constructor keeps the pair it is given: row r is `ids[offsets[r]..offsets[r + 1]]`.
    #[test]
    fn unchecked_parts_are_kept() {
        let h = BlockHashes::from_parts_unchecked(vec![0, 2, 3], vec![4, 5, 6]);
        assert_eq!(h.rows(), 2);
        assert_eq!(h.of(0), &[4, 5]);
        assert_eq!(h.of(1), &[6]);
    }
}
