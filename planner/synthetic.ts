/**
 * Seeded synthetic fleets for benchmarks and tests: M models × R regions × G GPU types, every model deployable on
 * every (region, GPU type), demand per (model, region) drawn so each needs a few to a few dozen instances, current
 * instances near the demand, and capacity so the fleet as a whole fits with ~25% headroom while some (region,
 * GPU type) pairs are tight (capacity binds). Deterministic for a given seed.
 */
import type { Fleet, FleetRegion } from "./fleet.js";
import type { Demand } from "./ilp.js";
import { mulberry32 } from "../core/random.js";

/** A fleet and its demand. */
export interface SyntheticFleet {
  fleet: Fleet;
  demand: Demand[];
}

/** A deterministic fleet of `models` × `regions` × `gpuTypes` endpoints (see the file comment). */
export function syntheticFleet(models: number, regions: number, gpuTypes: number, seed = 1): SyntheticFleet {
  const rand = mulberry32(seed);
  const gpus: Fleet["gpus"] = {};
  const gpuNames = Array.from({ length: gpuTypes }, (_, g) => `gpu${g}`);
  gpuNames.forEach((g, i) => (gpus[g] = { holdPerGpu: 2 + 1.2 * i + rand(), vmStartPerGpu: 0.2 + 0.1 * rand() }));
  const fleetModels: Fleet["models"] = {};
  const modelNames = Array.from({ length: models }, (_, m) => `model-${m}`);
  for (const m of modelNames) {
    const size = [1, 2, 4, 8][Math.floor(rand() * 4)]!;
    const base = 2000 + 6000 * rand();
    fleetModels[m] = {};
    gpuNames.forEach((g, i) => {
      fleetModels[m]![g] = { gpusPerInstance: size, tokensPerS: base * (1 + 0.45 * i) * (0.9 + 0.2 * rand()), modelStartCost: 0.3 + 0.4 * rand() };
    });
  }
  const demand: Demand[] = [];
  const regionList: FleetRegion[] = [];
  const usage = new Map<string, number>();
  for (let r = 0; r < regions; r++) {
    const name = `region-${r}`;
    const endpoints: FleetRegion["endpoints"] = [];
    for (const m of modelNames) {
      const inst = Math.exp(Math.log(3) + rand() * Math.log(10)); // 3..30 instances' worth
      const g0 = gpuNames[0]!;
      const f = inst * fleetModels[m]![g0]!.tokensPerS;
      demand.push({ model: m, region: name, tokensPerS: f });
      gpuNames.forEach((g, gi) => {
        const mg = fleetModels[m]![g]!;
        const current = gi === r % gpuTypes ? Math.round((f / mg.tokensPerS) * (0.8 + 0.4 * rand())) : 0;
        endpoints.push({ model: m, gpu: g, instances: current, minInstances: 0, maxInstances: 200, spotInstances: Math.floor(rand() * 2) });
        const k = `${name}\t${g}`;
        usage.set(k, (usage.get(k) ?? 0) + (f / mg.tokensPerS / gpuTypes) * mg.gpusPerInstance);
      });
    }
    regionList.push({ name, capacity: {}, endpoints });
  }
  for (const reg of regionList) {
    for (const g of gpuNames) {
      const need = usage.get(`${reg.name}\t${g}`) ?? 0;
      const current = reg.endpoints.filter((e) => e.gpu === g).reduce((s, e) => s + e.instances * fleetModels[e.model]![g]!.gpusPerInstance, 0);
      reg.capacity[g] = Math.max(current, Math.ceil(need * (0.9 + 0.7 * rand())));
    }
  }
  return { fleet: { alpha: 0.8, beta: 0.2, gpus, models: fleetModels, regions: regionList }, demand };
}
