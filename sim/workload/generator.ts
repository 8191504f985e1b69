/**
 * The week workload as a lazy stream (memory stays small: one pending arrival per source). Interactive traffic:
 * every ServeGen client of a model's source is a source, placed in one region (seeded, by `clientShare`), reading
 * its series in local time (UTC + the region's offset). Within a 10-minute window, inter-arrival times follow the
 * window's fitted distribution (Gamma or Weibull with its shape; exponential when none) normalised to mean 1 and
 * run through a time change by the window's (scaled, burst-multiplied) rate, so per-window rate, CV and
 * distribution are ServeGen's and a rate change mid-gap is exact. Client rates are scaled per model so the run
 * totals `targetRequests`. Batch (NIW): a steady Poisson stream per (model, region) carrying `niwTokenShare` of
 * the tokens, each with a deadline. Token lengths: a uniformly drawn real (prompt, output) row of the model's Azure
 * 2023 trace, clamped to the model's context. Same spec + seed → the same stream.
 */
import { MODEL_SPECS } from "../../core/models.js";
import { exponential, gamma, gammaFn, seededRandom, weibull, type Random } from "./rng.js";
import { SERVEGEN_WINDOW_S, loadServeGen, type ClientSeries } from "./servegen.js";
import type { WorkloadSpec } from "./spec.js";
import { drawRow, loadAzureTokens, type TokenSamples } from "./tokens.js";

/** One request of the workload. `atMs` is virtual time since the start of the run. */
export interface Arrival {
  atMs: number;
  /** Index into `spec.models` and `spec.regions` (the client's region; for NIW, where it was submitted). */
  model: number;
  region: number;
  promptTokens: number;
  outputTokens: number;
  niw: boolean;
  /** Absolute deadline for NIW (atMs + niwDeadlineMs); Infinity for interactive. */
  deadlineMs: number;
}

interface Source {
  kind: "client" | "niw";
  model: number;
  region: number;
  series?: ClientSeries;
  /** Series offset in s: series position = t_s + offsetS. */
  offsetS: number;
  rateScale: number;
  nextMs: number;
  random: Random;
}

/** What the generator planned (for reports and the bench's inputs line). */
export interface WorkloadSummary {
  durationMs: number;
  clients: number;
  /** Expected interactive / batch requests per model (after scaling). */
  expectedIw: number[];
  expectedNiw: number[];
  /** Multipliers applied to ServeGen client rates per model. */
  rateScale: number[];
  meanPromptTokens: number[];
  meanOutputTokens: number[];
}

const DAY_S = 86_400;

export class WorkloadStream {
  readonly summary: WorkloadSummary;
  private readonly sources: Source[] = [];
  private readonly heap: number[] = [];
  private readonly tokens: TokenSamples[];
  private readonly maxContext: number[];
  private readonly tokRandom: Random;
  private readonly endMs: number;
  /** Requests emitted so far. */
  emitted = 0;

  /**
   * `rateScale` (per model) replaces the scaling to `targetRequests`: a warm-up stream over earlier days uses the
   * main stream's scales so both describe the same clients at the same level.
   */
  constructor(
    private readonly spec: WorkloadSpec,
    rateScale?: readonly number[],
  ) {
    this.endMs = spec.days * DAY_S * 1000;
    const azure = { conv: loadAzureTokens(spec.azureDir, "conv"), code: loadAzureTokens(spec.azureDir, "code") };
    this.tokens = spec.models.map((m) => azure[m.tokens]);
    this.maxContext = spec.models.map((m) => MODEL_SPECS[m.name]!.maxContextTokens);
    this.tokRandom = seededRandom(spec.seed, 1);
    const shareSum = spec.models.reduce((s, m) => s + m.share, 0);
    const regionShareSum = spec.regions.reduce((s, r) => s + r.clientShare, 0);
    const iwTotal = spec.targetRequests * (1 - spec.niwTokenShare);
    const cache = new Map<string, ClientSeries[]>();
    const summary: WorkloadSummary = { durationMs: this.endMs, clients: 0, expectedIw: [], expectedNiw: [], rateScale: [], meanPromptTokens: [], meanOutputTokens: [] };
    spec.models.forEach((m, mi) => {
      let all = cache.get(m.source);
      if (all === undefined) cache.set(m.source, (all = loadServeGen(spec.servegenDir, m.source)));
      const clients = all.filter((_, i) => i % m.clientStride === m.clientOffset);
      const placed = clients.map((series) => {
        const r = seededRandom(spec.seed, hashString(series.id))() * regionShareSum;
        let acc = 0;
        let region = spec.regions.length - 1;
        for (let i = 0; i < spec.regions.length; i++) {
          acc += spec.regions[i]!.clientShare;
          if (r < acc) {
            region = i;
            break;
          }
        }
        const offsetS = spec.startDay * DAY_S + spec.regions[region]!.utcOffsetH * 3600;
        return { series, region, offsetS };
      });
      let raw = 0;
      for (const p of placed) raw += expectedRequests(p.series, p.offsetS, this.endMs / 1000);
      const target = (iwTotal * m.share) / shareSum;
      const scale = rateScale?.[mi] ?? spec.rateScale?.[mi] ?? (raw > 0 ? target / raw : 0);
      const tk = this.tokens[mi]!;
      summary.rateScale.push(scale);
      summary.expectedIw.push(raw * scale);
      summary.meanPromptTokens.push(tk.meanPrompt);
      summary.meanOutputTokens.push(tk.meanOutput);
      for (const p of placed) {
        this.add({ kind: "client", model: mi, region: p.region, series: p.series, offsetS: p.offsetS, rateScale: scale, nextMs: 0, random: seededRandom(spec.seed, hashString(p.series.id + "/" + m.name)) });
        summary.clients++;
      }
      const niwRequests = spec.niwTokenShare > 0 ? (target * spec.niwTokenShare) / (1 - spec.niwTokenShare) : 0;
      summary.expectedNiw.push(niwRequests);
      spec.regions.forEach((reg, ri) => {
        const perS = (niwRequests * reg.clientShare) / regionShareSum / (this.endMs / 1000);
        if (perS > 0) this.add({ kind: "niw", model: mi, region: ri, offsetS: 0, rateScale: perS, nextMs: 0, random: seededRandom(spec.seed, hashString(`niw/${m.name}/${reg.name}`)) });
      });
    });
    this.summary = summary;
    for (let i = 0; i < this.sources.length; i++) {
      const s = this.sources[i]!;
      s.nextMs = this.advance(s, 0);
      this.heapPush(i);
    }
  }

  /** The next request in time order, or undefined after the end of the run. */
  next(): Arrival | undefined {
    const top = this.heap[0];
    if (top === undefined) return undefined;
    const s = this.sources[top]!;
    const atMs = s.nextMs;
    if (!(atMs < this.endMs)) return undefined;
    s.nextMs = this.advance(s, atMs);
    this.heapFix();
    const tk = this.tokens[s.model]!;
    const row = drawRow(tk, this.tokRandom);
    const output = Math.min(tk.output[row]!, this.maxContext[s.model]! >> 1);
    const prompt = Math.max(1, Math.min(tk.prompt[row]!, this.maxContext[s.model]! - output));
    this.emitted++;
    const niw = s.kind === "niw";
    return { atMs, model: s.model, region: s.region, promptTokens: prompt, outputTokens: output, niw, deadlineMs: niw ? atMs + this.spec.niwDeadlineMs : Infinity };
  }

  /** Time of the source's next arrival after `fromMs` (Infinity if none before the end). */
  private advance(s: Source, fromMs: number): number {
    if (s.kind === "niw") return fromMs + (exponential(s.random) / s.rateScale) * 1000;
    const series = s.series!;
    let t = fromMs / 1000;
    const endS = this.endMs / 1000;
    let w = Math.floor((t + s.offsetS) / SERVEGEN_WINDOW_S);
    if (w >= series.rateRps.length) return Infinity;
    let u = drawUnit(s.random, series.dist[w]!, series.shape[w]!);
    for (;;) {
      if (t >= endS || w >= series.rateRps.length) return Infinity;
      const windowEnd = (w + 1) * SERVEGEN_WINDOW_S - s.offsetS;
      const burst = this.burstAt(s, t);
      const segEnd = Math.min(windowEnd, burst.untilS, endS);
      const rate = series.rateRps[w]! * s.rateScale * burst.factor;
      if (rate > 0 && t + u / rate <= segEnd) return (t + u / rate) * 1000;
      if (rate > 0) u -= (segEnd - t) * rate;
      t = segEnd;
      if (t >= windowEnd) w++;
    }
  }

  /** The burst factor in force at `tS` for this source and when it next changes (s). */
  private burstAt(s: Source, tS: number): { factor: number; untilS: number } {
    let factor = 1;
    let untilS = Infinity;
    for (const b of this.spec.bursts) {
      if (b.model !== undefined && b.model !== this.spec.models[s.model]!.name) continue;
      if (b.region !== undefined && b.region !== this.spec.regions[s.region]!.name) continue;
      const a = b.startMs / 1000;
      const e = (b.startMs + b.durationMs) / 1000;
      if (tS < a) untilS = Math.min(untilS, a);
      else if (tS < e) {
        factor *= b.factor;
        untilS = Math.min(untilS, e);
      }
    }
    return { factor, untilS };
  }

  private add(s: Source): void {
    this.sources.push(s);
  }

  private less(a: number, b: number): boolean {
    return this.sources[a]!.nextMs < this.sources[b]!.nextMs;
  }

  private heapPush(i: number): void {
    const h = this.heap;
    h.push(i);
    let k = h.length - 1;
    while (k > 0) {
      const p = (k - 1) >> 1;
      if (!this.less(h[k]!, h[p]!)) break;
      [h[k], h[p]] = [h[p]!, h[k]!];
      k = p;
    }
  }

  /** Restores the heap after the top's key grew. */
  private heapFix(): void {
    const h = this.heap;
    let k = 0;
    for (;;) {
      const l = 2 * k + 1;
      const r = l + 1;
      let m = k;
      if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
      if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
      if (m === k) break;
      [h[k], h[m]] = [h[m]!, h[k]!];
      k = m;
    }
  }
}

/** A mean-1 inter-arrival draw with the window's distribution (0 exponential, 1 Gamma(k), 2 Weibull(k)). */
function drawUnit(r: Random, dist: number, shape: number): number {
  if (dist === 1) return gamma(r, shape) / shape;
  if (dist === 2) return weibull(r, shape) / gammaFn(1 + 1 / shape);
  return exponential(r);
}

/** Expected requests of one client over [0, endS) at its series offset (rate × window overlap). */
function expectedRequests(series: ClientSeries, offsetS: number, endS: number): number {
  let sum = 0;
  for (let w = Math.floor(offsetS / SERVEGEN_WINDOW_S); w < series.rateRps.length; w++) {
    const a = Math.max(0, w * SERVEGEN_WINDOW_S - offsetS);
    const b = Math.min(endS, (w + 1) * SERVEGEN_WINDOW_S - offsetS);
    if (b <= a) {
      if (a >= endS) break;
      continue;
    }
    sum += series.rateRps[w]! * (b - a);
  }
  return sum;
}

/** FNV-1a of a string, for per-client seeds. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
