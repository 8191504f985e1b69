/**
 * A whole region in one process for `tidegate dev` (and tests): `buildRegion` on the `agentsInProcess` host
 * (agents-host.ts) — the same runtime as `tidegate region` in agents mode (gateway, TargetsStore, controller, `agents`
 * actuator, parameter pool, multicast transfers) over in-process node agents: real NodeAgents (native block stores,
 * loopback TCP data plane) hosting simulated engines. Nodes are cut from the region's GPUs: `ceil(count / gpusPerNode)`
 * nodes per GPU type, each with `gpusPerNode` slots.
 */
import type { Clock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import type { Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import type { AgentsActuator } from "../actuator/agents.js";
import type { InProcessAgent } from "./in-process-agent.js";
import type { Gateway } from "../gateway/gateway.js";
import { agentsInProcess, type InProcessAgentsOptions } from "./agents-host.js";
import { buildRegion, type RegionMetricsHooks } from "./build-region.js";
import type { RegionRuntime } from "./runtime.js";

export interface InProcessRegionOptions extends InProcessAgentsOptions {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log: Logger;
  /** Scaling actions and failures; with `outcome` and `transferred` also requests and data-plane bytes. */
  metrics?: RegionMetricsHooks;
}

export interface InProcessRegion {
  gateway: Gateway;
  runtime: RegionRuntime<AgentsActuator>;
  agents: InProcessAgent[];
  /**
   * Resolves once every endpoint serves its configured `instances` (the initial deployment landed), or rejects
   * after `timeoutMs` naming the endpoints still short.
   */
  ready(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** Starts the region: nodes announce at once, the runtime's first pass deploys the configured instances. */
export function startInProcessRegion(o: InProcessRegionOptions): InProcessRegion {
  const { config, region, clock, metrics, log, ...nodes } = o;
  return buildRegion({ config, region, clock, log: log.child({ region }), ...(metrics === undefined ? {} : { metrics }), host: agentsInProcess(nodes) });
}
