/**
 * The `Actuator` port (DESIGN "Ports and their adapters"): the region's infrastructure. It owns the world the
 * region controller observes — every instance with its state — and carries out provisioning, deployment and moves
 * to and from spot. How long each takes is a property of the adapter (config delays in `sim`, the data plane for
 * network-fast deploys later), never of the strategies. Every method returns at once; the state change it starts
 * is visible in `instances()` immediately (e.g. spot → provisioning), so a restarted controller sees work in flight.
 */
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { InstanceState, PoolRole } from "../../core/ports.js";

/** One instance (a set of GPUs holding one model) as the actuator knows it. */
export interface InstanceRecord {
  id: string;
  region: RegionName;
  gpu: GpuType;
  /** GPUs the instance holds (the model's tensor-parallel degree on `gpu`). */
  gpus: number;
  /** The model deployed (or being deployed) on it; spot instances keep the model they last held. */
  model: ModelName;
  state: InstanceState;
  /** When it entered `state` (clock ms). */
  enteredAtMs: number;
  /** For provisioning/loading: when it is expected to serve (clock ms). */
  readyAtMs?: number;
  /** When the last operation on it started (clock ms); the controller derives cooldowns from it after a restart. */
  actionAtMs?: number;
  /** How it got into its current transition, for accounting: fresh VM, spot reclaim, redeploy, drain. */
  via?: "vm" | "reclaim" | "redeploy-local" | "redeploy-remote" | "drain";
  /** The id it had before a redeploy gave it a new one (adapters whose ids name the model: `agents`). */
  formerId?: string;
  /**
   * The prefill or decode pool it serves in (issue 48; the endpoint's `role`, given by the step that started it:
   * its engine takes that role); absent = colocated. A spot instance keeps the role it last had; a reclaim or
   * redeploy sets the new one.
   */
  role?: PoolRole;
}

export type { PoolRole };

/** Puts an instance in `role`'s pool (undefined: colocated), as a reclaim or redeploy does. */
export function setRole(inst: { role?: PoolRole }, role: PoolRole | undefined): void {
  if (role === undefined) delete inst.role;
  else inst.role = role;
}

/** An endpoint's key in logs, maps and listings: `model/gpu`, or `model/gpu/role` for a disaggregated pool. */
export function poolKey(model: ModelName, gpu: GpuType, role?: PoolRole): string {
  return role === undefined ? `${model}/${gpu}` : `${model}/${gpu}/${role}`;
}

/** The actuator's operations. Errors are TidegateErrors (`conflict` when the instance is not in a state that allows it). */
export interface Actuator {
  readonly region: RegionName;
  /**
   * The observed world: every instance of the region, any state. Records are read-only views of the current
   * state; the array is valid until the next operation or state change (copy what you keep).
   */
  instances(): readonly Readonly<InstanceRecord>[];
  /** Free GPUs of a type (capacity minus GPUs held by instances in any state, spot included). */
  freeGpus(gpu: GpuType): number;
  /** Starts a fresh VM on free GPUs and deploys `model` on it (provisioning → loading → serving). */
  provision(model: ModelName, gpu: GpuType, gpus: number, role?: PoolRole): InstanceRecord;
  /**
   * Moves a spot instance that still holds `model`'s weights back to serving (SageServe §7.1: median 1 min), in
   * `role`'s pool (its engine starts with that role; undefined = colocated).
   */
  reclaimSpot(instanceId: string, role?: PoolRole): InstanceRecord;
  /**
   * Redeploys a spot instance of another model with `model` (loading: ~10 min with weights in region, ~2 h without).
   * An adapter whose ids name the model (`agents`) lists it under a new id from then on, with `formerId` the old one:
   * use the returned record's id.
   */
  redeploy(instanceId: string, model: ModelName, gpus: number, role?: PoolRole): InstanceRecord;
  /**
   * Switches a serving instance of a prefill pool to the decode pool, or back (BlitzScale §5.2): its engine takes the
   * new role at once (same parameters, nothing loads); requests under way finish as they started. Adapters whose
   * engines can switch implement it; a failure to switch the engine puts the instance back in its pool and is
   * reported as a failed scale-out (`onFailure`).
   */
  switchRole?(instanceId: string, role: PoolRole): InstanceRecord;
  /** Stops routing to a serving (or deploying) instance; it becomes spot once its in-flight work is done. */
  drainToSpot(instanceId: string): InstanceRecord;
  /** Whether the instance's node already holds `model`'s complete parameter blocks (adapters that know; others omit it). */
  holdsBlocks?(instanceId: string, model: ModelName): boolean;
  /**
   * How many models other than `except` have their only complete host copy on the instance's node (the parameter
   * pool's O(1) copy, BlitzScale §5.3): a scale-out of such a model from zero loads over PCIe only on that node, so
   * the controller gives another model's spot instance with the fewest of them first (adapters that know; others omit it).
   */
  soleCopies?(instanceId: string, except: ModelName): number;
}

/** A failed scale step, kept for the admin listing. */
export interface ScaleFailure {
  atMs: number;
  model: ModelName;
  gpu: GpuType;
  node?: string;
  instanceId?: string;
  message: string;
}

/** One node as the admin listing shows it (adapters without nodes list none). */
export interface NodeListing {
  nodeId: string;
  lost: boolean;
  lastSeenAtMs: number;
  gpuType: string;
  gpuSlots: number;
  freeSlots: number;
  memoryBytes: number;
  data: string;
  transport: string;
  copies: { model: string; complete: boolean }[];
}

/** An instance in the admin listing: its record, where it runs and what it is doing. */
export interface ListedInstance extends InstanceRecord {
  node: string;
  detail: string;
  engine?: { url: string };
}

/** Who hears of scale-outs that failed after the operation returned, and of instances that started serving. */
/**
 * Where a new instance's parameters came from (issue 33): its node's own host copy ("host", O(1) host cache), a
 * multicast from a peer node or a GPU serving the model ("peer"), or the model's origin ("origin"; the SSD for
 * ServerlessLLM's cache misses in the replays).
 */
export type LoadSource = "host" | "peer" | "origin";

export const LOAD_SOURCES: readonly LoadSource[] = ["host", "peer", "origin"];

export interface ScalingHooks {
  /** A scale-out of (model, gpu) in `role`'s pool (undefined: colocated) failed after the operation returned. */
  onFailure?(model: ModelName, gpu: GpuType, message: string, role?: PoolRole): void;
  /** An instance serves after a scale-out; `source` where its parameters came from, when the adapter knows. */
  onLanded?(model: ModelName, gpu: GpuType, instanceId: string, source?: LoadSource): void;
}

/**
 * What the region runtime (region/runtime/runtime.ts) drives: an Actuator that also reports — the `agents` adapter
 * live (engines on node agents, parameters over the data plane), the `sim` adapter in replay (config delays on the
 * virtual clock) and the `static` adapter (the configured engines, never scaled: region/actuator/static.ts). One
 * runtime, three adapters (STYLE "One runtime, many clocks and adapters").
 */
export interface RuntimeActuator extends Actuator {
  readonly kind: "agents" | "sim" | "static";
  /**
   * True when the instances are fixed (static): every scaling operation is refused, and the runtime runs no
   * controller pass (targets are acknowledged and held, never acted on). Absent = false.
   */
  readonly fixed?: boolean;
  /** Bumped at every instance state change, where the adapter tracks it (telemetry reuses its counts until then). */
  readonly version?: number;
  /** Periodic upkeep at every controller pass (lost nodes, the parameter pool's invariant); may do nothing. */
  tick(): void;
  listen(hooks: ScalingHooks): void;
  /** Keeps a failure (e.g. "cannot scale out") for the listing. */
  report(f: Omit<ScaleFailure, "atMs">): void;
  /** How long the next scale-out of (model, gpu) is expected to take, decision to serving (ms); undefined if unknown. */
  expectedScaleOutMs(model: ModelName, gpu: GpuType): number | undefined;
  listing(): { instances: ListedInstance[]; nodes: NodeListing[]; failures: ScaleFailure[] };
  close(): void;
}

/** Listener for state changes (used by the replay to create engines and by accounting). */
export type InstanceListener = (inst: Readonly<InstanceRecord>, from: InstanceState | undefined) => void;
