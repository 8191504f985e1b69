/**
 * The `tidegate region` process in agents mode (controller.actuator "agents"): the region's instances are engine
 * processes its node agents start and stop; agents find the region by announcing themselves to the AgentRegistry
 * service on the region's gRPC port (every second), and the region drives each one back over its NodeAgent service.
 * Engines are reached through the openai-http adapter at the URL their agent reports, exactly as vLLM would be;
 * an engine is healthy once `GET {url}/health` answers 200.
 */
import type * as grpc from "@grpc/grpc-js";
import type { Clock } from "../../core/clock.js";
import { regionLoading, type TidegateConfig } from "../../core/config.js";
import { agentsLayerwise } from "../liveload/live-pairs.js";
import type { Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import { AgentsActuator } from "../actuator/agents.js";
import { AgentClient } from "../agent/client.js";
import type { EngineInfo, NodeAnnouncement } from "../agent/handle.js";
import { addAgentRegistryService, type AnnounceReply } from "../agent/agent-registry.js";
import { OpenAIHttpEngine } from "../engines/openai-http/openai-http-engine.js";
import { Gateway, type GatewayOptions } from "../gateway/gateway.js";
import { modelSources, multicastPolicy, startRegionRuntime, type RegionRuntime, type RuntimeMetricsSink } from "../runtime/runtime.js";
import { slotKvBytes } from "./spawn.js";
import { pipelineFlag } from "../keystage/pipeline-engine.js";
import type { TlsFiles } from "../link/tls.js";

export interface AgentsRegion {
  gateway: Gateway;
  runtime: RegionRuntime;
  /** Adds the AgentRegistry service to the region's gRPC server (before it binds). */
  registry(server: grpc.Server): void;
  close(): Promise<void>;
}

/** `GET {url}/health` answers 200 within `timeoutMs`. */
export async function httpHealthy(info: EngineInfo, timeoutMs = 1000): Promise<boolean> {
  if (info.url === "") return false;
  const res = await fetch(new URL("/health", info.url), { signal: AbortSignal.timeout(timeoutMs) });
  await res.body?.cancel();
  return res.status === 200;
}

/** Builds the region's gateway, agents actuator and runtime; agents join through `registry`. */
export function startAgentsRegion(o: {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log: Logger;
  gatewayOptions: Omit<GatewayOptions, "region" | "clock" | "log">;
  metrics: RuntimeMetricsSink & { transferred(bytes: number): void };
  /** Mutual TLS to the node agents (the region's own files; `serverName` when agents' certificates do not carry their IPs). */
  tls?: TlsFiles;
}): AgentsRegion {
  const rc = o.config.regions.find((r) => r.name === o.region)!;
  const layerwise = agentsLayerwise(o.region, regionLoading(o.config, o.region), o.config.engines.commandTemplate);
  const gateway = new Gateway({ ...o.gatewayOptions, region: o.region, clock: o.clock, log: o.log });
  for (const e of rc.endpoints) gateway.addEndpoint(e.model, e.gpu);
  const e = o.config.engines;
  const actuator = new AgentsActuator({
    region: o.region,
    clock: o.clock,
    log: o.log,
    gateway,
    models: modelSources(o.config, o.region),
    policy: multicastPolicy(o.config),
    engines: {
      ...(e.commandTemplate === undefined ? {} : { commandTemplate: e.commandTemplate }),
      timeScale: e.timeScale,
      startTimeoutMs: e.startTimeoutMs,
      stopGraceMs: e.stopGraceMs,
      healthy: (info) => httpHealthy(info),
      pipeline: pipelineFlag(o.config),
      connect: async (info, instanceId) => {
        const tp = o.config.models.find((m) => m.name === info.model)?.gpusPerInstance[info.gpu] ?? info.gpus;
        return new OpenAIHttpEngine({ instanceId, model: info.model, baseUrl: info.url, clock: o.clock, kvBytesCapacity: slotKvBytes({ region: o.region, model: info.model, gpu: info.gpu, tp, instanceId }), log: o.log });
      },
    },
    lostAfterMs: o.config.controller.agentLostAfterMs,
    ...(layerwise === undefined ? {} : { layerwise }),
    minHostCopies: o.config.parameters.minHostCopies,
    onTransfer: (r) => o.metrics.transferred(r.completed.length * (o.config.parameters.models[r.model]?.bytes ?? 0)),
  });
  const runtime = startRegionRuntime({
    config: o.config,
    region: o.region,
    clock: o.clock,
    log: o.log,
    gateway,
    actuator,
    metrics: o.metrics,
    // Every live agent announces within a second: wait for all of them (and adopt their engines) before deploying.
    startupGraceMs: o.config.controller.agentLostAfterMs,
  });
  const clients = new Map<string, AgentClient>();
  const onAnnounce = (a: NodeAnnouncement): AnnounceReply => {
    if (a.region !== "" && a.region !== o.region) return { known: false, message: `this is region ${o.region}; the agent says it belongs to ${a.region}` };
    let c = clients.get(a.nodeId);
    if (c === undefined || c.address !== a.grpcAddress) {
      c?.close();
      c = new AgentClient(a.grpcAddress, a.nodeId, o.tls);
      clients.set(a.nodeId, c);
    }
    actuator.announce(c, a);
    return { known: true, message: "" };
  };
  return {
    gateway,
    runtime,
    registry: (server) => addAgentRegistryService(server, onAnnounce),
    close: async () => {
      runtime.close();
      actuator.close();
      // Engines keep running on their agents: a restarted region adopts them.
      await gateway.close();
    },
  };
}
