/**
 * `tidegate replay --trace …`: drives a request-level trace through the replay wiring (replay-wiring.ts) in virtual time,
 * synchronously, event by event (VirtualClock.advanceToSync): no promises, so an hour of trace costs a few events
 * per request.
 *
 * Per arrival, the same decisions a request to `tidegate dev` meets after HTTP parsing:
 * 1. global: the router's own region choice (router/router-core.ts `RouterCore.submit`: relay.ts `submitWithRetry`,
 *    the callback shape of dispatchWithRetry over the same walk — `RegionSelector.select` then `noteDispatch` with
 *    `requestKvBytes`); a region with no serving instance refuses at once and the next one is tried;
 * 2. region: the link's callback shape, `Gateway.submit(req, callbacks)` (callback-link.ts) — the endpoint by
 *    effective memory utilization, then JSQ, with the same in-flight books as `Gateway.generate`;
 * 3. engine: the chosen SimEngine's `submit` (onFirstToken / onDone) — the core that SimEngine.generate streams
 *    from live.
 * Telemetry flows region → router over the InProcessRegionLinks on the same clock.
 */
import { VirtualClock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import { findTidegateError } from "../../core/errors.js";
import type { RegionName } from "../../core/models.js";
import type { GenerateRequest, RequestCallbacks } from "../../core/ports.js";
import { DEFAULT_BLOCK_TOKENS, MOONCAKE_BLOCK_TOKENS, blockHashesOfTrace } from "../../core/prefix.js";
import { assignRequests } from "./assign.js";
import type { InstancePrefixStats } from "../../region/gateway/gateway.js";
import { UtilizationTracker, type RequestRecord } from "./stats.js";
import type { Trace } from "./traces.js";
import { buildReplayWiring, type ReplayWiring, type ReplayWiringOptions } from "./replay-wiring.js";

const NO_BODY: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

export interface ReplayOptions {
  trace: Trace;
  config: TidegateConfig;
  /** Seed of the (model, client region) assignment (assign.ts). */
  seed: number;
  /** Replays only the first N requests (default all). */
  limitRequests?: number;
  wiring?: ReplayWiringOptions;
  /** Called now and then with the virtual time reached, the trace span (ms) and requests finished. */
  onProgress?: (virtualMs: number, spanMs: number, finished: number, total: number) => void;
  /** Called once with the fleet before the first arrival (e.g. to read its clock or its regions' counters). */
  onWiring?: (w: ReplayWiring) => void;
  /** Called for every dispatched request with the region and instance chosen. */
  onRoute?: (index: number, region: RegionName, instanceId: string) => void;
}

export interface ReplayResult {
  records: RequestRecord[];
  /** Requests no configured model's context could hold (not replayed). */
  unassignable: number;
  utilization: UtilizationTracker;
  /** Virtual time at the last completion (ms). */
  virtualEndMs: number;
  /** Clock events fired. */
  events: number;
  wallMs: number;
  /** Each instance's prefix-cache counters at the end (Gateway.prefixStats), by region; instances gone by then are not in it. */
  prefix: (InstancePrefixStats & { region: RegionName })[];
}

/** The engine callbacks of one replayed request (a class: no closures per request). */
class Completion implements RequestCallbacks {
  constructor(
    private readonly rec: RequestRecord,
    private readonly done: () => void,
  ) {}
  onFirstToken(atMs: number): void {
    this.rec.firstTokenMs = atMs;
  }
  onDone(atMs: number, generatedTokens: number): void {
    this.rec.doneMs = atMs;
    this.rec.outputTokens = generatedTokens;
    this.done();
  }
  /**
   * A request the region took and failed later: a cold start's hold ran out (model_cold), or the region could not
   * start the model (no_capacity, not_placed, cold_start_failed).
   */
  onError(atMs: number, err: unknown): void {
    this.rec.error = findTidegateError(err)?.code ?? "internal";
    this.rec.doneMs = atMs;
    this.done();
  }
}

/** Runs the replay to the last completion. Deterministic for a given (trace, config, seed). */
export async function runReplay(opts: ReplayOptions): Promise<ReplayResult> {
  const startWall = performance.now();
  const clock = new VirtualClock(0);
  // The instance each request went to, for onRoute (the gateway's routing decision, made inside `submit`).
  let routedTo = "";
  const onRoute = opts.onRoute;
  const w = buildReplayWiring(opts.config, clock, onRoute === undefined ? opts.wiring : { ...opts.wiring, onRouted: (_region, _req, id) => void (routedTo = id) });
  opts.onWiring?.(w);
  const utilization = new UtilizationTracker();
  const unsubscribe = [...w.links.values()].map((l) =>
    l.subscribe((t) => {
      for (const m of t.models) utilization.add(t.region, m.model, m.effectiveMemoryUtilization, m.running);
    }),
  );
  const requests = opts.trace.requests.slice(0, opts.limitRequests ?? opts.trace.requests.length);
  const assignments = assignRequests(requests, opts.config, opts.seed);
  const blockTokens = opts.config.routing?.blockTokens ?? DEFAULT_BLOCK_TOKENS;
  const records: RequestRecord[] = [];
  let unassignable = 0;
  let finished = 0;

  const onDone = (): void => void finished++;
  const arrive = (i: number): void => {
    const r = requests[i]!;
    const a = assignments[i]!;
    if (a.model === undefined) {
      unassignable++;
      finished++;
      return;
    }
    const now = clock.now();
    const rec: RequestRecord = { model: a.model, clientRegion: a.clientRegion, region: "", arrivalMs: now, firstTokenMs: -1, doneMs: -1, outputTokens: 0, promptTokens: r.promptTokens };
    records.push(rec);
    let picked;
    try {
      const req: GenerateRequest = { id: `r${i}`, model: a.model, kind: "chat", promptTokens: r.promptTokens, maxTokens: r.outputTokens, priority: 0, body: NO_BODY };
      // A trace with block ids (Mooncake hash_ids): the engines' prefix caches and prefix-aware routing use them.
      if (r.blockIds !== undefined) req.blockHashes = blockHashesOfTrace(r.blockIds, r.promptTokens, MOONCAKE_BLOCK_TOKENS, blockTokens);
      picked = w.router.submit(req, a.clientRegion, new Completion(rec, onDone));
    } catch (err) {
      rec.error = findTidegateError(err)?.code ?? "internal";
      finished++;
      return;
    }
    if (picked === undefined) {
      rec.error = "no_region_available";
      finished++;
      return;
    }
    rec.region = picked;
    onRoute?.(i, picked, routedTo);
  };

  // Arrivals chained one event at a time (the heap holds one pending arrival, not the whole trace).
  const scheduleArrival = (i: number): void => {
    if (i >= requests.length) return;
    clock.at(requests[i]!.arrivalMs, () => {
      arrive(i);
      scheduleArrival(i + 1);
    });
  };
  scheduleArrival(0);

  const spanMs = requests.length > 0 ? requests[requests.length - 1]!.arrivalMs : 0;
  const progressStepMs = Math.max(1000, spanMs / 100);
  let nextProgressMs = 0;
  let virtualEndMs = 0;
  while (finished < requests.length) {
    const next = clock.nextEventMs();
    if (next === undefined) break;
    clock.advanceToSync(next);
    virtualEndMs = clock.now();
    if (opts.onProgress !== undefined && virtualEndMs >= nextProgressMs) {
      opts.onProgress(virtualEndMs, spanMs, finished, requests.length);
      nextProgressMs = virtualEndMs + progressStepMs;
      await Promise.resolve();
    }
  }
  opts.onProgress?.(clock.now(), spanMs, finished, requests.length);
  for (const u of unsubscribe) u();
  const prefix = [...w.gateways].flatMap(([region, gw]) => gw.prefixStats().map((s) => ({ ...s, region })));
  await w.close();
  return { records, unassignable, utilization, virtualEndMs, events: clock.firedEvents, wallMs: performance.now() - startWall, prefix };
}
