// What the router answers when no region serves a model (issue 50): every region it tried refused to start the model
// from zero → that refusal's code with each region's reason; no region available → why of each, never just
// "no fresh telemetry".
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { TidegateError, findTidegateError } from "../core/errors.js";
import type { EngineEvent, GenerateRequest, ModelTelemetry, RegionLink } from "../core/ports.js";
import { FakeRegionLink, modelTelemetry } from "../test/helpers/fake-link.js";
import { dispatchWithRetry } from "./relay.js";
import { RegionSelector } from "./selector.js";

const M = "llama3.1-8b";
const REGIONS = ["east", "west"];

/** A region whose dispatch fails before any event with `err`. */
class RefusingLink extends FakeRegionLink {
  constructor(region: string, nowMs: () => number, private readonly err: TidegateError) {
    super(region, nowMs);
  }

  override dispatch(_req: GenerateRequest): AsyncIterable<EngineEvent> {
    const err = this.err;
    return (async function* () {
      await Promise.resolve();
      throw err;
    })();
  }
}

function world(errs: Record<string, TidegateError>) {
  const clock = new VirtualClock(1_000_000);
  const selector = new RegionSelector({
    clock,
    regions: REGIONS.map((name) => ({ name, proximity: REGIONS.filter((r) => r !== name), models: [M] })),
    memoryThreshold: 0.7,
    telemetryStaleMs: 5000,
    instanceKvBytes: () => 1e9,
  });
  const links = new Map<string, RegionLink>(REGIONS.map((r) => [r, new RefusingLink(r, () => clock.now(), errs[r]!)]));
  let seq = 0;
  const report = (region: string, m: ModelTelemetry) => selector.onTelemetry({ region, seq: ++seq, atMs: clock.now(), models: [m] });
  const atZero = (expectedMs: number): ModelTelemetry => ({ ...modelTelemetry(M, 0, 0), cold: { held: 0, expectedMs } });
  const req: GenerateRequest = { id: "r1", model: M, kind: "chat", promptTokens: 10, maxTokens: 4, priority: 0, body: {} };
  const dispatch = () => dispatchWithRetry({ selector, links, req, signal: new AbortController().signal }).then(() => undefined, (e: unknown) => findTidegateError(e));
  return { clock, report, atZero, dispatch };
}

const refusal = (code: "no_capacity" | "cold_start_failed", region: string, why: string) => new TidegateError(code, `model ${M} cannot start from zero in region ${region}: ${why}`);

describe("dispatchWithRetry for a model no region serves", () => {
  it("every region refused to start it: the first one's code, each region's reason", async () => {
    const w = world({ east: refusal("no_capacity", "east", "no free GPU"), west: refusal("cold_start_failed", "west", "its engine exited") });
    w.report("east", w.atZero(400));
    w.report("west", w.atZero(900));
    const err = await w.dispatch();
    expect(err?.code).toBe("no_capacity");
    expect(err?.status).toBe(503);
    expect(err?.message).toBe(`model ${M}: no region can start it from zero (model ${M} cannot start from zero in region east: no free GPU; model ${M} cannot start from zero in region west: its engine exited)`);
  });

  it("a refusal beside another failure: no_region_available with both", async () => {
    const w = world({ east: refusal("no_capacity", "east", "no free GPU"), west: new TidegateError("upstream_error", "region west failed") });
    w.report("east", w.atZero(400));
    w.report("west", w.atZero(900));
    const err = await w.dispatch();
    expect(err?.code).toBe("no_region_available");
    expect(err?.message).toMatch(/every available region failed before the first token \(.*no free GPU; west: region west failed\)/);
  });

  it("no region available: says why of each (no telemetry, stale, nothing serving and no start from zero)", async () => {
    const w = world({ east: refusal("no_capacity", "east", "-"), west: refusal("no_capacity", "west", "-") });
    expect((await w.dispatch())?.message).toBe(`model ${M}: no region can serve it now (east: no telemetry from it yet, or its link is down; west: no telemetry from it yet, or its link is down)`);
    w.report("east", modelTelemetry(M, 0, 0));
    await w.clock.advanceTo(1_004_000);
    w.report("west", modelTelemetry(M, 0, 0));
    await w.clock.advanceTo(1_006_000);
    const err = await w.dispatch();
    expect(err?.code).toBe("no_region_available");
    expect(err?.message).toBe(
      `model ${M}: no region can serve it now (east: its last telemetry is 6000 ms old (router.telemetryStaleMs 5000); west: no instance of the model serves there, and it does not start the model from zero (an endpoint with minInstances > 0, or fixed engines))`,
    );
  });
});
