import { describe, expect, it } from "vitest";
import { useTestRedis } from "../test/helpers/redis-fixture.js";
import { DAY_MS, MemoryHistory, type DemandHistory } from "./history.js";
import { RedisHistory } from "./history-redis.js";

const redis = useTestRedis();

const adapters: [string, () => DemandHistory][] = [
  ["memory", () => new MemoryHistory()],
  ["redis", () => {
    const p = redis.prefix("history");
    return new RedisHistory(redis.client, { keyPrefix: p });
  }],
];

describe.each(adapters)("DemandHistory (%s)", (_name, make) => {
  it("accumulates per minute, reads gaps as NaN, lists series", async () => {
    const h = make();
    const t0 = 10 * DAY_MS + 5 * 60_000;
    await h.add([
      { kind: "iw", model: "m", region: "r", minuteMs: t0, tokensPerS: 10 },
      { kind: "iw", model: "m", region: "r", minuteMs: t0 + 30_000, tokensPerS: 5 },
      { kind: "iw", model: "m", region: "r", minuteMs: t0 + 2 * 60_000, tokensPerS: 7 },
      { kind: "niw", model: "m", region: "r", minuteMs: t0, tokensPerS: 3 },
    ]);
    const s = await h.series({ kind: "iw", model: "m", region: "r" }, t0 - 60_000, t0 + 3 * 60_000);
    expect(s.map((v) => (Number.isNaN(v) ? "gap" : v))).toEqual(["gap", 15, "gap", 7]);
    expect((await h.keys()).map((k) => `${k.kind}/${k.model}/${k.region}`).sort()).toEqual(["iw/m/r", "niw/m/r"]);
  });

  it("reads across day boundaries and keeps at least 8 days", async () => {
    const h = make();
    expect(h.retentionMs).toBeGreaterThanOrEqual(8 * DAY_MS);
    const start = 20 * DAY_MS;
    await h.add(Array.from({ length: 9 }, (_, d) => ({ kind: "iw" as const, model: "m", region: "r", minuteMs: start + d * DAY_MS, tokensPerS: d + 1 })));
    const s = await h.series({ kind: "iw", model: "m", region: "r" }, start, start + 8 * DAY_MS + 60_000);
    expect(s.filter((v) => !Number.isNaN(v))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("rejects NaN and negative values", async () => {
    const h = make();
    await expect(h.add([{ kind: "iw", model: "m", region: "r", minuteMs: 0, tokensPerS: Number.NaN }])).rejects.toThrow(/finite/);
    await expect(h.add([{ kind: "iw", model: "m", region: "r", minuteMs: 0, tokensPerS: -1 }])).rejects.toThrow(/≥ 0/);
  });
});

it("Redis keys live under the prefix and expire", async () => {
  const p = redis.prefix("history-keys");
  const h = new RedisHistory(redis.client, { keyPrefix: p });
  await h.add([{ kind: "iw", model: "m", region: "r", minuteMs: 3 * DAY_MS, tokensPerS: 1 }]);
  const keys = await redis.client.keys(`${p}*`);
  expect(keys.sort()).toEqual([`${p}hist:iw:m:r:3`, `${p}hist:series`]);
  const ttl = await redis.client.ttl(`${p}hist:iw:m:r:3`);
  expect(ttl).toBeGreaterThan(8 * 86400);
});
