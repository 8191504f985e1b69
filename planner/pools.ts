/**
 * A disaggregated model's prefill and decode pools in the hourly plan (issue 48 item 4). The ILP plans each pool as a
 * unit of its own, keyed `model#role` in the fleet (its endpoints, its tps), so each gets its own count and GPUs, and
 * the plan page lists both; the regions hear them back as their (model, gpu, role) targets (loop.ts targetsFor).
 *
 * Demand stays per (model, region), as the forecasts are: where a region runs a model's pools, each pool's cover row
 * asks for the whole α·F(m, r) in the same unit (prompt + output tokens/s), and each pool's tps(m, g) is what one of
 * its engines serves of such demand at the SLO (NVIDIA Dynamo's per-role capacity, core/perf/pd-capacity.ts; SageServe
 * §6.4's cover row per endpoint type): a prefill engine's prompt tokens/s × (ISL + OSL)/ISL, a decode engine's output
 * tokens/s × (ISL + OSL)/OSL, at the planner's request mix (capacity.ts DEFAULT_MIX). So ⌈α·F / tps⌉ per pool is
 * Dynamo's num_p and num_d. Colocated endpoints of the model in other regions cover their own regions' rows.
 */
import type { ModelName } from "../core/models.js";
import type { PoolRole } from "../core/ports.js";
import { poolCapacity, type PoolEngine } from "../core/perf/pd-capacity.js";

const SEP = "#";

/** The fleet key of `model`'s `role` pool (the model itself when colocated). */
export function poolModel(model: ModelName, role: PoolRole | undefined): string {
  return role === undefined ? model : `${model}${SEP}${role}`;
}

/** The model and pool of a fleet key (poolModel's inverse). */
export function splitPoolModel(key: string): { model: ModelName; role?: PoolRole } {
  const i = key.lastIndexOf(SEP);
  const role = i < 0 ? undefined : key.slice(i + 1);
  return role === "prefill" || role === "decode" ? { model: key.slice(0, i), role } : { model: key };
}

/** How the plan page names a fleet key: the model, and its pool where it is one ("llama2-70b · prefill pool"). */
export function poolLabel(key: string): string {
  const p = splitPoolModel(key);
  return p.role === undefined ? p.model : `${p.model} · ${p.role} pool`;
}

/** Demand for the ILP: each (m, r) whose region plans m's pools becomes one demand per pool, each the whole F. */
export function poolDemand<D extends { model: ModelName; region: string }>(fleet: { regions: readonly { name: string; endpoints: readonly { model: string }[] }[] }, demand: readonly D[]): D[] {
  const out: D[] = [];
  for (const d of demand) {
    const roles = new Set<PoolRole>();
    for (const e of fleet.regions.find((r) => r.name === d.region)?.endpoints ?? []) {
      const p = splitPoolModel(e.model);
      if (p.model === d.model && p.role !== undefined) roles.add(p.role);
    }
    if (roles.size === 0) out.push(d);
    else for (const role of roles) out.push({ ...d, model: poolModel(d.model, role) });
  }
  return out;
}

/** tps(m, g) of one engine of a `role` pool, in the planner's unit (prompt + output tokens/s of demand), at the SLO. */
export function poolTokensPerS(model: ModelName, gpu: string, tp: number, role: PoolRole, slo: { ttftMs: number; tpotMs: number }, mix: { promptTokens: number; outputTokens: number }, engine: PoolEngine = {}): number {
  const cap = poolCapacity(model, gpu, tp, slo, mix, engine);
  const total = mix.promptTokens + mix.outputTokens;
  return role === "prefill" ? (cap.prefillTokensPerS * total) / mix.promptTokens : (cap.decodeTokensPerS * total) / mix.outputTokens;
}
