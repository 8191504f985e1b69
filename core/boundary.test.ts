import { describe, expect, it } from "vitest";
import { BoundaryReporter, DATA_REFUSALS, peerHost } from "./boundary.js";
import { VirtualClock } from "./clock.js";
import { createLogger } from "./log.js";
import { createRegistry } from "./metrics.js";

function setup(o: { intervalMs?: number; maxPeers?: number } = {}) {
  const clock = new VirtualClock(0);
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("info", {}, (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  const registry = createRegistry(false);
  const r = new BoundaryReporter({ clock, log, registry, ...o });
  return { clock, lines, registry, r };
}

async function counted(registry: ReturnType<typeof createRegistry>, port: string, reason: string): Promise<number | undefined> {
  const m = await registry.getSingleMetric("tidegate_boundary_refused_total")!.get();
  return m.values.find((v) => v.labels.port === port && v.labels.reason === reason)?.value;
}

describe("BoundaryReporter", () => {
  it("logs one line per (port, peer, reason) per interval, with the count suppressed since the last line", async () => {
    const { clock, lines, registry, r } = setup({ intervalMs: 60_000 });
    for (let i = 0; i < 5; i++) r.refuse("grpc", "bad_preface", `127.0.0.1:${40000 + i}`, "bad client magic");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "warn", msg: "boundary refused", port: "grpc", reason: "bad_preface", peer: "127.0.0.1", suppressed: 0, detail: "bad client magic" });
    // Another reason, or another peer, is its own key.
    r.refuse("grpc", "rapid_reset", "127.0.0.1:1");
    r.refuse("grpc", "bad_preface", "10.0.0.2:1");
    expect(lines).toHaveLength(3);
    clock.advanceToSync(59_999);
    r.refuse("grpc", "bad_preface", "127.0.0.1:2");
    expect(lines).toHaveLength(3);
    clock.advanceToSync(60_000);
    r.refuse("grpc", "bad_preface", "127.0.0.1:3");
    expect(lines).toHaveLength(4);
    expect(lines[3]).toMatchObject({ reason: "bad_preface", peer: "127.0.0.1", suppressed: 5 });
    expect(await counted(registry, "grpc", "bad_preface")).toBe(8);
    expect(await counted(registry, "grpc", "rapid_reset")).toBe(1);
  });

  it("adds a batch count (the data plane's aggregated refusals) to the counter and the line", async () => {
    const { lines, registry, r } = setup();
    r.refuse("data", "bad_magic", "127.0.0.1", "", 4);
    r.refuse("data", "bad_magic", "127.0.0.1", "", 3);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ count: 4, suppressed: 0 });
    expect(await counted(registry, "data", "bad_magic")).toBe(7);
  });

  it("keeps at most maxPeers keys, dropping the least recently refused", () => {
    const { lines, r } = setup({ maxPeers: 3 });
    for (let i = 0; i < 10; i++) r.refuse("data", "bad_magic", `10.0.0.${i}`);
    expect(r.trackedKeys).toBe(3);
    expect(lines).toHaveLength(10);
    // 10.0.0.9 is still remembered (rate-limited); 10.0.0.0 was dropped, so it logs again at once.
    r.refuse("data", "bad_magic", "10.0.0.9");
    expect(lines).toHaveLength(10);
    r.refuse("data", "bad_magic", "10.0.0.0");
    expect(lines).toHaveLength(11);
    expect(r.trackedKeys).toBe(3);
    // A flood of distinct peers stays bounded.
    for (let i = 0; i < 5000; i++) r.refuse("data", "bad_magic", `fd00::${i.toString(16)}`);
    expect(r.trackedKeys).toBe(3);
  });

  it("starts declared series at 0 and shares one counter per registry", async () => {
    const { clock, registry, r } = setup();
    r.declare("data", DATA_REFUSALS);
    expect(await counted(registry, "data", "frame_too_large")).toBe(0);
    const again = new BoundaryReporter({ clock, log: createLogger("error"), registry });
    again.refuse("data", "frame_too_large", "127.0.0.1");
    expect(await counted(registry, "data", "frame_too_large")).toBe(1);
  });

  it("reduces a peer to its address", () => {
    expect(peerHost("127.0.0.1:5000")).toBe("127.0.0.1");
    expect(peerHost("ipv4:10.1.2.3:80")).toBe("10.1.2.3");
    expect(peerHost("[::1]:5000")).toBe("::1");
    expect(peerHost("::ffff:127.0.0.1")).toBe("::ffff:127.0.0.1");
    expect(peerHost("")).toBe("unknown");
    expect(peerHost(undefined)).toBe("unknown");
  });
});
