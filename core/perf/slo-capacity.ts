/**
 * The capacity of one instance at an SLO (issue 31): the highest request rate one instance of (model, GPU, TP)
 * sustains while the SLO's percentile of time to first token stays ≤ ttftMs and of time per output token ≤ tpotMs,
 * for requests of a given mean size. It is SageServe's "TPS provided by model m on GPU g" (§5.1), estimated as §5
 * asks ("the expected latency for serving requests at a certain request rate to ensure we meet the SLA") and used
 * by the hourly ILP (§6.4); Dynamo's SLA planner sizes replicas the same way, from a profiled per-replica capacity
 * at TTFT / ITL targets. The planner's tps(m, g) is `tokensPerS` (planner/fleet.ts).
 *
 * The model, for requests of P prompt and O output tokens, on the fitted profile (perf/model.ts):
 * 1. **Batch from TPOT.** A continuous batch of B decodes one token per request each iteration τ(B) (context
 *    B·(P + O/2) tokens, as throughputAtSlo); at full occupancy each of the B slots turns over once per request
 *    lifetime, so during one request's O tokens the batch is also paused for B prefills of prefill(P). A request's
 *    TPOT is then τ(B) + B·prefill(P)/O. B is the largest batch with that ≤ tpotMs, capped by `maxBatch` (vLLM's
 *    max_num_seqs, default 256) and by the sequences of P + O tokens the KV cache holds (`maxBatch ×
 *    kvTokensPerSeq`, else `kvCapacityTokens`, else the profile's KV capacity).
 * 2. **Slot lifetime.** Each slot serves one request per S = O·τ(B) + B·prefill(P) (throughputAtSlo's lifetime).
 * 3. **Queueing for a slot: M/M/c** with c = B servers of rate μ = 1/S and Poisson arrivals λ. A request's TTFT
 *    is its wait for a slot plus its prefill, so the TTFT target holds at the percentile p when
 *    P(W > t) ≤ 1 − p with t = ttftMs − prefill(P), where P(W > t) = C(c, λ/μ)·e^{−(cμ − λ)t} (Erlang C).
 *    P(W > t) grows with λ, so the largest such λ is found by bisection on (0, cμ).
 * requestsPerS = λ, tokensPerS = λ·(P + O). When prefill(P) alone exceeds ttftMs, or one request alone misses
 * tpotMs, the capacity is 0 and `derivation` says why. Exponential lifetimes are an approximation (decode lifetimes
 * of a fixed-size mix vary less), which errs on the side of more waiting.
 */
import type { ModelSlo } from "../config/slo-section.js";
import type { GpuType, ModelName } from "../models.js";
import { DEFAULT_MAX_BATCH, getProfile } from "./model.js";

/** What one instance sustains at an SLO (capacityAtSlo). */
export interface SloCapacity {
  /** Highest arrival rate (requests/s) at which the SLO holds at its percentile; 0 when it cannot hold. */
  requestsPerS: number;
  /** requestsPerS × (prompt + output tokens): the planner's tokens/s (the unit of its forecasts). */
  tokensPerS: number;
  /** Running requests per instance the TPOT target allows (capped by maxBatch and KV); 0 when none can run. */
  batch: number;
  /** One line of words for the plan report: what bounds the batch, the slot lifetime, the queueing budget. */
  derivation: string;
}

/** Engine limits that cap the batch (absent fields: vLLM's default max_num_seqs, the profile's KV capacity). */
export interface CapacityLimits {
  /** Most running requests (vLLM max_num_seqs); default DEFAULT_MAX_BATCH. */
  maxBatch?: number;
  /** KV tokens per batch slot: the KV cache holds maxBatch × kvTokensPerSeq tokens (the week replay's engines). */
  kvTokensPerSeq?: number;
  /** KV tokens the instance holds (a simulated engine's `engines.kvCapacityTokens`), when kvTokensPerSeq is absent. */
  kvCapacityTokens?: number;
}

/** Mean request size the capacity is for, tokens. */
export interface RequestMix {
  promptTokens: number;
  outputTokens: number;
}

/**
 * Erlang C: the probability that an arrival waits in an M/M/c queue with c servers and offered load a = λ/μ
 * (Erlangs). 1 when a ≥ c (the queue grows without bound), so 1 with no server; 0 with no load. Computed from the
 * Erlang B recursion B(0) = 1, B(k) = a·B(k−1) / (k + a·B(k−1)), stable for thousands of servers:
 * C = c·B / (c − a·(1 − B)). Examples: C(1, a) = a; C(2, 1) = 1/3; C(10, 8) = 0.4092 (the textbook call-centre value).
 * The one Erlang C of the tree: the planner's capacity at the SLO (below) and QUART's stage delays (keystage/queueing.ts).
 */
export function erlangC(c: number, a: number): number {
  if (!(Number.isInteger(c) && c >= 0)) throw new RangeError(`servers must be an integer ≥ 0, got ${c}`);
  if (!(a >= 0) || !Number.isFinite(a)) throw new RangeError(`offered load must be a finite number ≥ 0, got ${a}`);
  if (a >= c) return 1;
  if (a === 0) return 0;
  let b = 1;
  for (let k = 1; k <= c; k++) b = (a * b) / (k + a * b);
  return (c * b) / (c - a * (1 - b));
}

/** P(W > t) in an M/M/c queue: C(c, λ/μ)·e^{−(cμ − λ)t}; 1 when λ ≥ cμ. Rates per second, t in seconds. */
export function waitExceeds(c: number, lambda: number, mu: number, t: number): number {
  if (lambda >= c * mu) return 1;
  return erlangC(c, lambda / mu) * Math.exp(-(c * mu - lambda) * Math.max(0, t));
}

/**
 * The largest λ (per second) with P(W > t) ≤ q in an M/M/c queue of c servers of rate μ, by bisection to a relative
 * 1e-9 of cμ. Example: c = 1, t = 0 gives λ = q·μ (P(W > 0) = ρ for M/M/1).
 */
export function maxArrivalRate(c: number, mu: number, t: number, q: number): number {
  if (!(mu > 0) || !(q > 0)) return 0;
  if (q >= 1) return c * mu;
  let lo = 0;
  let hi = c * mu;
  while (hi - lo > 1e-9 * c * mu) {
    const mid = (lo + hi) / 2;
    if (waitExceeds(c, mid, mu, t) <= q) lo = mid;
    else hi = mid;
  }
  return lo;
}

const r1 = (x: number): string => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1));
const pct = (p: number): string => `p${+(100 * p).toFixed(1)}`;

/**
 * The highest request rate one instance of `model` on `tp` × `gpu` sustains with `slo` at its percentile, for
 * requests of `mix` (see the file comment for the model). Throws invalid_config when no profile exists (getProfile).
 */
export function capacityAtSlo(model: ModelName, gpu: GpuType, tp: number, slo: ModelSlo, mix: RequestMix, limits: CapacityLimits = {}): SloCapacity {
  const p = getProfile(model, gpu, tp);
  const P = Math.max(1, mix.promptTokens);
  const O = Math.max(1, mix.outputTokens);
  const perSeq = P + O;
  const prefill = p.prefillMs(P);
  const target = `${pct(slo.percentile)} TTFT ≤ ${slo.ttftMs} ms, TPOT ≤ ${slo.tpotMs} ms for ${Math.round(P)}/${Math.round(O)}-token requests`;
  const zero = (why: string): SloCapacity => ({ requestsPerS: 0, tokensPerS: 0, batch: 0, derivation: `${target}: none — ${why}` });
  if (prefill > slo.ttftMs) return zero(`one ${Math.round(P)}-token prefill takes ${r1(prefill)} ms, over the TTFT target`);
  const maxBatch = Math.max(1, Math.floor(limits.maxBatch ?? DEFAULT_MAX_BATCH));
  const kvTokens = limits.kvTokensPerSeq !== undefined ? maxBatch * limits.kvTokensPerSeq : (limits.kvCapacityTokens ?? p.kvCapacityTokens);
  const kvSeqs = Math.floor(kvTokens / perSeq);
  const cap = Math.min(maxBatch, kvSeqs);
  if (cap < 1) return zero(`the KV cache (${kvTokens} tokens) holds no ${Math.round(perSeq)}-token sequence`);
  const tpotAt = (b: number): number => p.decodeIterMs(b, b * (P + O / 2)) + (b * prefill) / O;
  if (tpotAt(1) > slo.tpotMs) return zero(`one request alone decodes at ${r1(tpotAt(1))} ms per token, over the TPOT target`);
  let batch = 1;
  while (batch < cap && tpotAt(batch + 1) <= slo.tpotMs) batch++;
  const bound = batch < cap ? "TPOT" : cap === maxBatch ? `maxBatch ${maxBatch}` : `KV (${kvSeqs} sequences)`;
  const tau = p.decodeIterMs(batch, batch * (P + O / 2));
  const lifetimeS = (O * tau + batch * prefill) / 1000;
  const waitS = (slo.ttftMs - prefill) / 1000;
  const lambda = maxArrivalRate(batch, 1 / lifetimeS, waitS, 1 - slo.percentile);
  return {
    requestsPerS: lambda,
    tokensPerS: lambda * perSeq,
    batch,
    derivation: `${target}: batch ${batch} (bound by ${bound}; TPOT ${r1(tpotAt(batch))} ms = decode ${r1(tau)} + prefills ${r1((batch * prefill) / O)}), slot lifetime ${r1(lifetimeS)} s, M/M/${batch} with a ${Math.round(1000 * waitS)} ms wait budget (TTFT − prefill ${r1(prefill)} ms) → ${lambda.toFixed(2)} req/s`,
  };
}
