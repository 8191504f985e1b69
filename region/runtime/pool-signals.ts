/**
 * A disaggregated model's pool signals (issue 48 item 4): each of its prefill and decode pools scales on its own
 * role's load, through the same strategies as a colocated endpoint (they act on `utilization` and tokens/s).
 *
 * Capacity at the SLO per role is NVIDIA Dynamo's SLA planner's (core/perf/pd-capacity.ts): a prefill engine's prompt
 * tokens/s with one prompt's prefill within the model's TTFT target, a decode engine's output tokens/s at the largest
 * batch within its TPOT target (context ISL + OSL/2), for the request sizes the gateway sees now (its demand window's
 * mean prompt and max output tokens; Dynamo's ISL/OSL), on the engines' own settings (engines.timeScale, maxBatch,
 * kvCapacityTokens). A pool's utilization is then its role's demand over its
 * serving engines' capacity (Dynamo's num_p, num_d = ⌈demand ÷ per-engine capacity⌉, so a strategy at target 1 keeps
 * exactly Dynamo's count):
 * - prefill: the model's prompt tokens/s ÷ (serving prefill engines × prefill tokens/s at the TTFT target);
 * - decode: the model's output tokens/s ÷ (serving decode engines × decode tokens/s at the TPOT target).
 * Every request's prompt counts toward the prefill pool, those the router leaves whole (under
 * routing.pdMinPrefillTokens; they prefill on a decode engine) too: the prefill pool errs on the large side.
 * With none serving a pool reads as full (1), as a colocated endpoint does. `observedTokensPerS` is the model's whole
 * demand (prompt + output tokens/s), the unit of the plan's forecast that LT-UA compares it with.
 */
import { instanceGpus, modelEngineSettings, type TidegateConfig } from "../../core/config.js";
import { sloFor } from "../../core/config/slo-section.js";
import type { GpuType, ModelName } from "../../core/models.js";
import { poolCapacity, poolUtilization, type PoolCapacity } from "../../core/perf/pd-capacity.js";
import type { PoolRole } from "../../core/ports.js";
import type { Actuator } from "../actuator/port.js";
import type { EndpointSignals } from "../controller/reconciler.js";

/** What the signals read: the gateway's demand window and the actuator's instances. */
export interface PoolSignalSources {
  demandRates(model: ModelName): { requestsPerS: number; promptTokensPerS: number; outputTokensPerS: number };
}

export class PoolSignals {
  /** The last capacity per (model, gpu) and the request sizes it was computed for (sizes move slowly). */
  private readonly capacity = new Map<string, { isl: number; osl: number; cap: PoolCapacity }>();

  constructor(
    private readonly config: TidegateConfig,
    private readonly demand: PoolSignalSources,
    private readonly actuator: Pick<Actuator, "instances">,
  ) {}

  signals(model: ModelName, gpu: GpuType, role: PoolRole): EndpointSignals {
    const d = this.demand.demandRates(model);
    let serving = 0;
    for (const i of this.actuator.instances()) if (i.model === model && i.gpu === gpu && i.role === role && i.state === "serving") serving++;
    const cap = this.capacityOf(model, gpu, d);
    // Observed traffic in the forecast's unit (the model's prompt + output tokens/s), which LT-UA compares with it.
    const observedTokensPerS = d.promptTokensPerS + d.outputTokensPerS;
    return role === "prefill"
      ? { utilization: poolUtilization(d.promptTokensPerS, serving, cap.prefillTokensPerS), observedTokensPerS }
      : { utilization: poolUtilization(d.outputTokensPerS, serving, cap.decodeTokensPerS), observedTokensPerS };
  }

  private capacityOf(model: ModelName, gpu: GpuType, d: { requestsPerS: number; promptTokensPerS: number; outputTokensPerS: number }): PoolCapacity {
    // Request sizes of the window, rounded to 1/8 of a power of two so the capacity is recomputed only when they move.
    const isl = d.requestsPerS > 0 ? roundSize(d.promptTokensPerS / d.requestsPerS) : undefined;
    const osl = d.requestsPerS > 0 ? roundSize(d.outputTokensPerS / d.requestsPerS) : undefined;
    const key = `${model}/${gpu}`;
    const last = this.capacity.get(key);
    if (last !== undefined && (isl === undefined || (last.isl === isl && last.osl === osl))) return last.cap;
    const slo = sloFor(this.config.slo, model);
    const settings = modelEngineSettings(this.config.engines, model);
    const engine = { timeScale: this.config.engines.timeScale, ...(settings.maxBatch === undefined ? {} : { maxBatch: settings.maxBatch }), ...(settings.kvCapacityTokens === undefined ? {} : { kvCapacityTokens: settings.kvCapacityTokens }) };
    const cap = poolCapacity(model, gpu, instanceGpus(this.config, model, gpu), { ttftMs: slo.ttftMs, tpotMs: slo.tpotMs }, isl === undefined ? {} : { promptTokens: isl, outputTokens: osl! }, engine);
    this.capacity.set(key, { isl: isl ?? 0, osl: osl ?? 0, cap });
    return cap;
  }
}

function roundSize(x: number): number {
  if (!(x >= 1)) return 1;
  const step = 2 ** Math.max(0, Math.floor(Math.log2(x)) - 3);
  return Math.max(1, Math.round(x / step) * step);
}
