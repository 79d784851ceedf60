//! The cost stage of [`crate::analyze()`]: the prices given, and what the window's
//! output cost at them — per million output tokens and per completion at a price
//! per hour, and at per-token prices.

use serde::Serialize;

use crate::counts::Counts;
use crate::stats::{TokensPerSecond, ratio};

/// Prices for the cost section (any currency; the report uses the same one).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Prices {
    /// Price of the deployment per hour.
    pub per_hour: Option<f64>,
    /// Price per million input tokens.
    pub per_mtok_in: Option<f64>,
    /// Price per million output tokens.
    pub per_mtok_out: Option<f64>,
    /// Price of a kWh of the GPUs' energy (with GPU telemetry).
    pub per_kwh: Option<f64>,
}

impl Prices {
    /// Whether any price is set.
    pub fn any(&self) -> bool {
        self.per_hour.is_some() || self.per_mtok_in.is_some() || self.per_mtok_out.is_some()
    }
}

/// Cost of the window's output (docs/design.md §6), in the currency of the prices given.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// The deployment's price per hour, as given.
    pub price_per_hour: Option<f64>,
    /// price_per_hour / (system_tps × 3600) × 10⁶.
    pub per_million_output_tokens: Option<f64>,
    /// price_per_hour / ok completions per hour.
    pub per_completion: Option<f64>,
    /// Per-token prices (per million input / output tokens), as given.
    pub price_per_mtok_in: Option<f64>,
    /// As given.
    pub price_per_mtok_out: Option<f64>,
    /// Σ over ok spans of input and output tokens at the per-token prices.
    pub token_cost_total: Option<f64>,
    /// token_cost_total / ok spans.
    pub token_cost_per_completion: Option<f64>,
}

/// The cost stage: `None` without prices; warns when the input part of a token
/// cost leaves out ok spans that do not know their input tokens.
pub(crate) fn cost(
    prices: &Prices,
    window_s: f64,
    system_tps: Option<TokensPerSecond>,
    counts: &Counts,
    warnings: &mut Vec<String>,
) -> Option<Cost> {
    if !prices.any() {
        return None;
    }
    let per_hour = prices.per_hour;
    let hours = window_s / 3600.0;
    let token_cost = (prices.per_mtok_in.is_some() || prices.per_mtok_out.is_some()).then(|| {
        (counts.input_tokens as f64 * prices.per_mtok_in.unwrap_or(0.0)
            + counts.output_tokens as f64 * prices.per_mtok_out.unwrap_or(0.0))
            / 1e6
    });
    if prices.per_mtok_in.is_some() && counts.ok_without_input_tokens > 0 {
        warnings.push(format!(
            "{} ok spans do not know their input tokens: the input part of the token cost leaves them out",
            counts.ok_without_input_tokens
        ));
    }
    Some(Cost {
        price_per_hour: per_hour,
        per_million_output_tokens: per_hour
            .zip(system_tps)
            .and_then(|(p, tps)| ratio(p, tps.0 * 3600.0))
            .map(|v| v * 1e6),
        per_completion: per_hour.and_then(|p| ratio(p, ratio(counts.status.ok as f64, hours)?)),
        price_per_mtok_in: prices.per_mtok_in,
        price_per_mtok_out: prices.per_mtok_out,
        token_cost_total: token_cost,
        token_cost_per_completion: token_cost.and_then(|t| ratio(t, counts.status.ok as f64)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ok: u64, input: u64, output: u64, without_input: u64) -> Counts {
        Counts {
            status: tpscope_model::StatusCounts {
                ok,
                ..Default::default()
            },
            input_tokens: input,
            output_tokens: output,
            ok_without_input_tokens: without_input,
            ..Counts::default()
        }
    }

    #[test]
    fn no_prices_no_cost() {
        let c = cost(
            &Prices::default(),
            60.0,
            None,
            &counts(1, 1, 1, 0),
            &mut Vec::new(),
        );
        assert_eq!(c, None);
    }

    #[test]
    fn an_hourly_price_costs_tokens_and_completions_over_the_window() {
        let prices = Prices {
            per_hour: Some(3.6),
            ..Prices::default()
        };
        // 1000 tokens/s for an hour: 3.6 M tokens for 3.6, so 1 per million;
        // 100 completions in 1800 s is 200 per hour at 3.6: 0.018 each.
        let c = cost(
            &prices,
            1800.0,
            Some(TokensPerSecond(1000.0)),
            &counts(100, 0, 0, 0),
            &mut Vec::new(),
        )
        .unwrap();
        assert!((c.per_million_output_tokens.unwrap() - 1.0).abs() < 1e-9);
        assert!((c.per_completion.unwrap() - 0.018).abs() < 1e-12);
        assert_eq!(c.token_cost_total, None);
    }

    #[test]
    fn token_prices_cost_what_is_known_and_say_what_is_left_out() {
        let prices = Prices {
            per_mtok_in: Some(1.0),
            per_mtok_out: Some(2.0),
            ..Prices::default()
        };
        let mut warnings = Vec::new();
        let c = cost(
            &prices,
            60.0,
            None,
            &counts(4, 1_000_000, 500_000, 1),
            &mut warnings,
        )
        .unwrap();
        assert_eq!(c.token_cost_total, Some(2.0));
        assert_eq!(c.token_cost_per_completion, Some(0.5));
        assert_eq!(
            (c.price_per_hour, c.per_million_output_tokens),
            (None, None)
        );
        assert!(
            warnings[0].starts_with("1 ok spans do not know their input tokens"),
            "{warnings:?}"
        );
    }
}
