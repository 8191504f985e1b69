import { describe, expect, it } from "vitest";
import { capacitySignals, requestPriority, slotsForUtilization, fillSlots, fillTarget, nextGate, type EndpointGate, type FillPolicy } from "./policy.js";
import type { RegionTelemetry } from "../../core/ports.js";

const T = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5 };

describe("SageServe §6.3 dispatch policy", () => {
  it("sends two below 0.50, one below 0.60, none at or above 0.60 or on unknown utilization", () => {
    expect([0, 0.2, 0.4999, 0.5, 0.55, 0.5999, 0.6, 0.7, 1.3].map((u) => slotsForUtilization(u, T))).toEqual([2, 2, 2, 1, 1, 1, 0, 0, 0]);
    expect([Number.NaN, Number.POSITIVE_INFINITY, -0.1].map((u) => slotsForUtilization(u, T))).toEqual([0, 0, 0]);
    expect(slotsForUtilization(0.65, { dispatchOneBelow: 0.7, dispatchTwoBelow: 0.4 })).toBe(1);
  });

  it("promotes requests to priority 0 once they are promoteAfterMs old", () => {
    const tenH = 10 * 3600_000;
    expect(requestPriority(0, tenH - 1, tenH)).toBe(1);
    expect(requestPriority(0, tenH, tenH)).toBe(0);
    expect(requestPriority(1000, 1000, tenH)).toBe(1);
  });

  it("sums endpoint slots per model, skipping models not queued and endpoints with no serving instance", () => {
    const report: RegionTelemetry = {
      region: "us-east", seq: 1, atMs: 0,
      models: [
        { model: "a", effectiveMemoryUtilization: 0.5, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 3, draining: 0, spot: 0 },
          endpoints: [
            { endpointId: "a/h100", gpu: "h100-80gb", effectiveMemoryUtilization: 0.3, servingInstances: 2 },
            { endpointId: "a/a100", gpu: "a100-80gb", effectiveMemoryUtilization: 0.55, servingInstances: 1 },
            { endpointId: "a/cold", gpu: "a100-80gb", effectiveMemoryUtilization: 0, servingInstances: 0 },
          ] },
        { model: "b", effectiveMemoryUtilization: 0.9, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 },
          endpoints: [{ endpointId: "b/h100", gpu: "h100-80gb", effectiveMemoryUtilization: 0.9, servingInstances: 1 }] },
        { model: "c", effectiveMemoryUtilization: 0.1, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 },
          endpoints: [{ endpointId: "c/h100", gpu: "h100-80gb", effectiveMemoryUtilization: 0.1, servingInstances: 1 }] },
      ],
    };
    const s = capacitySignals(report, new Set(["a", "b"]), T);
    expect(s.map((x) => [x.region, x.model, x.slots])).toEqual([["us-east", "a", 3]]);
  });
});

describe("fill policy (issue 15, item 9)", () => {
  const p: FillPolicy = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 64 };
  const open: EndpointGate = { open: true, below: 0 };

  it("fills an open endpoint by its free KV up to fillTo, capped per report, never under §6.3's own 1-or-2", () => {
    expect(fillSlots(open, 0.15, 32_000, 700, 0, p)).toBe(18); // floor(0.40 × 32,000 / 700)
    expect(fillSlots(open, 0.0, 1_000_000, 100, 0, p)).toBe(64);
    expect(fillSlots(open, 0.54, 32_000, 700, 0, p)).toBe(1); // headroom under one request: §6.3 still sends 1
    expect(fillSlots(open, 0.45, 1000, 5000, 0, p)).toBe(2);
    expect(fillSlots(open, 0.6, 32_000, 700, 0, p)).toBe(0);
    expect(fillSlots(open, Number.NaN, 32_000, 700, 0, p)).toBe(0);
    // Engines already queueing: nothing more.
    expect(fillSlots(open, 0.1, 32_000, 700, 3, p)).toBe(0);
    // Capacity unknown: §6.3's rule.
    expect(fillSlots(open, 0.1, 0, 700, 0, p)).toBe(2);
    expect(fillSlots({ open: false, below: 0 }, 0.1, 32_000, 700, 0, p)).toBe(0);
  });

  it("closes at dispatchOneBelow and reopens only after reopenReports reports under reopenBelow in a row", () => {
    let g = nextGate(open, 0.3, p);
    expect(g.open).toBe(true);
    g = nextGate(g, 0.61, p);
    expect(g).toEqual({ open: false, below: 0 });
    // Hovering: dips under 0.60 do not reopen it.
    for (const u of [0.58, 0.52, 0.62, 0.55, 0.44, 0.5, 0.44, 0.43]) g = nextGate(g, u, p);
    expect(g).toEqual({ open: false, below: 2 });
    g = nextGate(g, 0.3, p);
    expect(g).toEqual({ open: true, below: 0 });
    expect(nextGate(g, Number.NaN, p).open).toBe(false);
  });

  it("fills only to fillToBeside while the region serves the model's interactive traffic", () => {
    const q: FillPolicy = { ...p, fillToBeside: 0.15 };
    expect(fillTarget(q, { tokensPerS: 900, batchTokensPerS: 900 })).toEqual({ target: 0.55, beside: false }); // batch only: idle for interactive
    expect(fillTarget(q, { tokensPerS: 0 })).toEqual({ target: 0.55, beside: false });
    expect(fillTarget(q, { tokensPerS: 1000, batchTokensPerS: 900 })).toEqual({ target: 0.15, beside: true });
    expect(fillTarget(p, { tokensPerS: 1000, batchTokensPerS: 900 })).toEqual({ target: 0.55, beside: false }); // no fillToBeside: fillTo
    // 16,000 KV tokens at u 0.05, 700 tokens a request: floor(0.50 × 16,000 / 700) = 11 idle, floor(0.10 × 16,000 / 700) = 2 beside.
    expect(fillSlots(open, 0.05, 16_000, 700, 0, { ...q, fillTo: fillTarget(q, { tokensPerS: 0 }).target })).toBe(11);
    expect(fillSlots(open, 0.05, 16_000, 700, 0, { ...q, fillTo: fillTarget(q, { tokensPerS: 50 }).target })).toBe(2);
  });

  it("where engines preempt batch: the thresholds read interactive + non-preemptible, the free KV all of it, the target fillToPreemptible (issue 37)", () => {
    const q: FillPolicy = { ...p, fillToBeside: 0.15, fillToPreemptible: 0.9 };
    // Every engine preempts (the report carries the figure, 0 included) and no interactive traffic: the real limit.
    expect(fillTarget(q, { tokensPerS: 900, batchTokensPerS: 900, preemptibleMemoryUtilization: 0.5 })).toEqual({ target: 0.9, beside: false });
    expect(fillTarget(q, { tokensPerS: 0, preemptibleMemoryUtilization: 0 })).toEqual({ target: 0.9, beside: false });
    // Interactive traffic there: fillToBeside still; engines that do not say: fillTo.
    expect(fillTarget(q, { tokensPerS: 1000, batchTokensPerS: 900, preemptibleMemoryUtilization: 0.5 })).toEqual({ target: 0.15, beside: true });
    expect(fillTarget(q, { tokensPerS: 900, batchTokensPerS: 900 })).toEqual({ target: 0.55, beside: false });
    // KV 0.70 in use, 0.65 of it preemptible batch: routing 0.05 keeps the gate open (0.70 alone would close it) and
    // fills floor((0.9 − 0.70) × 16,000 / 700) = 4.
    const u = 0.7 - 0.65;
    expect(nextGate(open, u, q).open).toBe(true);
    expect(nextGate(open, 0.7, q).open).toBe(false);
    expect(fillSlots(open, u, 16_000, 700, 0, { ...q, fillTo: 0.9 }, 0.7)).toBe(4);
    // Full KV: only §6.3's rule on the routing utilization (below 0.50 → 2), never a negative fill.
    expect(fillSlots(open, u, 16_000, 700, 0, { ...q, fillTo: 0.9 }, 0.98)).toBe(2);
  });
});
