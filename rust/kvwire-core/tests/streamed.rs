//! Bounded-memory runs (`simulate_streamed`) against the in-memory run of the same scenario: the rows the
//! sink receives are the in-memory table row for row, bit for bit, and the run totals are identical — for
//! chunk sizes 1, 7, 1000 and the whole table, and across the engine's modes.

use kvwire_core::metrics::table::RequestTable;
use kvwire_core::workload::source::{Chunk, RequestSource, TableSource};
use kvwire_core::{simulate, simulate_streamed, Error, RowSink, Scenario};

#[derive(Default)]
struct Collect {
    t: RequestTable,
    writes: usize,
    max_rows: usize,
}

impl RowSink for Collect {
    fn write(&mut self, rows: RequestTable) -> kvwire_core::Result<()> {
        self.writes += 1;
        self.max_rows = self.max_rows.max(rows.len());
        for i in 0..rows.len() {
            self.t.push_row_from(&rows, i);
        }
        Ok(())
    }
}

/// Float columns equal bit for bit (NaN = NaN).
fn same_f64(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn assert_tables_equal(a: &RequestTable, b: &RequestTable, what: &str) {
    assert_eq!(a.id, b.id, "{what}: id");
    assert!(same_f64(&a.arrival_s, &b.arrival_s), "{what}: arrival");
    assert_eq!(a.prompt_tokens, b.prompt_tokens, "{what}");
    assert_eq!(a.output_tokens, b.output_tokens, "{what}");
    assert_eq!(a.rejected, b.rejected, "{what}: rejected");
    assert_eq!(a.measured, b.measured, "{what}: measured");
    assert_eq!(a.over_context, b.over_context, "{what}: over_context");
    assert_eq!(a.local_decode, b.local_decode, "{what}: local_decode");
    assert_eq!(a.prefill_instance, b.prefill_instance, "{what}");
    assert_eq!(a.decode_instance, b.decode_instance, "{what}");
    for (x, y, c) in [
        (&a.prefill_start_s, &b.prefill_start_s, "prefill_start_s"),
        (&a.first_token_s, &b.first_token_s, "first_token_s"),
        (&a.first_token_seen_s, &b.first_token_seen_s, "first_token_seen_s"),
        (&a.kv_start_s, &b.kv_start_s, "kv_start_s"),
        (&a.kv_ready_s, &b.kv_ready_s, "kv_ready_s"),
        (&a.decode_start_s, &b.decode_start_s, "decode_start_s"),
        (&a.finish_s, &b.finish_s, "finish_s"),
    ] {
        assert!(same_f64(x, y), "{what}: {c}");
    }
}

/// Run `json` in memory and streamed (own source, chunk size `rows`, sink of 333-row tables); compare.
/// Returns the in-memory run's (rejected, over-context) counts.
fn check(json: &str, rows_per_chunk: usize) -> (u64, usize) {
    let mem = simulate(Scenario::from_json(json, None).unwrap()).unwrap();
    let sc = Scenario::from_json(json, None).unwrap();
    let mut src = kvwire_core::engine::own_source(&sc, rows_per_chunk).unwrap();
    let mut sink = Collect::default();
    let st = simulate_streamed(sc, src.as_mut(), Some(&mut sink), 333, None, None).unwrap();
    assert!(st.table.is_empty());
    assert!(st.stats.table_rows_peak < mem.table.len() as u64, "{json}: a streamed run holds fewer rows");
    assert_tables_equal(&sink.t, &mem.table, json);
    assert!(sink.max_rows <= 333);
    let (a, b) = (&st.stats, &mem.stats);
    assert_eq!(a.events, b.events, "{json}");
    assert_eq!(a.horizon_s.to_bits(), b.horizon_s.to_bits());
    assert_eq!(a.population_area.to_bits(), b.population_area.to_bits());
    assert_eq!((a.completed, a.rejected, a.measured), (b.completed, b.rejected, b.measured));
    assert_eq!(a.static_j.to_bits(), b.static_j.to_bits());
    assert_eq!(a.instances, b.instances);
    assert_eq!(a.links, b.links);
    assert_eq!(a.itl.quantiles(), b.itl.quantiles());
    assert_eq!(st.ceilings, mem.ceilings);
    let rows = st.rows.unwrap();
    assert_eq!(rows.total as usize, mem.table.len());
    // Small enough to keep (`keep_up_to`): the whole table comes back, as in memory; the sink is unused.
    let sc = Scenario::from_json(json, None).unwrap();
    let mut src = kvwire_core::engine::own_source(&sc, rows_per_chunk).unwrap();
    let mut unused = Collect::default();
    let kept = simulate_streamed(sc, src.as_mut(), Some(&mut unused), 10, Some(mem.table.len() as u64), None).unwrap();
    assert_tables_equal(&kept.table, &mem.table, json);
    assert_eq!(unused.writes, 0);
    assert_eq!(rows.measured, mem.table.measured.iter().filter(|&&m| m).count() as u64);
    (mem.stats.rejected, mem.table.over_context.iter().filter(|&&o| o).count())
}

const SCENARIOS: [&str; 6] = [
    r#"{"workload": {"requests": 3000, "arrivals": {"rate_per_s": 12}}}"#,
    r#"{"mode": "colocated", "colocated": {"instances": 2}, "workload": {"requests": 2000, "arrivals": {"rate_per_s": 10}}}"#,
    r#"{"prefill": {"instances": 2}, "decode": {"instances": 3}, "link": "eth-25g", "handoff": {"streaming": "layer"},
        "metrics": {"first_token": "decode"}, "workload": {"requests": 2000, "arrivals": {"rate_per_s": 20}}}"#,
    r#"{"workload": {"requests": 1500, "arrivals": {"rate_per_s": 9}, "output_tokens": {"dist": "uniform", "min": 0, "max": 6}}}"#,
    r#"{"engine": {"macro_steps": false}, "workload": {"requests": 1000, "arrivals": {"process": "gamma", "rate_per_s": 8, "cv": 3}}}"#,
    r#"{"router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 1024, "max_link_wait_s": 0.05}}, "workload": {"requests": 1500}}"#,
];

/// Streamed and in-memory runs are identical (rows and totals) for every chunk size.
#[test]
fn streamed_equals_in_memory_for_every_chunk_size() {
    for rows in [1, 7, 1000, 1 << 20] {
        check(SCENARIOS[0], rows);
    }
}

/// … and across modes: colocated, multi-instance disaggregated with layer streaming and the first token
/// seen after decode, outputs of 0–1 tokens, plain stepping with bursty arrivals, conditional
/// disaggregation.
#[test]
fn streamed_equals_in_memory_across_modes() {
    for json in &SCENARIOS[1..] {
        check(json, 97);
    }
}

/// Rejected requests (too long for the KV cache) and the over-context rules go through the stream with the
/// same flags.
#[test]
fn streamed_rejections_and_context_rules() {
    let mk = |over: &str| {
        let n = 400;
        let a: Vec<String> = (0..n).map(|i| format!("{}", i as f64 * 0.2)).collect();
        let p: Vec<String> =
            (0..n).map(|i| if i % 9 == 0 { "7000000".into() } else { format!("{}", 500 + 37 * i % 9000) }).collect();
        let o: Vec<String> = (0..n).map(|i| format!("{}", (i * 13) % 700)).collect();
        format!(
            r#"{{"workload": {{"over_context": "{over}", "trace": {{"arrival_s": [{}], "prompt_tokens": [{}], "output_tokens": [{}]}}}}}}"#,
            a.join(","),
            p.join(","),
            o.join(",")
        )
    };
    for over in ["warn", "reject", "clip"] {
        let (rejected, long) = check(&mk(over), 50);
        // Clipping brings the huge prompts under the KV capacity: nothing is rejected then.
        assert!((rejected > 0) == (over != "clip") && long > 0, "{over}: the table must exercise the rules");
    }
}

/// A source whose second read differs from its first is refused, not silently mixed.
#[test]
fn a_source_that_changes_between_reads_is_refused() {
    struct Shrinking {
        reads: u32,
        done: bool,
    }
    impl RequestSource for Shrinking {
        fn next_chunk(&mut self) -> kvwire_core::Result<Option<Chunk>> {
            if self.done {
                return Ok(None);
            }
            self.done = true;
            let n = if self.reads == 0 { 10 } else { 9 };
            Ok(Some(Chunk {
                arrival_s: (0..n).map(|i| i as f64).collect(),
                prompt_tokens: vec![100; n],
                output_tokens: vec![10; n],
            }))
        }
        fn rewind(&mut self) -> kvwire_core::Result<()> {
            self.reads += 1;
            self.done = false;
            Ok(())
        }
    }
    let sc = Scenario::from_json_streamed("{}").unwrap();
    let e = simulate_streamed(sc, &mut Shrinking { reads: 0, done: false }, None, 10, None, None).unwrap_err();
    assert!(matches!(e, Error::Trace { .. }), "{e}");
    assert!(e.to_string().contains("second read"), "{e}");
}

/// Memory stays bounded: a 20,000-request run below saturation holds only the requests in flight (a few
/// dozen rows at 8 req/s with ~2 s of E2E), not the table.
#[test]
fn a_streamed_run_holds_only_requests_in_flight() {
    let json = r#"{"workload": {"requests": 20000, "arrivals": {"rate_per_s": 8}}}"#;
    let sc = Scenario::from_json(json, None).unwrap();
    let mut src = kvwire_core::engine::own_source(&sc, 4096).unwrap();
    let out = simulate_streamed(sc, src.as_mut(), None, 1, None, None).unwrap();
    assert_eq!(out.stats.completed, 20000);
    assert!(out.stats.table_rows_peak < 200, "{} rows held", out.stats.table_rows_peak);
}

/// Bad chunks give the whole-table errors, rows numbered from the table's start, whatever the chunking.
#[test]
fn bad_chunks_name_the_global_row() {
    struct Bad;
    impl RequestSource for Bad {
        fn next_chunk(&mut self) -> kvwire_core::Result<Option<Chunk>> {
            Ok(None)
        }
        fn rewind(&mut self) -> kvwire_core::Result<()> {
            Ok(())
        }
    }
    let sc = || Scenario::from_json_streamed("{}").unwrap();
    let e = simulate_streamed(sc(), &mut Bad, None, 10, None, None).unwrap_err();
    assert_eq!(e.path(), "requests");
    assert!(e.to_string().contains("empty"), "{e}");
    struct Chunks(Vec<Chunk>, usize);
    impl RequestSource for Chunks {
        fn next_chunk(&mut self) -> kvwire_core::Result<Option<Chunk>> {
            self.1 += 1;
            Ok(self.0.get(self.1 - 1).cloned())
        }
        fn rewind(&mut self) -> kvwire_core::Result<()> {
            self.1 = 0;
            Ok(())
        }
    }
    let c = |a: &[f64], p: &[i64]| Chunk {
        arrival_s: a.to_vec(),
        prompt_tokens: p.to_vec(),
        output_tokens: vec![3; a.len()],
    };
    let e =
        simulate_streamed(sc(), &mut Chunks(vec![c(&[0.0, 2.0], &[5, 5]), c(&[1.0], &[5])], 0), None, 10, None, None)
            .unwrap_err();
    assert_eq!(e.path(), "requests.arrival_s[2]");
    assert!(e.to_string().contains("sorted"), "{e}");
    let e = simulate_streamed(
        sc(),
        &mut Chunks(vec![c(&[0.0], &[5]), c(&[], &[]), c(&[1.0, 2.0], &[5, 0])], 0),
        None,
        10,
        None,
        None,
    )
    .unwrap_err();
    assert_eq!(e.path(), "requests.prompt_tokens[2]");
    // A table source keeps its name.
    let t = kvwire_core::workload::Trace::from_columns("requests", &[0.0], &[5], &[1]).unwrap();
    let s = TableSource::new(t, 1).named("workload.trace");
    assert_eq!(s.path(), "workload.trace");
}
