/**
 * SLO-aware spill (issue 46 item 5): a request's predicted time to first token at a warm region, from the region's
 * reported queue and running work and the router's own requests there, through the performance model.
 *
 * SageServe §6.2 routes an interactive request to the first region in preference order whose effective memory
 * utilization is under 70%. Memory is a late signal: an engine that reserves a request's whole KV (prompt + max
 * tokens) at admission, or one at its batch limit, queues requests while the KV they hold now is well under the
 * threshold (issue 46: 300 streams stayed in us-east at p99 TTFT 2.3 s while eu-west idled). This extends §6.2's rule
 * (selection.ts): the region it picks is kept unless its predicted TTFT exceeds the model's TTFT SLO while another
 * allowed region predicts within it; then the first such region in preference order under the threshold takes it,
 * else the first such region.
 *
 * The prediction (`predictTtftMs`), per region, for a request of P prompt and M max tokens:
 *   ahead    = max(reported waiting, the router's requests there without a first token yet)
 *   running  = max(reported running, the router's requests there with one)
 *   fit      = what the region runs at once: `running` when the router's oldest pending request there has waited more
 *              than max(2 × its unloaded TTFT, it + 100 ms) (the region is full, whatever the KV arithmetic says);
 *              else max(N × min(maxBatch, ⌊KV tokens per instance / (P + M)⌋), running, + 1 when nothing is ahead)
 *              — at least what it is seen running, and one more when nothing waits there
 *   short    = running + ahead + 1 − fit — completions the request must wait for before it is admitted
 *   step     = one decode iteration at the running batch per instance (its KV: prompt + half the mean output each)
 *   service  = mean output tokens of a finished request (the region's totals; else M) × max(step, the decode time per
 *              token the router measured there: RegionLoad.measuredMsPerToken)
 *   TTFT     = step + (ahead / N + 1) × prefill(P)                      when short ≤ 0 (admitted at the next boundary)
 *            = the short-th completion + step + prefill(P)                 otherwise (`completionMs` over
 *              min(running + ahead, fit) slots: the router's own running requests finish `service` after their first
 *              event, the other running ones have half of `service` left (progress unknown), those ahead admitted into
 *              free slots all of it, and a freed slot's next request finishes `service` after the one it follows)
 *   + lateMs, when positive: how much later than predicted the router's own requests there got their first event
 *     (an EWMA; RegionLoad.lateMs), so what the formula leaves out (hops, a loaded host, prefill stalls) is learned.
 * Not counted otherwise: prompts of other lengths than this one.
 *
 * The router's own counts are live between telemetry reports (500 ms apart by default): a crowd that arrives between
 * two reports is seen at once. Pure: values in, numbers out.
 */

/** Beyond twice an unloaded TTFT, how much longer than one a request must wait to count as queued (ms; the hops). */
export const QUEUED_EXTRA_MS = 100;

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
  /** How long each of the router's requests there with a first event has been decoding since (ms, any order). */
  runningElapsedMs?: readonly number[];
  /** How long the oldest of the router's pending requests there has waited for its first event (ms; 0 or absent: none). */
  oldestPendingMs?: number;
  /** KV tokens one serving instance holds (≤ 0 or non-finite: unknown, no KV bound). */
  kvTokensPerInstance: number;
  /** Mean output tokens of the model's finished requests there; undefined: unknown (the request's max tokens is used). */
  meanOutputTokens?: number;
  /**
   * The decode time per output token the router measured there (ms: first event to end over the tokens after the
   * first, of its own requests that finished; an EWMA). A service longer than the model's steps say (prefills of new
   * arrivals stall the running batch, hops, a loaded host) is taken as measured; undefined: none measured yet.
   */
  measuredMsPerToken?: number;
  /**
   * How much later than predicted the router's own requests there got their first event (ms; an EWMA of observed −
   * predicted TTFT; RegionSelector.track). Added when positive; undefined or ≤ 0: nothing added.
   */
  lateMs?: number;
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
 * tokens, a 10 + 390 token request (fit 10), 10 running (progress unknown) and 5 waiting, 390 mean output tokens,
 * 4 ms steps and 20 ms prefills: short = 6, service = 1,560 ms, the 6th completion 780 ms on, TTFT 804 ms.
 */
export function predictTtftMs(load: RegionLoad, req: RequestSize, pace: SpillPace): number {
  return modelTtftMs(load, req, pace) + Math.max(0, load.lateMs ?? 0);
}

/** predictTtftMs before the measured lateness is added. */
function modelTtftMs(load: RegionLoad, req: RequestSize, pace: SpillPace): number {
  const n = Math.max(1, load.serving);
  const ahead = Math.max(0, load.waiting, load.routerPending);
  const running = Math.max(0, load.running, load.routerInflight - load.routerPending);
  const reservation = Math.max(1, req.promptTokens + req.maxTokens);
  const perInstance = Number.isFinite(load.kvTokensPerInstance) && load.kvTokensPerInstance > 0 ? Math.max(1, Math.min(pace.maxBatch, Math.floor(load.kvTokensPerInstance / reservation))) : pace.maxBatch;
  const meanOut = load.meanOutputTokens !== undefined && load.meanOutputTokens > 0 ? load.meanOutputTokens : Math.max(1, req.maxTokens);
  const prefill = pace.prefillMs(req.promptTokens);
  const stepAt = (b: number) => pace.decodeIterMs(b, b * (req.promptTokens + meanOut / 2));
  // The router's oldest request there still without a first event, waiting well past what an unloaded region takes,
  // says the region is full at what it runs, whatever the KV arithmetic says (other prompts, other engines' rules).
  const unloadedMs = stepAt(Math.max(1, running / n)) + (ahead / n + 1) * prefill;
  const full = (load.oldestPendingMs ?? 0) > Math.max(2 * unloadedMs, unloadedMs + QUEUED_EXTRA_MS);
  const fit = full ? Math.max(1, running) : Math.max(n * perInstance, ahead === 0 ? running + 1 : running);
  const batch = Math.max(1, Math.min(running, fit) / n);
  const step = stepAt(batch);
  const short = running + ahead + 1 - fit;
  if (short <= 0) return step + (ahead / n + 1) * prefill;
  const service = meanOut * Math.max(step, load.measuredMsPerToken ?? 0);
  const slots = Math.max(1, Math.min(running + ahead, fit));
  // What each slot has left: the router's own running requests service − their decode so far, the other running
  // ones half of it (unknown progress), the requests ahead admitted into free slots all of it.
  const known = (load.runningElapsedMs ?? []).slice(0, running).map((e) => Math.max(0, service - e));
  const left = [...known, ...Array<number>(Math.max(0, running - known.length)).fill(service / 2)].slice(0, slots);
  while (left.length < slots) left.push(service);
  return completionMs(short, service, left) + step + prefill;
}

/**
 * When the `k`-th completion (k ≥ 1) comes, given what each slot's running request has `leftMs` (ms): the k-th
 * soonest, and beyond one per slot, a freed slot's next request `serviceMs` after the one it follows.
 */
export function completionMs(k: number, serviceMs: number, leftMs: readonly number[]): number {
  const left = [...leftMs].sort((a, b) => a - b);
  if (left.length === 0) return k * serviceMs;
  const i = k - 1;
  return left[i % left.length]! + Math.floor(i / left.length) * serviceMs;
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
 * the first other region under the threshold predicting within it, else the first other one predicting within it
 * (every region is over the threshold: §6.2 would take the least utilized); when there is none, `pick` is kept and
 * `overSlo` says that no allowed region predicts within the SLO — only when another allowed region was there to
 * compare with: a pick with no other region is kept and queues (not shed).
 */
export function spillFrom<C extends SpillCandidate>(pick: C, others: readonly C[], sloTtftMs: number): { to: C; spilled: boolean; overSlo: boolean } {
  if (pick.ttftMs === undefined || pick.ttftMs <= sloTtftMs) return { to: pick, spilled: false, overSlo: false };
  const within = others.filter((c) => c.region !== pick.region && c.ttftMs !== undefined && c.ttftMs <= sloTtftMs);
  const to = within.find((c) => c.underThreshold) ?? within[0];
  if (to !== undefined) return { to, spilled: true, overSlo: false };
  // Alone (no other allowed region), nothing is shed: the request queues there as before the spill, and the region's
  // own scaling sees it (a shed request never reaches the KV the autoscaler reads).
  return { to: pick, spilled: false, overSlo: others.some((c) => c.region !== pick.region) };
}
