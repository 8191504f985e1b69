/**
 * The two agents engine hosts (build-region.ts): the `agents` actuator over node agents — its options written once
 * here (`agentsActuator`) — with engines either in engine processes on remote agents or simulated on in-process ones.
 *
 * - `agentsOverGrpc` (`tidegate region`, controller.actuator "agents"): agents find the region by announcing
 *   themselves to the AgentRegistry service on the region's gRPC port (every second), and the region drives each
 *   one back over its NodeAgent service (AgentClient). Engines are reached through the openai-http adapter at the
 *   URL their agent reports, exactly as vLLM would be; an engine is healthy once `GET {url}/health` answers 200. The
 *   first controller pass waits `controller.agentLostAfterMs`, so every live agent has announced (and its engines
 *   are adopted) before anything is deployed.
 * - `agentsInProcess` (`tidegate dev`, tests): real NodeAgents (native block stores, loopback TCP data plane) in
 *   this process, wrapped by InProcessAgent (region/runtime/in-process-agent.ts), which hosts simulated engines. Nodes
 *   are the region's GPUs cut into nodes of `gpusPerNode` slots (default 8), or an explicit list. With
 *   `keystage.stageProcesses` each agent also spawns stage processes (`engine-sim --stage`, through an
 *   EngineSupervisor) and a pipelined instance is a StagedPipelineEngine head over them (region/keystage/staged-engine.ts).
 *   `agentsOverGrpc` builds such a head in the region's process (stage-heads.ts) and starts the stage processes on
 *   the agents over gRPC (StartEngine's `stage`).
 *
 * Either way every StartEngine the region sends carries the config's engine settings for its model
 * (core/engine-settings.ts, resolved by build-sim-engine.ts `engineSettingsOf`, as StartEngine's `settings`) with
 * timeScale and the keystage pipeline: engine-sim gets them as its --settings flag (nodes/agent/engine-supervisor.ts),
 * the in-process agent builds its engine from them with the shared builder (build-sim-engine.ts). A command template
 * (a real engine) gets none of them.
 */
import type * as grpc from "@grpc/grpc-js";
import { gpusPerInstanceOf } from "../../core/config.js";
import { regionLoading } from "../liveload/liveload-config.js";
import type { Timer } from "../../core/clock.js";
import { HighsSolver } from "../../core/solver.js";
import { AgentsActuator, type EngineStartOptions } from "../actuator/agents.js";
import { AgentClient } from "../../nodes/agent/client.js";
import type { EngineInfo, EngineSpec, NodeAnnouncement } from "../../nodes/agent/handle.js";
import { addAgentRegistryService, type AnnounceReply } from "../../nodes/agent/agent-registry.js";
import { InProcessAgent } from "./in-process-agent.js";
import { NodeAgent } from "../../nodes/agent/node.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { kvCapacityBytes, GPU_SPECS, MODEL_SPECS } from "../../core/models.js";
import { TidegateError } from "../../core/errors.js";
import { pipelineFlag } from "../keystage/pipeline-engine.js";
import { StagedPipelineEngine } from "../keystage/staged-engine.js";
import { EngineSupervisor } from "../../nodes/agent/engine-supervisor.js";
import { StageHeads } from "./stage-heads.js";
import type { TlsFiles } from "../../core/tls.js";
import { agentsLayerwise } from "../liveload/live-pairs.js";
import { agentsLambda } from "../liveload/live-lambda.js";
import { LAMBDA_PATH } from "../../engines/sim/http.js";
import { engineSettingsOf, newEngine, regionKvFabric } from "./build-sim-engine.js";
import { untilConfiguredServe, type EngineHost, type HostContext } from "./build-region.js";
import { modelSources, multicastPolicy } from "./runtime.js";

/** The agents actuator of a region, its options from config; `engines` says how engines are reached. */
export function agentsActuator(ctx: HostContext, engines: Pick<EngineStartOptions, "connect" | "healthy" | "roleOf" | "commandTemplate" | "servePipelined" | "serveBehindBlocks">): AgentsActuator {
  const { config, region } = ctx;
  const e = config.engines;
  const layerwise = agentsLayerwise(region, regionLoading(config, region), engines.commandTemplate);
  // λScale's pipelines (loading lambdascale): its multicast is always the binomial pipeline, whose plans name them.
  const lambda = agentsLambda(region, regionLoading(config, region), engines.commandTemplate);
  const policy = regionLoading(config, region)?.source === "lambdascale" ? { ...multicastPolicy(config), algorithm: "binomial" as const } : multicastPolicy(config);
  const transferred = ctx.metrics?.transferred;
  return new AgentsActuator({
    region,
    clock: ctx.clock,
    log: ctx.log,
    gateway: ctx.gateway,
    models: modelSources(config, region),
    policy,
    engines: {
      ...(engines.commandTemplate === undefined ? {} : { commandTemplate: engines.commandTemplate }),
      timeScale: e.timeScale,
      startTimeoutMs: e.startTimeoutMs,
      stopGraceMs: e.stopGraceMs,
      connect: engines.connect,
      healthy: engines.healthy,
      ...(engines.roleOf === undefined ? {} : { roleOf: engines.roleOf }),
      pipeline: pipelineFlag(config),
      settings: (model) => engineSettingsOf(config, model),
      ...(engines.servePipelined === undefined ? {} : { servePipelined: engines.servePipelined }),
      ...(engines.serveBehindBlocks === undefined ? {} : { serveBehindBlocks: engines.serveBehindBlocks }),
    },
    lostAfterMs: config.controller.agentLostAfterMs,
    ...(layerwise === undefined ? {} : { layerwise }),
    ...(lambda === undefined ? {} : { lambda }),
    minHostCopies: config.parameters.minHostCopies,
    ...(transferred === undefined ? {} : { onTransfer: (r: { model: string; completed: readonly unknown[] }) => transferred.call(ctx.metrics, r.completed.length * (config.parameters.models[r.model]?.bytes ?? 0)) }),
  });
}

/** `GET {url}/health` answers 200 within `timeoutMs`. */
export async function httpHealthy(info: EngineInfo, timeoutMs = 1000): Promise<boolean> {
  if (info.url === "") return false;
  const res = await fetch(new URL("/health", info.url), { signal: AbortSignal.timeout(timeoutMs) });
  await res.body?.cancel();
  return res.status === 200;
}

/**
 * The role engine-sim serves with now (its /health `settings.role`); undefined for an engine that answers and says
 * none (a 200 without settings, as vLLM's empty /health). Throws when it does not answer 200.
 */
export async function httpRole(info: EngineInfo, timeoutMs = 1000): Promise<string | undefined> {
  const res = await fetch(new URL("/health", info.url), { signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${info.url}/health answered ${res.status}`);
  if (text === "") return undefined;
  const body = JSON.parse(text) as { settings?: { role?: unknown } };
  return typeof body.settings?.role === "string" ? body.settings.role : undefined;
}

/**
 * engine-sim's λScale control: POST {url}/tidegate/lambda {passOverheadMs} (engines/sim/http.ts), with
 * `behindBlocks` a blitzscale cold start serving behind its blocks; throws unless 200.
 */
export async function postLambda(info: EngineInfo, passOverheadMs: number, timeoutMs = 5000, behindBlocks = false): Promise<void> {
  const res = await fetch(new URL(LAMBDA_PATH, info.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(behindBlocks ? { passOverheadMs, behindBlocks } : { passOverheadMs }), signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  if (res.status !== 200) throw new TidegateError("upstream_error", `engine ${info.instanceId} at ${info.url} refused ${LAMBDA_PATH}: ${res.status} ${text.slice(0, 200)}`);
}

/** KV bytes of one instance of (model, gpu, tp) (GPU memory × 0.9 − weights, core/models.ts), to scale vLLM's usage fraction. */
export function instanceKvBytes(model: string, gpu: string, tp: number, instanceId: string): number {
  const spec = MODEL_SPECS[model];
  const g = GPU_SPECS[gpu];
  if (spec === undefined || g === undefined) throw new TidegateError("invalid_config", `unknown model or GPU in ${instanceId}`);
  return kvCapacityBytes(spec, g, tp);
}

/** What `agentsOverGrpc` adds to its Region. */
export interface GrpcAgentsExtras {
  /** Adds the AgentRegistry service to the region's gRPC server (before it binds). */
  registry(server: grpc.Server): void;
}

/** Agents over gRPC: engine processes on remote node agents, reached at their URLs (file comment). */
export function agentsOverGrpc(o: { tls?: TlsFiles } = {}): EngineHost<AgentsActuator, GrpcAgentsExtras> {
  return {
    start: (ctx) => {
      const { config, region, clock, log } = ctx;
      // keystage.stageProcesses: a pipelined instance's head runs in this process over stage processes on the agents (stage-heads.ts).
      const heads = config.keystage?.stageProcesses === true ? new StageHeads({ config, clock, log }) : undefined;
      const actuator = agentsActuator(ctx, {
        ...(config.engines.commandTemplate === undefined ? {} : { commandTemplate: config.engines.commandTemplate }),
        healthy: (info) => (heads?.isHead(info) === true ? Promise.resolve(true) : httpHealthy(info)),
        roleOf: (info) => (heads?.isHead(info) === true ? Promise.resolve(undefined) : httpRole(info)),
        servePipelined: (info, _instanceId, passOverheadMs) => postLambda(info, passOverheadMs),
        serveBehindBlocks: (info) => postLambda(info, 0, undefined, true),
        connect: async (info, instanceId, role) => {
          const head = heads?.head(instanceId);
          if (head !== undefined) return head;
          const tp = gpusPerInstanceOf(config, info.model, info.gpu) ?? info.gpus;
          return new OpenAIHttpEngine({ instanceId, model: info.model, baseUrl: info.url, clock, kvBytesCapacity: instanceKvBytes(info.model, info.gpu, tp, instanceId), priorityField: config.engines.priorityField, log, ...(role === undefined ? {} : { role }) });
        },
      });
      const clients = new Map<string, AgentClient>();
      const onAnnounce = (a: NodeAnnouncement): AnnounceReply => {
        if (a.region !== "" && a.region !== region) return { known: false, message: `this is region ${region}; the agent says it belongs to ${a.region}` };
        let c = clients.get(a.nodeId);
        if (c === undefined || c.address !== a.grpcAddress) {
          c?.close();
          c = new AgentClient(a.grpcAddress, a.nodeId, o.tls);
          clients.set(a.nodeId, c);
        }
        if (heads === undefined) actuator.announce(c, a);
        else {
          actuator.announce(heads.wrap(c), heads.announce(c, a));
          heads.prune(new Set(actuator.instances().flatMap((i) => (i.state === "spot" ? [] : [i.id]))));
        }
        return { known: true, message: "" };
      };
      return {
        actuator,
        extras: { registry: (server: grpc.Server) => addAgentRegistryService(server, onAnnounce) },
        // Every live agent announces within a second: wait for all of them (and adopt their engines) before deploying.
        startupGraceMs: config.controller.agentLostAfterMs,
        ready: (timeoutMs) => untilConfiguredServe(ctx, timeoutMs),
        // Engines keep running on their agents: a restarted region adopts them.
        // Heads live in this process: they stop their stage processes (over the agent clients the actuator closes).
        close: async () => {
          await heads?.close();
          actuator.close();
        },
      };
    },
  };
}

/** In-process node agents: how many, how big, how often they announce. */
export interface InProcessAgentsOptions {
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
  /**
   * Paces every node's sends at this many bytes/s (NodeAgentOptions.paceBytesPerS): the nodes share this host's
   * CPUs, and a pace below what they get makes transfers progress as on equal links (default: unpaced).
   */
  paceBytesPerS?: number;
}

/** What `agentsInProcess` adds to its Region. */
export interface InProcessAgentsExtras {
  agents: InProcessAgent[];
}

/** In-process node agents hosting simulated engines (file comment). Its gateway reads exact stats (statsRefreshMs 0). */
export function agentsInProcess(o: InProcessAgentsOptions = {}): EngineHost<AgentsActuator, InProcessAgentsExtras> {
  return {
    // In-process engines report exact stats cheaply: read them at every decision, as the replays do.
    statsRefreshMs: 0,
    start: (ctx) => {
      const { config, region, clock, log } = ctx;
      const rc = config.regions.find((r) => r.name === region)!;
      const perNode = o.gpusPerNode ?? 8;
      const nodes: NodeAgent[] = [];
      const agents: InProcessAgent[] = [];
      const layout = o.nodes ?? rc.gpus.flatMap((g) => Array.from({ length: Math.ceil(g.count / perNode) }, (_, k) => ({ gpuType: g.type, slots: Math.min(perNode, g.count - k * perNode) })));
      // keystage.stageProcesses: a pipelined instance is a head (StagedPipelineEngine) over stage processes that
      // these agents spawn (engine-sim --stage), placed over every node by the head's key-stage scaler.
      const staged = config.keystage?.stageProcesses === true;
      // The KV of the region's prefill and decode engines (endpoints with a role) moves over one fabric, timed on the
      // clock as the data plane would move it (engines/sim/kv-fabric.ts); its pulls reach the region's metrics.
      const kvFabricFor = regionKvFabric(clock, ctx.metrics);
      // Each engine as engine-sim would build it from the StartEngine's fields; HiGHS for a live zigzag pairing.
      const build = (spec: EngineSpec, pipeline: Parameters<typeof newEngine>[1]["pipeline"]) =>
        staged && pipeline !== undefined
          ? new StagedPipelineEngine({ instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, gpus: spec.gpus, spec: pipeline, clock, timeScale: spec.timeScale ?? config.engines.timeScale, nodes: () => agents.map((a) => a.stageNode(spec.model)), log })
          : newEngine(
          { instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, tp: spec.gpus },
          { timeScale: spec.timeScale ?? config.engines.timeScale, ...(spec.settings === undefined ? {} : { settings: spec.settings }), ...(pipeline === undefined ? {} : { pipeline }) },
          clock,
          { solver: () => HighsSolver.create(), ...kvFabricFor(spec.settings?.role) },
        );
      try {
        const seen = new Map<string, number>();
        for (const n of layout) {
          const k = seen.get(n.gpuType) ?? 0;
          seen.set(n.gpuType, k + 1);
          const nodeId = `${region}-${n.gpuType}-${k}`;
          const { nvlinkDomain, linkBytesPerS } = n as { nvlinkDomain?: string; linkBytesPerS?: number };
          const links = { ...(nvlinkDomain === undefined ? {} : { nvlinkDomain }), ...(linkBytesPerS === undefined ? {} : { linkBytesPerS }) };
          const node = NodeAgent.open({ nodeId, dataHost: "127.0.0.1", dataPort: 0, transport: "tcp", memoryBytes: o.nodeMemoryBytes ?? 512 * 1024 * 1024, log: log.child({ node: nodeId }), ...links, ...(o.paceBytesPerS === undefined ? {} : { paceBytesPerS: o.paceBytesPerS }) });
          nodes.push(node);
          const stageProcesses = staged ? { stageProcesses: new EngineSupervisor({ engineHost: "127.0.0.1", parametersFrom: () => "", log: log.child({ node: nodeId }) }), headHoldsNoGpu: true } : {};
          agents.push(new InProcessAgent({ agent: node, region, gpuType: n.gpuType, gpuSlots: n.slots, clock, newEngine: build, ...stageProcesses }));
        }
      } catch (err) {
        void Promise.all(nodes.map((n) => n.close()));
        throw err;
      }
      /** The in-process agent hosting engine `instanceId` (its url names the node). */
      const agentOf = (info: EngineInfo, instanceId: string): InProcessAgent => {
        const a = agents.find((x) => info.url === `in-process://${x.nodeId}/${instanceId}`);
        if (a === undefined) throw new Error(`no in-process engine ${instanceId} (${info.url})`);
        return a;
      };
      const actuator = agentsActuator(ctx, {
        connect: async (info, instanceId) => {
          for (const a of agents) {
            const e = a.engine(instanceId);
            if (e !== undefined) return e;
          }
          throw new Error(`no in-process engine ${instanceId} (${info.url})`);
        },
        healthy: async (info) => agents.some((a) => a.engine(info.instanceId) !== undefined),
        roleOf: async (info) => agents.map((a) => a.engine(info.instanceId)).find((e) => e !== undefined)?.role,
        servePipelined: async (info, instanceId, passOverheadMs) => agentOf(info, instanceId).servePipelined(instanceId, passOverheadMs),
        serveBehindBlocks: async (info, instanceId) => agentOf(info, instanceId).serveBehindBlocks(instanceId),
      });
            const announceAll = () => {
        agents.forEach((a) => void a.announcement().then((ann) => actuator.announce(a, ann), (err: unknown) => log.warn("announcement failed", { node: a.nodeId, err })));
      };
      announceAll();
      const announcer: Timer = clock.every(o.announceIntervalMs ?? 1000, announceAll);
      return {
        actuator,
        extras: { agents },
        ready: (timeoutMs) => untilConfiguredServe(ctx, timeoutMs),
        close: async () => {
          announcer.cancel();
          actuator.close();
          await Promise.all(agents.map((a) => a.closeProcesses()));
          await Promise.all(nodes.map((n) => n.close()));
        },
      };
    },
  };
}
