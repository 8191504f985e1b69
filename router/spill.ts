/**
 * SLO-aware spill (issue 46 item 5): a request's predicted time to first token at a warm region, from the region's
 * reported queue and running work and the router's own requests there, through the performance model.
 *
 * SageServe §6.2 routes an interactive request to the first region in preference order whose effective memory
 * utilization is under 70%. Memory is a late signal: an engine that reserves a request's whole KV (prompt + max
 * tokens) at admission, or one at its batch limit, queues requests while the KV they hold now is well under the
 * threshold (issue 46: 300 streams stayed in us-east at p99 TTFT 2.3 s while eu-west idled). This extends §6.2's rule
 * (selection.ts): the region it picks is kept unless its predicted TTFT exceeds the model's TTFT SLO while another
 * allowed region under the threshold predicts within it; then the first such region in preference order takes it.
 *
 * The prediction (`predictTtftMs`), per region, for a request of P prompt and M max tokens:
 *   ahead    = max(reported waiting, the router's requests there without a first token yet)
 *   running  = max(reported running, the router's requests there with one)
 *   fit      = max(N × min(maxBatch, ⌊KV tokens per instance / (P + M)⌋), running (+ 1 when nothing is ahead)) — what
 *              the region runs at once: at least what it is seen running, and one more when nothing waits there
 *   short    = running + ahead + 1 − fit — completions the request must wait for before it is admitted
 *   step     = one decode iteration at the running batch per instance (its KV: prompt + half the mean output each)
 *   service  = mean output tokens of a finished request (the region's totals; else M) × step
 *   TTFT     = step + (ahead / N + 1) × prefill(P)                      when short ≤ 0 (admitted at the next boundary)
 *            = short × service / min(running + ahead, fit) + step + prefill(P)   otherwise (Little's law: the
 *              admitted requests finish at min(running + ahead, fit) / service per ms)
 * Not counted: the hops between regions, prompts of other lengths than this one.
 *
 * The router's own counts are live between telemetry reports (500 ms apart by default): a crowd that arrives between
 * two reports is seen at once. Pure: values in, numbers out.
 */

/** What the router knows of one (region, model) at a request's arrival. */
export interface RegionLoad {
  /** Serving instances of the model (> 0). */
  serving: number;
  /** Requests the region reported waiting and running at its engines (its last telemetry). */
  waiting: number;
  running: number;
  /** The router's own requests sent there and in flight: all of them, and those without a first event yet. */
  routerInflight: number;
  routerPending: number;
  /** KV tokens one serving instance holds (≤ 0 or non-finite: unknown, no KV bound). */
  kvTokensPerInstance: number;
  /** Mean output tokens of the model's finished requests there; undefined: unknown (the request's max tokens is used). */
  meanOutputTokens?: number;
}

/** The model's speeds (router/pace.ts TokenPace, the part used here). */
export interface SpillPace {
  prefillMs(tokens: number): number;
  decodeIterMs(batch: number, contextTokens: number): number;
  maxBatch: number;
}

/** The request's size. */
export interface RequestSize {
  promptTokens: number;
  maxTokens: number;
}

/**
 * The request's predicted TTFT at the region (ms), as the file comment says. E.g. 1 instance, maxBatch 256, 4,000 KV
 * tokens, a 10 + 390 token request (fit 10), 10 running and 5 waiting, 390 mean output tokens, 4 ms steps and 20 ms
 * prefills: short = 6, service = 1,560 ms, TTFT = 6 × 1,560 / 10 + 4 + 20 = 960 ms.
 */
export function predictTtftMs(load: RegionLoad, req: RequestSize, pace: SpillPace): number {
  const n = Math.max(1, load.serving);
  const ahead = Math.max(0, load.waiting, load.routerPending);
  const running = Math.max(0, load.running, load.routerInflight - load.routerPending);
  const reservation = Math.max(1, req.promptTokens + req.maxTokens);
  const perInstance = Number.isFinite(load.kvTokensPerInstance) && load.kvTokensPerInstance > 0 ? Math.max(1, Math.min(pace.maxBatch, Math.floor(load.kvTokensPerInstance / reservation))) : pace.maxBatch;
  const fit = Math.max(n * perInstance, ahead === 0 ? running + 1 : running);
  const meanOut = load.meanOutputTokens !== undefined && load.meanOutputTokens > 0 ? load.meanOutputTokens : Math.max(1, req.maxTokens);
  const batch = Math.max(1, Math.min(running, fit) / n);
  const step = pace.decodeIterMs(batch, batch * (req.promptTokens + meanOut / 2));
  const prefill = pace.prefillMs(req.promptTokens);
  const short = running + ahead + 1 - fit;
  if (short <= 0) return step + (ahead / n + 1) * prefill;
  const draining = Math.max(1, Math.min(running + ahead, fit));
  return (short * meanOut * step) / draining + step + prefill;
}

/** A region as the spill rule sees it. */
export interface SpillCandidate {
  region: string;
  /** Under the memory threshold (SageServe §6.2's condition for being picked first). */
  underThreshold: boolean;
  /** Predicted TTFT (ms); undefined when it cannot be predicted (no performance profile). */
  ttftMs?: number;
}

/**
 * The spill rule: given §6.2's pick and the other allowed, available warm regions in preference order, the region
 * to send to and whether it spilled. `pick` is kept when its prediction is within `sloTtftMs` or unknown; otherwise
 * the first other region under the threshold predicting within it; when there is none, `pick` is kept and `overSlo`
 * says that no allowed region predicts within the SLO.
 */
export function spillFrom<C extends SpillCandidate>(pick: C, others: readonly C[], sloTtftMs: number): { to: C; spilled: boolean; overSlo: boolean } {
  if (pick.ttftMs === undefined || pick.ttftMs <= sloTtftMs) return { to: pick, spilled: false, overSlo: false };
  for (const c of others) if (c.region !== pick.region && c.underThreshold && c.ttftMs !== undefined && c.ttftMs <= sloTtftMs) return { to: c, spilled: true, overSlo: false };
  return { to: pick, spilled: false, overSlo: true };
}
