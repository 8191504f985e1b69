/**
 * The defaults a user gets where a bench judges the alternatives, in one place (issue 46: "the defaults are what the
 * benches judge best"). Each is the winner of the bench named beside it; the config sections, the CLIs, the
 * Kubernetes base and the README read or repeat these values, and test/defaults.test.ts holds every copy to them.
 * A bench that judges one of them checks its own winner against the value here, so a bench that stops crowning the
 * default fails its verdict instead of leaving a loser as the default.
 */

/** `controller.strategy`: the cheapest strategy at the SLO in `npm run bench:strategies` (network loading, three weeks). */
export const DEFAULT_STRATEGY = "predictive-hpa";

/** `routing.policy`: ahead of `jsq` on every figure `npm run bench:prefix` prints, on both Mooncake traces. */
export const DEFAULT_ROUTING_POLICY = "prefix-aware";

/**
 * The planner's forecaster (`--forecaster`): the peak blend with its ARIMA component, whose weight is learned from
 * the series' recent backtest error (forecasts/blend.ts). `npm run bench:forecast` judges it against the naive
 * methods on the ServeGen series (MAPE ≤ 0.9× the best naive's, upper bound covering 85–95%) and the 1,000-series
 * budget, with the blend without ARIMA printed beside it.
 */
export const DEFAULT_FORECASTER = "blend-arima";

/**
 * `routing.pdMinPrefillTokens`: a disaggregated model's request whose uncached prompt is shorter goes whole to a decode
 * instance, which prefills it in chunks itself (llm-d's P/D threshold; 0 splits every request, as vLLM's proxy). The
 * threshold of the highest goodput over colocated chunked prefill in `npm run bench:pd` (the geometric mean over the
 * Azure code and conversation traces of each threshold's best P:D ratio), llama2-70b on 4 × H100.
 */
export const DEFAULT_PD_MIN_PREFILL_TOKENS = 2048;

/** Which bench judges each default, for messages and the test that ties them. */
export const DEFAULT_JUDGED_BY = {
  strategy: "bench:strategies",
  routingPolicy: "bench:prefix",
  forecaster: "bench:forecast",
  pdMinPrefillTokens: "bench:pd",
} as const;

/**
 * `controller.pdSwitch`: a decode pool short of instances first switches a serving prefill instance (BlitzScale §5.2).
 * bench:burst's disaggregated setting judges it against loading a decode instance over the network (switching
 * ≥ 3× sooner to the first decode; measured 9 ms against 642 ms), so it is on.
 */
export const DEFAULT_PD_SWITCH = true;
