/**
 * Request streams for key-stage scaling (QUART §8.3): arrivals with a chosen inter-arrival CV (0.1, 1, 2, 4, 8) at
 * the mean rate of a real trace, with token lengths drawn from that trace. Inter-arrival times are Gamma with shape
 * k = 1/CV² and mean 1/rate (CV of a Gamma is 1/√k), seeded, the same on every machine.
 */
import { gamma, seededRandom } from "./rng.js";
import type { PipelineRequest } from "../../region/keystage/pipeline.js";

/**
 * What these streams read of a request trace: arrival times (ms from the first request) and token lengths, and the
 * arrival of the last request. sim/replay/traces.ts `Trace` is one (this folder sits below sim/replay).
 */
export interface Trace {
  requests: readonly { arrivalMs: number; promptTokens: number; outputTokens: number }[];
  /** Arrival of the last request (ms). */
  spanMs: number;
}

/** Mean arrival rate of a trace (requests/s). */
export function traceRatePerS(trace: Trace): number {
  return trace.spanMs > 0 ? ((trace.requests.length - 1) * 1000) / trace.spanMs : 0;
}

/** Inter-arrival CV of a trace's own arrivals. */
export function traceCv(trace: Trace): number {
  const r = trace.requests;
  const d: number[] = [];
  for (let i = 1; i < r.length; i++) d.push(r[i]!.arrivalMs - r[i - 1]!.arrivalMs);
  const mean = d.reduce((a, b) => a + b, 0) / d.length;
  const v = d.reduce((a, b) => a + (b - mean) ** 2, 0) / d.length;
  return Math.sqrt(v) / mean;
}

/** A Gamma stream: trace for token lengths, CV, rate, request count, seed. */
export interface CvStreamOptions {
  /** Token lengths are sampled from this trace (with replacement). */
  trace: Trace;
  cv: number;
  ratePerS: number;
  count: number;
  seed: number;
}

/** `count` requests with Gamma(1/CV², ·) inter-arrivals at `ratePerS`; the first arrives at 0. */
export function cvStream(o: CvStreamOptions): PipelineRequest[] {
  if (!(o.cv > 0) || !(o.ratePerS > 0) || !(o.count >= 1)) throw new RangeError("cv, ratePerS and count must be > 0");
  const r = seededRandom(o.seed, 1);
  const pick = seededRandom(o.seed, 2);
  const k = 1 / (o.cv * o.cv);
  const meanMs = 1000 / o.ratePerS;
  const out: PipelineRequest[] = [];
  let t = 0;
  for (let i = 0; i < o.count; i++) {
    if (i > 0) t += (gamma(r, k) / k) * meanMs;
    const src = o.trace.requests[Math.floor(pick() * o.trace.requests.length)]!;
    out.push({ id: i, arrivalMs: t, promptTokens: src.promptTokens, outputTokens: src.outputTokens });
  }
  return out;
}

/** A trace's own requests (arrival times as recorded), the first `count` of them. */
export function traceStream(trace: Trace, count = trace.requests.length): PipelineRequest[] {
  return trace.requests.slice(0, count).map((q, id) => ({ id, arrivalMs: q.arrivalMs, promptTokens: q.promptTokens, outputTokens: q.outputTokens }));
}

/** Realised inter-arrival CV of a stream. */
export function streamCv(reqs: readonly PipelineRequest[]): number {
  const d: number[] = [];
  for (let i = 1; i < reqs.length; i++) d.push(reqs[i]!.arrivalMs - reqs[i - 1]!.arrivalMs);
  const mean = d.reduce((a, b) => a + b, 0) / d.length;
  const v = d.reduce((a, b) => a + (b - mean) ** 2, 0) / d.length;
  return mean > 0 ? Math.sqrt(v) / mean : 0;
}
