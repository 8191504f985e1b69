/**
 * A scaling cluster of real processes for tests and the scale-out bench: one `tidegate region` in agents mode,
 * `tidegate agent`s announcing themselves to it (on loopback, or inside network namespaces made by the caller), and
 * optionally `tidegate global` in front. Targets go to the region over gRPC as the planner sends them; the admin
 * listing is read through the global router (or straight from the region link).
 */
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { WallClock } from "../../core/clock.js";
import type { RegionInstances, RegionTargets } from "../../core/ports.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import { freePort, spawnTidegate, type Proc } from "../e2e/procs.js";
import { spawnAgent, stopAgents, type AgentSpawn, type RunningAgent } from "../netns/agents.js";

export const ADMIN_KEY = "admin-key-for-tests";

/** What a cluster runs: its config (written to `dir`), the region's bind host and the agents to start. */
export interface ClusterSpec {
  dir: string;
  region: string;
  config: Record<string, unknown>;
  /** The region's gRPC host (agents must reach it; 127.0.0.1 on loopback, the host side of a veth otherwise). */
  regionHost?: string;
  agents: (AgentSpawn & { slots: number })[];
  announceIntervalMs?: number;
  withGlobal?: boolean;
  regionLogLevel?: string;
}

export class Cluster {
  region!: Proc;
  global: Proc | undefined;
  agents = new Map<string, RunningAgent>();
  link!: GrpcRegionLink;
  configFile!: string;
  regionAddress!: string;
  routerUrl = "";
  /** The region process's /metrics and /healthz server (http://host:port), from its start-up line. */
  regionMetricsUrl = "";
  private decisionId = 0;
  private readonly targets = new Map<string, RegionTargets["endpoints"][number]>();
  private lastListing: RegionInstances | undefined;

  constructor(readonly spec: ClusterSpec) {}

  async start(): Promise<void> {
    const host = this.spec.regionHost ?? "127.0.0.1";
    this.configFile = join(this.spec.dir, "cluster.json");
    // A port freePort() found free can be taken by another test file before the region binds it: try another.
    for (let attempt = 1; ; attempt++) {
      this.regionAddress = `${host}:${await freePort()}`;
      const cfg = structuredClone(this.spec.config) as { regions: { name: string; grpcAddress?: string }[] };
      for (const r of cfg.regions) if (r.name === this.spec.region) r.grpcAddress = this.regionAddress;
      writeFileSync(this.configFile, JSON.stringify(cfg, null, 2));
      try {
        await this.startRegion();
        break;
      } catch (err) {
        if (attempt >= 3 || !String(err).includes("EADDRINUSE")) throw err;
      }
    }
    await Promise.all(this.spec.agents.map((a) => this.startAgent(a)));
    if (this.spec.withGlobal === true) {
      this.global = await spawnTidegate("global", ["global", "--config", this.configFile, "--port", "0", "--log-level", "warn", "--telemetry-interval-ms", "200"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
      this.routerUrl = this.global.match[1]!;
    }
  }

  async startRegion(): Promise<void> {
    const port = this.regionAddress.slice(this.regionAddress.lastIndexOf(":") + 1);
    const host = this.regionAddress.slice(0, this.regionAddress.lastIndexOf(":"));
    this.region = await spawnTidegate(`region ${this.spec.region}`, ["region", "--config", this.configFile, "--region", this.spec.region, "--grpc-host", host, "--grpc-port", port, "--log-level", this.spec.regionLogLevel ?? "info"], /tidegate region \S+: grpc \S+ metrics (\S+)/);
    this.regionMetricsUrl = this.region.match[1]!;
    this.link?.close().catch(() => undefined);
    this.link = new GrpcRegionLink({ region: this.spec.region, address: this.regionAddress, telemetryIntervalMs: 200, clock: new WallClock() });
  }

  async startAgent(a: AgentSpawn & { slots: number }): Promise<RunningAgent> {
    const extra = ["--region", this.spec.region, "--gpu-slots", String(a.slots), "--region-address", this.regionAddress, "--announce-interval-ms", String(this.spec.announceIntervalMs ?? 300), ...(a.extraArgs ?? [])];
    const r = await spawnAgent({ ...a, extraArgs: extra });
    this.agents.set(a.nodeId, r);
    return r;
  }

  /**
   * Sets one endpoint's target and sends the whole plan (every endpoint targeted so far) with the next decisionId,
   * as the planner does; `resend()` sends the same plan again with a new id (a region that came back).
   */
  async target(model: string, gpu: string, instances: number): Promise<void> {
    this.targets.set(`${model}/${gpu}`, { model, gpu, instances, forecastTokensPerS: 0 });
    await this.resend();
  }

  async resend(): Promise<void> {
    const t: RegionTargets = { decisionId: ++this.decisionId, region: this.spec.region, madeAtMs: Date.now(), advisory: false, endpoints: [...this.targets.values()] };
    const ack = await this.link.sendTargets(t);
    if (!ack.accepted) throw new Error(`targets ${t.decisionId} refused: ${JSON.stringify(ack)}`);
  }

  /** The region's listing: through the global router's admin endpoint when one runs, else the link. */
  async listing(): Promise<RegionInstances> {
    if (this.routerUrl !== "") {
      const res = await fetch(`${this.routerUrl}/admin/regions/${this.spec.region}/instances`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      if (res.status !== 200) throw new Error(`admin listing: ${res.status} ${await res.text()}`);
      return (await res.json()) as RegionInstances;
    }
    return this.link.instances();
  }

  /** Waits until `model` has exactly `n` serving instances (and nothing deploying). */
  async serving(model: string, n: number, timeoutMs = 60_000): Promise<RegionInstances> {
    return waitFor(`${n} serving ${model}`, async () => {
      const l = await this.listing().catch(() => undefined);
      if (l === undefined) return undefined;
      this.lastListing = l;
      const mine = l.instances.filter((i) => i.model === model);
      const busy = mine.some((i) => i.state === "provisioning" || i.state === "loading" || i.state === "draining");
      return mine.filter((i) => i.state === "serving").length === n && !busy ? l : undefined;
    }, timeoutMs, () => `${JSON.stringify(this.lastListing)}\n${this.region.output().slice(-6000)}`);
  }

  /** The region's JSON log lines with `msg`. */
  logLines<T = Record<string, unknown>>(msg: string): T[] {
    return this.region
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{") && l.includes(`"msg":"${msg}"`))
      .map((l) => JSON.parse(l) as T);
  }

  async stop(): Promise<void> {
    await this.link?.close().catch(() => undefined);
    await this.global?.stop();
    await this.region?.stop();
    await stopAgents([...this.agents.values()]);
  }
}

/** Polls `fn` every 50 ms until it returns a value; throws after `timeoutMs` with `context()` in the message. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000, context?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${context === undefined ? "" : `\n${context()}`}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Live processes whose command line contains every string of `parts` (Linux /proc): pid → command line. */
export function processesWith(...parts: string[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ");
      if (parts.every((p) => cmd.includes(p))) out.set(Number(entry), cmd);
    } catch {
      // exited while we looked
    }
  }
  return out;
}
