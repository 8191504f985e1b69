/**
 * Turns region telemetry (tokens/s per model, at least once a second) into demand history: samples are averaged per
 * (model, region) over each minute, and a minute is written to the DemandHistory once it is over (the first sample
 * of a later minute closes it). Time comes from the telemetry's own `atMs`. Interactive (IW) demand only — the
 * telemetry's tokens/s less what batch requests took (`batchTokensPerS`): batch demand is recorded by the queue
 * manager as it dispatches (forecasts/niw-recorder.ts) into the same history, and must not count twice.
 */
import type { RegionTelemetry } from "../core/ports.js";
import { MINUTE_MS, type DemandHistory, type DemandSample } from "../forecasts/history.js";

/** Averages telemetry per minute into a DemandHistory. */
export class TelemetryRecorder {
  private readonly open = new Map<string, { minute: number; sum: number; n: number; model: string; region: string }>();
  /** Minutes written (for tests and logs). */
  written = 0;

  constructor(private readonly history: DemandHistory) {}

  /** Adds one telemetry message; resolves when any minute it closed is stored. Bad values are skipped and counted. */
  async observe(t: RegionTelemetry): Promise<void> {
    const minute = Math.floor(t.atMs / MINUTE_MS);
    const closed: DemandSample[] = [];
    for (const m of t.models) {
      if (!Number.isFinite(m.tokensPerS) || m.tokensPerS < 0) continue;
      const batch = m.batchTokensPerS !== undefined && Number.isFinite(m.batchTokensPerS) && m.batchTokensPerS > 0 ? m.batchTokensPerS : 0;
      const interactive = Math.max(0, m.tokensPerS - batch);
      const k = `${m.model}\t${t.region}`;
      const cur = this.open.get(k);
      if (cur !== undefined && cur.minute < minute) {
        closed.push({ kind: "iw", model: cur.model, region: cur.region, minuteMs: cur.minute * MINUTE_MS, tokensPerS: cur.sum / cur.n });
        this.open.delete(k);
      }
      const o = this.open.get(k) ?? { minute, sum: 0, n: 0, model: m.model, region: t.region };
      if (o.minute === minute) {
        o.sum += interactive;
        o.n++;
      }
      this.open.set(k, o);
    }
    if (closed.length > 0) {
      await this.history.add(closed);
      this.written += closed.length;
    }
  }
}
