/**
 * Redis demand history. Keys under a configurable prefix: one hash per (series, UTC day),
 * `<prefix>hist:<kind>:<model>:<region>:<day>` with the minute of day as field, expiring retention + 1 day after its
 * last write, and `<prefix>hist:series` listing every series. Every write is the `history-add` Lua script
 * (lua/history-add-2.lua), pipelined per `add` call.
 */
import type { Redis } from "ioredis";
import { LuaScripts, locateBeside } from "../core/lua.js";
import { DAY_MS, DEFAULT_RETENTION_MS, MINUTE_MS, checkRetention, checkSamples, type DemandHistory, type DemandKind, type DemandSample, type SeriesKey } from "./history.js";

/** Key prefix (e.g. "tidegate:") and retention (≥ 8 days, default 8 days). */
export interface RedisHistoryOptions {
  /** Key prefix, e.g. "tidegate:". */
  keyPrefix: string;
  retentionMs?: number;
}

/** Return codes of history-add. */
export const HISTORY_ADD_CODES = { 1: "ok", [-1]: "bad_value", [-2]: "bad_minute" } as const;

/** DemandHistory on Redis (see the file comment); the ioredis client stays the caller's. */
export class RedisHistory implements DemandHistory {
  readonly retentionMs: number;
  private readonly scripts: LuaScripts;
  private readonly prefix: string;

  /** `client` is owned by the caller (close() does not disconnect it). */
  constructor(private readonly client: Redis, options: RedisHistoryOptions) {
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    checkRetention(this.retentionMs);
    this.prefix = options.keyPrefix;
    this.scripts = new LuaScripts(client, locateBeside(import.meta.url, "lua", "../../forecasts"));
  }

  private dayKey(k: SeriesKey, day: number): string {
    return `${this.prefix}hist:${k.kind}:${k.model}:${k.region}:${day}`;
  }

  async add(samples: readonly DemandSample[]): Promise<void> {
    checkSamples(samples);
    const expireS = Math.ceil((this.retentionMs + DAY_MS) / 1000);
    const results = await Promise.all(
      samples.map((s) => {
        const minute = Math.floor(s.minuteMs / MINUTE_MS);
        const day = Math.floor(minute / 1440);
        return this.scripts.run("history-add", [this.dayKey(s, day), `${this.prefix}hist:series`], [minute - day * 1440, s.tokensPerS, expireS, `${s.kind}\t${s.model}\t${s.region}`]);
      }),
    );
    results.forEach((r, i) => {
      if (r !== 1) throw new RangeError(`history-add failed for sample ${i}: ${HISTORY_ADD_CODES[r as -1 | -2] ?? String(r)}`);
    });
  }

  async series(key: SeriesKey, fromMs: number, toMs: number): Promise<number[]> {
    const from = Math.floor(fromMs / MINUTE_MS);
    const to = Math.floor(toMs / MINUTE_MS);
    const out: number[] = new Array(Math.max(0, to - from)).fill(Number.NaN);
    if (to <= from) return out;
    const days: number[] = [];
    for (let d = Math.floor(from / 1440); d <= Math.floor((to - 1) / 1440); d++) days.push(d);
    const hashes = await Promise.all(days.map((d) => this.client.hgetall(this.dayKey(key, d))));
    days.forEach((d, i) => {
      for (const [field, value] of Object.entries(hashes[i]!)) {
        const minute = d * 1440 + Number(field);
        if (minute >= from && minute < to) out[minute - from] = Number(value);
      }
    });
    return out;
  }

  async keys(): Promise<SeriesKey[]> {
    const members = await this.client.smembers(`${this.prefix}hist:series`);
    return members.sort().map((m) => {
      const [kind, model, region] = m.split("\t") as [DemandKind, string, string];
      return { kind, model, region };
    });
  }

  async close(): Promise<void> {}
}
