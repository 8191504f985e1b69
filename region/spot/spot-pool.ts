/**
 * The spot pool of one (region, GPU type) (SageServe §6.5, §7.2; DESIGN "Spot"). Pure choices over the observed
 * instances:
 *  - scale-out reclaims a spot instance of the same model first (fast: median 1 min), then a spot instance of
 *    another model (a redeploy: ~10 min), then a fresh VM on free GPUs; nothing when none is possible;
 *  - scale-in donates one of the endpoint's instances to spot of the same model: a deploying one first (it serves
 *    nothing yet), else the serving one with the least work in flight;
 *  - min and max instances per endpoint always hold: scale-out never goes above max, scale-in never below min.
 */
import type { GpuType, ModelName } from "../../core/models.js";
import type { InstanceRecord, PoolRole } from "../actuator/port.js";

/** What to do to add one instance of (model, gpu). */
export type ScaleOutChoice =
  | { kind: "reclaim"; instanceId: string }
  | { kind: "redeploy"; instanceId: string; fromModel: ModelName }
  | { kind: "provision" }
  | { kind: "none"; reason: "at-max" | "no-capacity" };

/** What to do to remove one instance of (model, gpu). */
export type ScaleInChoice = { kind: "drain"; instanceId: string } | { kind: "none"; reason: "at-min" | "nothing-to-drain" };

/**
 * Instances of (model, gpu) in `role`'s pool (undefined: the colocated instances) that serve or will serve. A
 * disaggregated model's two pools count apart (issue 48): each is an endpoint of its own.
 */
export function activeOf(instances: readonly InstanceRecord[], model: ModelName, gpu: GpuType, role?: PoolRole): InstanceRecord[] {
  return instances.filter((i) => i.model === model && i.gpu === gpu && i.role === role && (i.state === "serving" || i.state === "provisioning" || i.state === "loading"));
}

/**
 * Picks how to add one instance of `model` on `gpu`. `gpusPerInstance`: GPUs the model needs; `freeGpus`: GPUs of
 * this type held by no instance. A spot instance of the model itself comes first (one whose node holds its blocks
 * before the others). Among other models' spot instances, one whose node already holds `model`'s
 * parameter blocks is taken first when `holdsBlocks` can tell (an O(1) host-cache hit: no transfer, BlitzScale §4.1),
 * else the one whose node holds the fewest other models' only host copies when `soleCopies` can tell (those models'
 * next cold starts load over PCIe only there), then the one of the model with the most spot instances (it can spare
 * one best); ties by id, so the choice is deterministic.
 */
export function chooseScaleOut(
  instances: readonly InstanceRecord[],
  model: ModelName,
  gpu: GpuType,
  gpusPerInstance: number,
  freeGpus: number,
  maxInstances: number,
  holdsBlocks?: (instanceId: string, model: ModelName) => boolean,
  soleCopies?: (instanceId: string, except: ModelName) => number,
  role?: PoolRole,
): ScaleOutChoice {
  // A spot instance of the model serves either pool once reclaimed (the same weights; the role is its engine's).
  if (activeOf(instances, model, gpu, role).length >= maxInstances) return { kind: "none", reason: "at-max" };
  const spot = instances.filter((i) => i.state === "spot" && i.gpu === gpu).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  // Among the model's own spot instances, one whose host holds its blocks first (a reclaim loads nothing there).
  const same = (holdsBlocks === undefined ? undefined : spot.find((i) => i.model === model && holdsBlocks(i.id, model))) ?? spot.find((i) => i.model === model);
  if (same !== undefined) return { kind: "reclaim", instanceId: same.id };
  const spotCount = new Map<ModelName, number>();
  for (const i of spot) spotCount.set(i.model, (spotCount.get(i.model) ?? 0) + 1);
  let best: InstanceRecord | undefined;
  if (holdsBlocks !== undefined) best = spot.find((i) => i.gpus === gpusPerInstance && holdsBlocks(i.id, model));
  if (best === undefined) {
    // Fewest sole copies of other models first (their next cold start needs that node's host copy), then the model
    // with the most spot instances.
    const sole = (i: InstanceRecord) => soleCopies?.(i.id, model) ?? 0;
    let bestSole = Number.POSITIVE_INFINITY;
    for (const i of spot) {
      if (i.gpus !== gpusPerInstance) continue;
      const s = sole(i);
      if (best === undefined || s < bestSole || (s === bestSole && spotCount.get(i.model)! > spotCount.get(best.model)!)) {
        best = i;
        bestSole = s;
      }
    }
  }
  if (best !== undefined) return { kind: "redeploy", instanceId: best.id, fromModel: best.model };
  if (freeGpus >= gpusPerInstance) return { kind: "provision" };
  return { kind: "none", reason: "no-capacity" };
}

/**
 * Picks one instance of (model, gpu) to donate to spot. `inFlightTokens(id)` is the work an instance still holds
 * (JSQ's remaining tokens); the least loaded serving instance is drained so the fewest requests wait on it.
 */
export function chooseScaleIn(instances: readonly InstanceRecord[], model: ModelName, gpu: GpuType, minInstances: number, inFlightTokens: (id: string) => number, role?: PoolRole): ScaleInChoice {
  const active = activeOf(instances, model, gpu, role);
  if (active.length <= minInstances) return { kind: "none", reason: "at-min" };
  const deploying = active.filter((i) => i.state !== "serving").sort((a, b) => (b.readyAtMs ?? 0) - (a.readyAtMs ?? 0));
  if (deploying[0] !== undefined) return { kind: "drain", instanceId: deploying[0].id };
  let best: InstanceRecord | undefined;
  let bestLoad = Infinity;
  for (const i of active) {
    const load = inFlightTokens(i.id);
    if (load < bestLoad) {
      best = i;
      bestLoad = load;
    }
  }
  return best === undefined ? { kind: "none", reason: "nothing-to-drain" } : { kind: "drain", instanceId: best.id };
}
