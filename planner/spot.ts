/**
 * Spot donation and reclaim (DESIGN "Spot"; SageServe §6.5). Given the plan's targets: a scale-out of (m, r, g)
 * reclaims m's own spot instances first (fast: weights are loaded), then other models' spot instances on the same
 * GPU type (a redeploy), then starts new VMs; a scale-in donates the instances to spot as m's (so a later scale-out
 * reclaims them fast). Every GPU of a (region, GPU type) not used by the plan is donated to spot. Pure.
 */
import type { Endpoint } from "./ilp.js";
import type { Fleet } from "./fleet.js";

/** What to do at one endpoint to reach its target. */
export interface EndpointAction {
  model: string;
  region: string;
  gpu: string;
  current: number;
  target: number;
  /** Instances taken back from this model's own spot. */
  reclaimSameModel: number;
  /** Instances made from other models' spot GPUs (redeploys). */
  reclaimOtherModel: number;
  /** Instances on newly started VMs. */
  newInstances: number;
  /** Instances donated to spot (kept loaded as this model's). */
  donate: number;
}

/** Spot accounting of one (region, GPU type). */
export interface RegionSpot {
  region: string;
  gpu: string;
  capacityGpus: number;
  plannedGpus: number;
  /** GPUs not in the plan: donated to spot. */
  donatedGpus: number;
  /** Other models' spot instances reclaimed here, by model. */
  reclaimedFrom: Record<string, number>;
}

/** Per-endpoint reclaim/donate actions and per-(region, GPU type) spot accounting for `targets` (same order as `endpoints`). */
export function spotActions(fleet: Fleet, endpoints: readonly Endpoint[], targets: ArrayLike<number>): { actions: EndpointAction[]; regions: RegionSpot[] } {
  const actions: EndpointAction[] = endpoints.map((e, i) => {
    const target = targets[i]!;
    const up = Math.max(0, target - e.current);
    const same = Math.min(up, e.spot);
    return { model: e.model, region: e.region, gpu: e.gpu, current: e.current, target, reclaimSameModel: same, reclaimOtherModel: 0, newInstances: up - same, donate: Math.max(0, e.current - target) };
  });
  const regions: RegionSpot[] = [];
  for (const r of fleet.regions) {
    for (const [gpu, cap] of Object.entries(r.capacity)) {
      const idx = endpoints.map((e, i) => i).filter((i) => endpoints[i]!.region === r.name && endpoints[i]!.gpu === gpu);
      // Spot instances of other models left after their own reclaims, largest pools first.
      const pool = idx.map((i) => ({ i, left: endpoints[i]!.spot - actions[i]!.reclaimSameModel })).filter((p) => p.left > 0).sort((a, b) => b.left - a.left);
      const reclaimedFrom: Record<string, number> = {};
      for (const i of idx) {
        const a = actions[i]!;
        const need = endpoints[i]!.gpusPerInstance;
        while (a.newInstances > 0) {
          // Free `need` GPUs from other models' spot instances.
          let gpus = 0;
          const taken: { p: (typeof pool)[number]; n: number }[] = [];
          for (const p of pool) {
            if (p.i === i || p.left === 0) continue;
            const per = endpoints[p.i]!.gpusPerInstance;
            const n = Math.min(p.left, Math.ceil((need - gpus) / per));
            taken.push({ p, n });
            gpus += n * per;
            if (gpus >= need) break;
          }
          if (gpus < need) break;
          for (const t of taken) {
            t.p.left -= t.n;
            const m = endpoints[t.p.i]!.model;
            reclaimedFrom[m] = (reclaimedFrom[m] ?? 0) + t.n;
          }
          a.newInstances--;
          a.reclaimOtherModel++;
        }
      }
      const plannedGpus = idx.reduce((s, i) => s + actions[i]!.target * endpoints[i]!.gpusPerInstance, 0);
      regions.push({ region: r.name, gpu, capacityGpus: cap, plannedGpus, donatedGpus: Math.max(0, cap - plannedGpus), reclaimedFrom });
    }
  }
  return { actions, regions };
}
