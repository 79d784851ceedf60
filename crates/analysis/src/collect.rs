//! Collecting the ok spans of a window into the report's distributions: every row
//! of [`METRICS`], the inter-token latency, output lengths, stream TPS by output
//! length, and for each metric the reasons spans lack it.

use std::collections::BTreeMap;

use crate::distributions::{Conventional, Distributions, LengthBucket};
use crate::input::SpanFacts;
use crate::metrics::{METRICS, missing, unstreamed_or};
use crate::stats::{Summary, Tokens, TokensPerSecond};

/// Output-length bucket edges for stream TPS by length (inclusive upper bounds).
pub const LENGTH_EDGES: [u64; 5] = [16, 64, 256, 1024, 4096];

/// `Collected::add` calls rows 0 to 15 of [`METRICS`]: more rows need more there.
const _: () = assert!(METRICS.len() <= 16, "extend `rows!` in `Collected::add`");

/// The name under which spans without inter-token gaps are counted.
const INTER_TOKEN_LATENCY: &str = "inter_token_latency";

/// The values collected so far, one vector per row of [`METRICS`].
pub(crate) struct Collected {
    values: [Vec<f64>; METRICS.len()],
    /// The row of stream TPS, which is also collected by output length.
    stream_tps: usize,
    itl: Vec<f64>,
    output_len: Vec<f64>,
    by_length: Vec<Vec<f64>>,
    /// (metric, reason, spans): a few entries, found by address before text
    /// (a map keyed by text compared strings for every span that lacked one).
    missing: Vec<(&'static str, &'static str, u64)>,
}

/// What the collected values become in the report.
pub(crate) struct Summaries {
    pub distributions: Distributions,
    pub conventional: Conventional,
    pub missing: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    pub output_length: Summary<Tokens>,
    pub by_length: Vec<LengthBucket>,
}

impl Collected {
    pub fn new(n: usize) -> Collected {
        Collected {
            values: std::array::from_fn(|_| Vec::with_capacity(n)),
            stream_tps: METRICS
                .iter()
                .position(|m| m.name == "stream_tps")
                .unwrap_or_default(),
            itl: Vec::new(),
            output_len: Vec::with_capacity(n),
            by_length: vec![Vec::new(); LENGTH_EDGES.len() + 1],
            missing: Vec::new(),
        }
    }

    fn lack(&mut self, metric: &'static str, reason: &'static str) {
        let same = |(m, r, _): &&mut (&str, &str, u64)| {
            std::ptr::eq(*m, metric) && std::ptr::eq(*r, reason)
        };
        if let Some((_, _, n)) = self.missing.iter_mut().find(same) {
            *n += 1;
        } else if let Some((_, _, n)) = self
            .missing
            .iter_mut()
            .find(|(m, r, _)| *m == metric && *r == reason)
        {
            *n += 1;
        } else {
            self.missing.push((metric, reason, 1));
        }
    }

    /// Collects metric `I` of `s` (nothing when the table has no row `I`).
    #[inline(always)]
    fn row<const I: usize>(&mut self, s: &SpanFacts, stream_tps: &mut Option<f64>) {
        let Some(m) = METRICS.get(I) else { return };
        match (m.value)(s) {
            Some(v) => {
                self.values[I].push(v);
                if I == self.stream_tps {
                    *stream_tps = Some(v);
                }
            }
            None => self.lack(m.name, (m.missing)(s)),
        }
    }

    /// Collects the metrics of one ok span, or the reason each is absent.
    pub fn add(&mut self, s: &SpanFacts) {
        let n = s.output_tokens;
        self.output_len.push(n as f64);
        let mut stream_tps = None;
        // Row by row, each row's index a constant, so that its functions are
        // called directly and inlined: through the table's pointers, ten calls
        // a span that each tested the same instants again cost more than the
        // rest of the collecting.
        macro_rules! rows {
            ($($i:literal)*) => { $(self.row::<$i>(s, &mut stream_tps);)* };
        }
        rows!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
        if let Some(tps) = stream_tps {
            let bucket = LENGTH_EDGES
                .iter()
                .position(|e| n <= *e)
                .unwrap_or(LENGTH_EDGES.len());
            self.by_length[bucket].push(tps);
        }
        // Inter-token latency is not one value per span but one per token gap; a
        // chunk of k tokens counts as k gaps of (gap / k).
        match s.chunks.as_deref() {
            _ if s.first_token_at.is_none() => self.lack(
                INTER_TOKEN_LATENCY,
                unstreamed_or(s, missing::NO_FIRST_TOKEN),
            ),
            Some(chunks) if chunks.len() > 1 => {
                for w in chunks.windows(2) {
                    let gap = w[1].offset.saturating_sub(w[0].offset).as_secs_f64();
                    let k = w[1].tokens.max(1);
                    let per = gap / f64::from(k);
                    self.itl.extend(std::iter::repeat_n(per, k as usize));
                }
            }
            Some(_) => self.lack(INTER_TOKEN_LATENCY, missing::SINGLE_TOKEN),
            None => self.lack(INTER_TOKEN_LATENCY, missing::NO_CHUNKS_RECORDED),
        }
    }

    /// The distributions of everything collected.
    pub fn summarise(mut self) -> Summaries {
        let mut distributions = Distributions::default();
        let mut conventional = Conventional::default();
        for (m, v) in METRICS.iter().zip(self.values.iter_mut()) {
            (m.store)(&mut distributions, &mut conventional, v);
        }
        conventional.inter_token_latency = Summary::of(&mut self.itl);
        let mut lower = 1u64;
        let by_length = self
            .by_length
            .iter_mut()
            .enumerate()
            .map(|(i, v)| {
                let max = LENGTH_EDGES.get(i).copied();
                let b = LengthBucket {
                    min_tokens: lower,
                    max_tokens: max,
                    stream_tps: Summary::<TokensPerSecond>::of(v),
                };
                lower = max.map_or(lower, |m| m + 1);
                b
            })
            .collect();
        let mut missing: BTreeMap<&'static str, BTreeMap<&'static str, u64>> = BTreeMap::new();
        for (metric, reason, n) in self.missing {
            *missing
                .entry(metric)
                .or_default()
                .entry(reason)
                .or_default() += n;
        }
        Summaries {
            distributions,
            conventional,
            missing,
            output_length: Summary::of(&mut self.output_len),
            by_length,
        }
    }
}
