/**
 * A whole region in one process for `tidegate dev` (and tests): the same runtime as `tidegate region` — gateway,
 * TargetsStore, controller, `agents` actuator, parameter pool, multicast transfers — over in-process node agents:
 * real NodeAgents (native block stores, loopback TCP data plane) hosting simulated engines. Nodes are cut from the
 * region's GPUs: `ceil(count / gpusPerNode)` nodes per GPU type, each with `gpusPerNode` slots.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { regionLoading, type TidegateConfig } from "../../core/config.js";
import { agentsLayerwise } from "../liveload/live-pairs.js";
import type { Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import { AgentsActuator } from "../actuator/agents.js";
import { InProcessAgent } from "../agent/in-process-agent.js";
import { NodeAgent } from "../agent/node.js";
import { Gateway, type RequestOutcome } from "../gateway/gateway.js";
import { pipelineFlag } from "../keystage/pipeline-engine.js";
import { modelSources, multicastPolicy, startRegionRuntime, type RegionRuntime, type RuntimeMetricsSink } from "./runtime.js";

export interface InProcessRegionOptions {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log: Logger;
  /** GPU slots per node (default 8, an HGX node). */
  gpusPerNode?: number;
  /**
   * An explicit node list instead of cutting the region's GPUs into nodes of `gpusPerNode`; each node may announce an
   * NVLink domain and a link rate (agent/handle.ts AgentInfo), as `tidegate agent --nvlink-domain --link-mbit` does.
   */
  nodes?: { gpuType: string; slots: number; nvlinkDomain?: string; linkBytesPerS?: number }[];
  /** Host memory each node lends to parameter blocks (default 512 MiB). */
  nodeMemoryBytes?: number;
  /** How often agents announce themselves (default 1000 ms). */
  announceIntervalMs?: number;
  /** Scaling actions and failures; with `outcome` and `transferred` also requests and data-plane bytes. */
  metrics?: RuntimeMetricsSink & { outcome?(model: string, outcome: RequestOutcome): void; transferred?(bytes: number): void };
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
  const rc = o.config.regions.find((r) => r.name === o.region);
  if (rc === undefined) throw new RangeError(`unknown region ${o.region}`);
  const layerwise = agentsLayerwise(o.region, regionLoading(o.config, o.region));
  const log = o.log.child({ region: o.region });
  // In-process engines report exact stats cheaply: read them at every decision (statsRefreshMs 0), as replay does.
  const sink = o.metrics;
  const gateway = new Gateway({ region: o.region, clock: o.clock, statsRefreshMs: 0, log, ...(sink?.outcome === undefined ? {} : { onOutcome: (m: string, x: RequestOutcome) => sink.outcome!(m, x) }) });
  for (const e of rc.endpoints) gateway.addEndpoint(e.model, e.gpu);
  const perNode = o.gpusPerNode ?? 8;
  const nodes: NodeAgent[] = [];
  const agents: InProcessAgent[] = [];
  const layout = o.nodes ?? rc.gpus.flatMap((g) => Array.from({ length: Math.ceil(g.count / perNode) }, (_, k) => ({ gpuType: g.type, slots: Math.min(perNode, g.count - k * perNode) })));
  try {
    const seen = new Map<string, number>();
    for (const n of layout) {
      const k = seen.get(n.gpuType) ?? 0;
      seen.set(n.gpuType, k + 1);
      const nodeId = `${o.region}-${n.gpuType}-${k}`;
      const { nvlinkDomain, linkBytesPerS } = n as { nvlinkDomain?: string; linkBytesPerS?: number };
      const links = { ...(nvlinkDomain === undefined ? {} : { nvlinkDomain }), ...(linkBytesPerS === undefined ? {} : { linkBytesPerS }) };
      const node = NodeAgent.open({ nodeId, dataHost: "127.0.0.1", dataPort: 0, transport: "tcp", memoryBytes: o.nodeMemoryBytes ?? 512 * 1024 * 1024, log: log.child({ node: nodeId }), ...links });
      nodes.push(node);
      agents.push(new InProcessAgent({ agent: node, region: o.region, gpuType: n.gpuType, gpuSlots: n.slots, clock: o.clock, timeScale: o.config.engines.timeScale, ...(o.config.engines.kvCapacityTokens === undefined ? {} : { kvCapacityTokens: o.config.engines.kvCapacityTokens }) }));
    }
  } catch (err) {
    void Promise.all(nodes.map((n) => n.close()));
    throw err;
  }
  const actuator = new AgentsActuator({
    region: o.region,
    clock: o.clock,
    log,
    gateway,
    models: modelSources(o.config, o.region),
    policy: multicastPolicy(o.config),
    engines: {
      timeScale: o.config.engines.timeScale,
      startTimeoutMs: o.config.engines.startTimeoutMs,
      stopGraceMs: o.config.engines.stopGraceMs,
      connect: async (info, instanceId) => {
        for (const a of agents) {
          const e = a.engine(instanceId);
          if (e !== undefined) return e;
        }
        throw new Error(`no in-process engine ${instanceId} (${info.url})`);
      },
      healthy: async (info) => agents.some((a) => a.engine(info.instanceId) !== undefined),
      pipeline: pipelineFlag(o.config),
    },
    lostAfterMs: o.config.controller.agentLostAfterMs,
    ...(layerwise === undefined ? {} : { layerwise }),
    minHostCopies: o.config.parameters.minHostCopies,
    ...(sink?.transferred === undefined ? {} : { onTransfer: (r: { model: string; completed: readonly unknown[] }) => sink.transferred!(r.completed.length * (o.config.parameters.models[r.model]?.bytes ?? 0)) }),
  });
  const announceAll = () => {
    for (const a of agents) void a.announcement().then((ann) => actuator.announce(a, ann), (err: unknown) => log.warn("announcement failed", { node: a.nodeId, err }));
  };
  announceAll();
  const announcer: Timer = o.clock.every(o.announceIntervalMs ?? 1000, announceAll);
  const runtime = startRegionRuntime({ config: o.config, region: o.region, clock: o.clock, log, gateway, actuator, ...(o.metrics === undefined ? {} : { metrics: o.metrics }) });
  let closing: Promise<void> | undefined;
  const shortOf = () =>
    rc.endpoints
      .map((e) => ({ e, serving: gateway.instances().filter((i) => i.model === e.model && i.gpu === e.gpu && i.state === "serving").length }))
      .filter((x) => x.serving < x.e.instances)
      .map((x) => `${x.e.model}/${x.e.gpu} ${x.serving}/${x.e.instances}`);
  return {
    gateway,
    runtime,
    agents,
    ready: async (timeoutMs = 60_000) => {
      const deadline = o.clock.now() + timeoutMs;
      for (;;) {
        const short = shortOf();
        if (short.length === 0) return;
        if (o.clock.now() >= deadline) throw new Error(`${o.region}: the initial deployment did not land within ${timeoutMs} ms (serving/wanted: ${short.join(", ")}); see the region's failures at /admin/regions/${o.region}/instances`);
        await o.clock.sleep(50);
      }
    },
    close: () =>
      (closing ??= (async () => {
        announcer.cancel();
        runtime.close();
        actuator.close();
        await gateway.close();
        await Promise.all(nodes.map((n) => n.close()));
      })()),
  };
}
