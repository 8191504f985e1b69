/**
 * The gateway's books on what it served, per model (SageServe §6.2's region telemetry): tokens served and demanded
 * (telemetry's tokens/s), each request's outcome (`onOutcome`), and the SLO attainment of interactive requests
 * (slo-book.ts). Both request paths report through the same methods at the same moments — the prompt's tokens at
 * the first event, the output's when the request ends, the judgement as it ends — so a replayed request counts
 * exactly as a streamed one.
 *
 * An interactive request is judged against its model's SLO as it ends: TTFT from entering the gateway to its first
 * event, TPOT from its first to its last token; a failure before the first event (every instance tried, or none
 * serving) is unserved, one after it a miss; the caller's own cancel and client errors are not judged.
 */
import type { Clock } from "../../core/clock.js";
import { DEFAULT_SLO, sloFor, type SloConfig } from "../../core/config.js";
import { findTidegateError } from "../../core/errors.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { GenerateRequest, InstanceState, RegionTelemetry } from "../../core/ports.js";
import type { InstanceRecord, InstanceTable } from "./instance-table.js";
import { SloBook, tpotOf, type ModelSloSummary, type SloOutcome } from "./slo-book.js";
import { WindowedRate, modelTelemetry } from "./telemetry.js";

export type RequestOutcome = "ok" | "error" | "cancelled";

/** One instance's prefix-cache counters as its engine reports them (EngineStats; vLLM prefix_cache_*). */
export interface InstancePrefixStats {
  instanceId: string;
  model: ModelName;
  /** Prompt tokens looked up in its prefix cache and found there, since its engine started. */
  queriedTokens: number;
  hitTokens: number;
}

/** One model's books. */
export interface ModelBooks {
  model: ModelName;
  /** Prompt tokens (at the first event) + output tokens (when the request ends), cumulative. */
  tokensServed: number;
  /** The part of `tokensServed` that batch requests (GenerateRequest.batch) took. */
  batchTokensServed: number;
  rate: WindowedRate;
  batchRate: WindowedRate;
  /** Prompt + max tokens of every request that entered (placed or not), cumulative, and its rate. */
  demanded: number;
  demandRate: WindowedRate;
  /** Of them, the prompt tokens and the requests, cumulative, each with its rate (a disaggregated model's pools). */
  promptDemanded: number;
  promptRate: WindowedRate;
  requestsDemanded: number;
  requestRate: WindowedRate;
  /** SLO attainment of its interactive requests. */
  slo: SloBook;
}

export interface JudgeOptions {
  region: RegionName;
  clock: Clock;
  /** Window of the tokens/s figures (ms). */
  rateWindowMs: number;
  /** The interactive SLO each model is judged against (default DEFAULT_SLO for every model). */
  slo?: SloConfig;
  /** Called once per interactive request judged against its SLO. */
  onSlo?: (model: ModelName, outcome: SloOutcome) => void;
  /** Called once per request when it ends: ok, error (after retries) or cancelled. */
  onOutcome?: (model: ModelName, outcome: RequestOutcome) => void;
}

/**
 * An error that is the request's own fault (4xx other than rate_limited and cancelled): not judged against the SLO.
 * `cancelled` here is an engine that went away under the request; the caller's own cancel is told apart by its signal.
 */
function clientFault(err: unknown): boolean {
  const te = findTidegateError(err);
  return te !== undefined && te.status >= 400 && te.status < 500 && te.code !== "rate_limited" && te.code !== "cancelled";
}

/** Books and judgements of one region's requests. Not thread-safe (one event loop). */
export class Judge {
  private readonly books = new Map<ModelName, ModelBooks>();
  private readonly slo: SloConfig;
  private seq = 0;

  constructor(private readonly o: JudgeOptions) {
    this.slo = o.slo ?? { ...DEFAULT_SLO, models: {} };
  }

  /** Opens `model`'s books (once, when the model gets its first endpoint). */
  open(model: ModelName): void {
    const now = this.o.clock.now();
    const w = this.o.rateWindowMs;
    this.books.set(model, { model, tokensServed: 0, batchTokensServed: 0, rate: new WindowedRate(w, now), batchRate: new WindowedRate(w, now), demanded: 0, demandRate: new WindowedRate(w, now), promptDemanded: 0, promptRate: new WindowedRate(w, now), requestsDemanded: 0, requestRate: new WindowedRate(w, now), slo: new SloBook(model, sloFor(this.slo, model), this.o.clock, this.o.onSlo) });
  }

  /** `model`'s books; the caller has found the model in the instance table. */
  of(model: ModelName): ModelBooks {
    return this.books.get(model)!;
  }

  /** A request entered: its prompt + max tokens count as demand whether or not it is placed. */
  demand(b: ModelBooks, req: GenerateRequest): void {
    b.demanded += req.promptTokens + req.maxTokens;
    b.promptDemanded += req.promptTokens;
    b.requestsDemanded++;
  }

  /**
   * `model`'s demand over the rate window: requests/s, prompt tokens/s and output (max) tokens/s of every request
   * that entered (what a disaggregated model's prefill and decode pools must serve; region/runtime/pool-signals.ts).
   */
  demandRates(model: ModelName): { requestsPerS: number; promptTokensPerS: number; outputTokensPerS: number } {
    const b = this.books.get(model);
    if (b === undefined) return { requestsPerS: 0, promptTokensPerS: 0, outputTokensPerS: 0 };
    const now = this.o.clock.now();
    const promptTokensPerS = b.promptRate.rate(now, b.promptDemanded);
    return { requestsPerS: b.requestRate.rate(now, b.requestsDemanded), promptTokensPerS, outputTokensPerS: Math.max(0, b.demandRate.rate(now, b.demanded) - promptTokensPerS) };
  }

  /** Counts tokens a request was served (batch ones apart as well). */
  served(b: ModelBooks, req: GenerateRequest, tokens: number): void {
    if (tokens <= 0) return;
    b.tokensServed += tokens;
    if (req.batch === true) b.batchTokensServed += tokens;
  }

  /** The request finished: outcome ok, and an interactive one is judged on its TTFT and TPOT (clock ms). */
  finished(b: ModelBooks, req: GenerateRequest, enteredAtMs: number, firstAtMs: number, lastAtMs: number, outputTokens: number): void {
    this.o.onOutcome?.(b.model, "ok");
    if (req.batch !== true) b.slo.finished(firstAtMs - enteredAtMs, tpotOf(firstAtMs, lastAtMs, outputTokens), req.promptTokens, outputTokens);
  }

  /**
   * The request failed with `err` (`outcome` error, or cancelled when its engine went away under it): an interactive
   * one is a miss once it had its first event, unserved before unless the error is its own fault (a client error).
   */
  failed(b: ModelBooks, req: GenerateRequest, started: boolean, err: unknown, outcome: RequestOutcome = "error"): void {
    this.o.onOutcome?.(b.model, outcome);
    if (req.batch === true) return;
    if (started) b.slo.broken();
    else if (!clientFault(err)) b.slo.refused();
  }

  /** The caller cancelled the request (or stopped reading it): counted, not judged. */
  cancelled(b: ModelBooks): void {
    this.o.onOutcome?.(b.model, "cancelled");
  }

  /** No instance took the request and the caller will try elsewhere: an interactive one is unserved, no outcome. */
  unplaced(b: ModelBooks, req: GenerateRequest): void {
    if (req.batch !== true) b.slo.refused();
  }

  /**
   * The region's telemetry now: one entry per model; `refresh` reads fresh stats from every instance first. Each
   * model's `slo` is its SLO running totals (slo-book.ts): any number of readers may take snapshots.
   */
  snapshot(table: InstanceTable, refresh: (rec: InstanceRecord, now: number) => void): RegionTelemetry {
    const now = this.o.clock.now();
    const models = [...table.models.values()].map((m) => {
      const b = this.of(m.model);
      const samples: { endpointId: string; state: InstanceState; stats: InstanceRecord["stats"] }[] = [];
      for (const e of m.endpoints) {
        for (const i of e.instances) {
          refresh(i, now);
          samples.push({ endpointId: e.endpointId, state: i.state, stats: i.down === undefined ? i.stats : { ...i.stats, stale: true } });
        }
      }
      const t = modelTelemetry(m.model, m.endpoints, samples, b.rate.rate(now, b.tokensServed), b.batchRate.rate(now, b.batchTokensServed), b.demandRate.rate(now, b.demanded));
      t.slo = b.slo.totals();
      return t;
    });
    return { region: this.o.region, seq: ++this.seq, atMs: now, models };
  }

  /**
   * The prefix-cache counters of every instance whose engine reports them (engine-sim; vLLM through the openai-http
   * adapter's scrape), read from each engine now.
   */
  prefixStats(table: InstanceTable): InstancePrefixStats[] {
    const out: InstancePrefixStats[] = [];
    for (const m of table.models.values()) {
      for (const e of m.endpoints) {
        for (const i of e.instances) {
          const s = i.engine.stats();
          if (s.prefixQueriedTokensTotal === undefined) continue;
          out.push({ instanceId: i.engine.instanceId, model: m.model, queriedTokens: s.prefixQueriedTokensTotal, hitTokens: s.prefixHitTokensTotal ?? 0 });
        }
      }
    }
    return out;
  }

  /** Each model's SLO targets, judged requests, attainment over the last hour and hours in violation (slo-book.ts). */
  sloSummaries(): ModelSloSummary[] {
    return [...this.books.values()].map((m) => m.slo.summary());
  }

  /** `model`'s judged requests over the last `minutes` clock minutes and those met, with its SLO percentile; undefined before its first request. */
  sloRecent(model: ModelName, minutes: number): { requests: number; met: number; percentile: number } | undefined {
    const m = this.books.get(model);
    return m === undefined ? undefined : { ...m.slo.recent(minutes), percentile: m.slo.slo.percentile };
  }
}
