/**
 * Where a new instance of the `agents` actuator goes, as pure functions of what the region knows: each live
 * node's announced GPU type and slots, the instances on it (slots are taken by instances in any state, spot
 * included) and the host copies of the model it holds.
 */
import { TidegateError } from "../../core/errors.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { InstanceState } from "../../core/ports.js";
import type { NodeEntry } from "./nodes.js";

/** What placement reads: live nodes, every instance (its node, model, slots, state) and the host copies. */
export interface PlacementView {
  /** The live nodes (not lost). */
  live: readonly NodeEntry[];
  instances: Iterable<{ id: string; node: string; model: ModelName; gpus: number; state: InstanceState }>;
  /** The node's copy of the model: complete, being filled, or none (undefined). */
  copy(nodeId: string, model: ModelName): { complete: boolean } | undefined;
}

/**
 * The node's GPU slots not held; 0 for a lost or unknown node. An instance on the node holds what its engine, as the
 * node's agent last announced it running, holds (a pipeline's head over stage processes announces 0: its GPUs are its
 * stage processes', keystage.stageProcesses), else its `gpus` (booked while it starts, kept while spot). An engine the
 * agent runs for no instance here — a stage process (`stage/<instance>/…`), or another region's engine — holds its
 * announced slots on this node too.
 */
export function freeSlots(node: NodeEntry | undefined, instances: PlacementView["instances"]): number {
  if (node === undefined || node.lost) return 0;
  const running = new Map<string, number>();
  for (const e of node.announcement.engines) if (e.state !== "exited") running.set(e.instanceId, e.gpus);
  let used = 0;
  for (const i of instances) {
    if (i.node !== node.nodeId) continue;
    used += running.get(i.id) ?? i.gpus;
    running.delete(i.id);
  }
  for (const gpus of running.values()) used += gpus;
  return node.announcement.gpuSlots - used;
}

/** Free slots of `gpu` over the live nodes. */
export function freeGpus(v: PlacementView, gpu: GpuType): number {
  let free = 0;
  for (const n of v.live) if (n.announcement.gpuType === gpu) free += freeSlots(n, v.instances);
  return free;
}

/**
 * The node for a new instance of `model` on `gpus` slots of `gpu`: among the live nodes of that type with enough
 * free slots, nodes not running the model first (spread), then nodes holding its blocks (a complete copy, an O(1)
 * host-cache hit, before one being filled), then the most free slots, then the smallest node id. Throws
 * `conflict` when no node of the type has announced itself or none has the slots.
 */
export function pickNode(region: RegionName, v: PlacementView, model: ModelName, gpu: GpuType, gpus: number): string {
  let best: { id: string; score: [number, number, number] } | undefined;
  const candidates = v.live.filter((n) => n.announcement.gpuType === gpu);
  if (candidates.length === 0) throw new TidegateError("conflict", `${region}: no live node agent with ${gpu} GPUs has announced itself`);
  for (const n of candidates) {
    const free = freeSlots(n, v.instances);
    if (free < gpus) continue;
    const runsModel = [...v.instances].some((i) => i.node === n.nodeId && i.model === model && i.state !== "spot") ? 0 : 1;
    // A complete copy is an O(1) host-cache hit; one being filled (the pool's first copy arriving from the origin)
    // will be one by the time the engine needs it.
    const copy = v.copy(n.nodeId, model);
    const cached = copy === undefined ? 0 : copy.complete ? 2 : 1;
    const score: [number, number, number] = [runsModel, cached, free];
    if (best === undefined || score[0] > best.score[0] || (score[0] === best.score[0] && (score[1] > best.score[1] || (score[1] === best.score[1] && (score[2] > best.score[2] || (score[2] === best.score[2] && n.nodeId < best.id)))))) best = { id: n.nodeId, score };
  }
  if (best === undefined) {
    const slots = candidates.map((n) => `${n.nodeId} ${freeSlots(n, v.instances)}/${n.announcement.gpuSlots}`).join(", ");
    throw new TidegateError("conflict", `${region}: no node has ${gpus} free ${gpu} slots for ${model} (free/total: ${slots})`);
  }
  return best.id;
}
