// Engines on a node agent and the node's announcement: real `tidegate agent` processes from dist/, a registry
// server started here, engine processes checked in the process table (/proc).
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENGINE_SETTINGS_SCHEMA, ENGINE_SETTING_KEYS, type EngineSettings } from "../../core/engine-settings.js";
import { isTidegateError } from "../../core/errors.js";
import { repoRoot } from "../../core/paths.js";
import { spawnAgent, stopAgents, type RunningAgent } from "../../test/netns/agents.js";
import type { EngineInfo, NodeAnnouncement } from "./handle.js";
import { addAgentRegistryService } from "./agent-registry.js";

const MODEL = "llama3.1-8b"; // engine-sim has a profile for it on h100-80gb at tp 2
const GPU = "h100-80gb";
const STORE = { model: MODEL, totalBytes: 1 << 20, blockCount: 4 };

let registry: grpc.Server;
let registryAddress = "";
const announcements: NodeAnnouncement[] = [];
let agent: RunningAgent;

/** Polls `fn` every 25 ms until it returns a value other than undefined; throws after `ms`. */
async function until<T>(what: string, fn: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Pid, parent pid and process group of every process in /proc. */
function processTable(): { pid: number; ppid: number; pgid: number; state: string }[] {
  const out: { pid: number; ppid: number; pgid: number; state: string }[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.push({ pid: Number(d), state: rest[0]!, ppid: Number(rest[1]), pgid: Number(rest[2]) });
    } catch {
      // exited while listing
    }
  }
  return out;
}

/** Live (not zombie) processes whose pid or process group is in `ids`. */
function alive(ids: number[]): number[] {
  return processTable()
    .filter((p) => p.state !== "Z" && (ids.includes(p.pid) || ids.includes(p.pgid)))
    .map((p) => p.pid);
}

async function errorOf(p: Promise<unknown>): Promise<Error> {
  const r = await p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  if (r === undefined) throw new Error("expected a rejection");
  return r;
}

/** The gRPC status code under a client error (AgentClient keeps the ServiceError as cause). */
function grpcCode(err: Error): number | undefined {
  return (err.cause as grpc.ServiceError | undefined)?.code;
}

beforeAll(async () => {
  registry = new grpc.Server();
  addAgentRegistryService(registry, (a) => {
    announcements.push(a);
    return { known: false, message: `node ${a.nodeId} is not adopted yet` };
  });
  const port = await new Promise<number>((resolve, reject) => registry.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  registryAddress = `127.0.0.1:${port}`;
  agent = await spawnAgent({
    nodeId: "e1",
    host: "127.0.0.1",
    extraArgs: ["--region", "test-east", "--gpu-type", GPU, "--gpu-slots", "3", "--region-address", registryAddress, "--announce-interval-ms", "100"],
  });
});

afterAll(async () => {
  await stopAgents(agent === undefined ? [] : [agent]);
  registry?.forceShutdown();
});

describe("node announcement", () => {
  it("reaches the region's registry every interval with the node's identity, slots and stores", async () => {
    const first = await until("an announcement", () => announcements.find((a) => a.nodeId === "e1"));
    expect(first).toMatchObject({ nodeId: "e1", grpcAddress: agent.grpc, dataHost: "127.0.0.1", dataPort: agent.data.port, transport: "tcp", region: "test-east", gpuType: GPU, gpuSlots: 3, engines: [] });
    const before = Date.now();
    await agent.client.load({ model: "m-announce", totalBytes: 4096, blockCount: 2, fill: "pattern", seed: 1 });
    const withStore = await until("an announcement with the store", () => announcements.find((a) => a.stores.some((s) => s.model === "m-announce")));
    expect(withStore.stores.find((s) => s.model === "m-announce")).toEqual({ model: "m-announce", blockCount: 2, totalBytes: 4096, present: 2, lastUsedMs: expect.any(Number) });
    expect(withStore.stores[0]!.lastUsedMs).toBeGreaterThanOrEqual(before - 5);
    // The region answered known=false: the agent logs its message once, not every interval.
    await until("several announcements", () => (announcements.length >= 4 ? true : undefined));
    expect(agent.stderr.filter((l) => l.includes("is not adopted yet"))).toHaveLength(1);
    await agent.client.drop("m-announce");
  });

  it("Info returns the same announcement", async () => {
    const info = await agent.client.info();
    expect(info).toMatchObject({ nodeId: "e1", grpcAddress: agent.grpc, region: "test-east", gpuType: GPU, gpuSlots: 3 });
  });
});

describe("a region restart", () => {
  it("the agent logs once that the region is unreachable and once that it is back; its engines keep running and are announced", async () => {
    const seen: NodeAnnouncement[] = [];
    const serve = async (port: number) => {
      const s = new grpc.Server();
      addAgentRegistryService(s, (a) => {
        seen.push(a);
        return { known: true, message: "" };
      });
      const bound = await new Promise<number>((resolve, reject) => s.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
      return { s, port: bound };
    };
    let region = await serve(0);
    const a = await spawnAgent({ nodeId: "r1", host: "127.0.0.1", extraArgs: ["--gpu-slots", "1", "--region-address", `127.0.0.1:${region.port}`, "--announce-interval-ms", "50", "--log-level", "info"] });
    try {
      await a.client.load({ ...STORE, fill: "pattern", seed: 2 });
      const e = await a.client.startEngine({ instanceId: "r-sleep", model: MODEL, gpu: GPU, gpus: 1, commandTemplate: "sleep 30" });
      await until("the engine in an announcement", () => seen.find((x) => x.engines.some((g) => g.instanceId === "r-sleep")));
      const logged = (msg: string) => a.stderr.filter((l) => (JSON.parse(l) as { msg: string }).msg === msg).length;
      expect(logged("announced to region")).toBe(1);

      region.s.forceShutdown();
      await until("the unreachable log line", () => (logged("region unreachable; announcing again every interval") > 0 ? true : undefined));
      await new Promise((r) => setTimeout(r, 300)); // several failed intervals: still one line
      expect(logged("region unreachable; announcing again every interval")).toBe(1);
      const before = seen.length;
      region = await serve(region.port);
      const back = await until("an announcement after the restart", () => seen.slice(before).find((x) => x.engines.length > 0), 10_000);
      expect(back.engines).toEqual([expect.objectContaining({ instanceId: "r-sleep", pid: e.pid, state: "starting" })]);
      expect(alive([e.pid])).toContain(e.pid);
      await until("the reachable-again log line", () => (logged("region reachable again") > 0 ? true : undefined));
      await new Promise((r) => setTimeout(r, 200));
      expect(logged("region reachable again")).toBe(1);
      expect(logged("region unreachable; announcing again every interval")).toBe(1);
    } finally {
      await stopAgents([a]);
      region.s.forceShutdown();
    }
  });
});

describe("engines on the agent", () => {
  it("refuses an engine when the model has no store, or an incomplete one (FAILED_PRECONDITION)", async () => {
    const spec = { instanceId: "i-nostore", model: "llama3.2-3b", gpu: GPU, gpus: 1 };
    const missing = await errorOf(agent.client.startEngine(spec));
    expect(isTidegateError(missing, "conflict"), String(missing)).toBe(true);
    expect(grpcCode(missing)).toBe(grpc.status.FAILED_PRECONDITION);
    expect(missing.message).toMatch(/cannot start i-nostore: model llama3\.2-3b has no block store on node e1/);
    await agent.client.load({ model: "llama3.2-3b", totalBytes: 4096, blockCount: 4, fill: "empty" });
    const partial = await errorOf(agent.client.startEngine(spec));
    expect(isTidegateError(partial, "conflict"), String(partial)).toBe(true);
    expect(partial.message).toMatch(/model llama3\.2-3b on node e1 has 0 of 4 blocks; an engine starts only on complete, verified blocks/);
    await agent.client.load({ model: "llama3.2-3b", totalBytes: 4096, blockCount: 4, fill: "pattern", seed: 1 });
    const wrongGpu = await errorOf(agent.client.startEngine({ ...spec, gpu: "a100-80gb" }));
    expect(isTidegateError(wrongGpu, "conflict"), String(wrongGpu)).toBe(true);
    expect(wrongGpu.message).toMatch(/cannot start i-nostore: it asks for a100-80gb GPUs and node e1 has h100-80gb/);
    await agent.client.drop("llama3.2-3b");
    expect((await agent.client.info()).engines).toEqual([]);
  });

  it("rejects an unknown placeholder in a command template", async () => {
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const err = await errorOf(agent.client.startEngine({ instanceId: "i-tpl", model: MODEL, gpu: GPU, gpus: 1, commandTemplate: "vllm serve {model} --port {prot}" }));
    expect(isTidegateError(err, "invalid_request"), String(err)).toBe(true);
    expect(grpcCode(err)).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.message).toMatch(/unknown placeholder \{prot\}/);
  });

  it("starts engine-sim on a complete pattern-filled store: /health reports its parameters; slots are accounted; StopEngine stops it", async () => {
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const askedAtMs = Date.now();
    const e = await agent.client.startEngine({ instanceId: "i-sim", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1 });
    expect(e).toMatchObject({ instanceId: "i-sim", model: MODEL, gpu: GPU, gpus: 2, state: "running", detail: "" });
    expect(e.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(alive([e.pid])).toContain(e.pid);
    const health = (await (await fetch(`${e.url}/health`)).json()) as unknown;
    expect(health).toEqual({ status: "ok", parameters: { model: MODEL, bytes: STORE.totalBytes, blocks: STORE.blockCount } });

    // The same instance id while it runs: the existing engine.
    const again = await agent.client.startEngine({ instanceId: "i-sim", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1 });
    expect(again).toMatchObject({ pid: e.pid, url: e.url, state: "running" });
    // 3 slots, 2 used: 2 more do not fit (RESOURCE_EXHAUSTED), naming what runs.
    const full = await errorOf(agent.client.startEngine({ instanceId: "i-big", model: MODEL, gpu: GPU, gpus: 2 }));
    expect(isTidegateError(full, "resource_exhausted"), String(full)).toBe(true);
    expect(grpcCode(full)).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(full.message).toMatch(/cannot start i-big: it needs 2 GPU\(s\) and node e1 has 1 of 3 free \(i-sim: 2\)/);
    const listed = (await agent.client.info()).engines;
    expect(listed).toEqual([expect.objectContaining({ instanceId: "i-sim", pid: e.pid, state: "running" })]);
    expect((await agent.client.info()).stores.find((s) => s.model === MODEL)!.lastUsedMs).toBeGreaterThanOrEqual(askedAtMs - 5);
    // (The agent stamps the store when the start request arrives, before it spawns: so not against e.startedAtMs.)

    // Its blocks cannot be dropped or replaced while it runs.
    const drop = await errorOf(agent.client.drop(MODEL));
    expect(isTidegateError(drop, "conflict"), String(drop)).toBe(true);
    expect(drop.message).toMatch(/model llama3\.1-8b on node e1 serves engine\(s\) i-sim; stop them before replacing or dropping its blocks/);
    await expect(agent.client.load({ ...STORE, fill: "empty" })).rejects.toThrow(/serves engine\(s\) i-sim/);

    const stopped = await agent.client.stopEngine("i-sim", 2000);
    expect(stopped).toMatchObject({ instanceId: "i-sim", pid: e.pid, state: "exited" });
    expect(stopped!.detail).toMatch(/^stopped; exited with code 0/);
    expect(alive([e.pid])).toEqual([]);
    // Its slots are free again, and an unknown id is NOT_FOUND (undefined through the handle).
    expect(await agent.client.stopEngine("no-such-engine", 100)).toBeUndefined();
    const big = await errorOf(agent.client.startEngine({ instanceId: "i-big", model: MODEL, gpu: GPU, gpus: 4 }));
    expect(big.message).toMatch(/has 3 of 3 free \(no engines\)/);
  });

  it("passes the region's engine-sim settings from StartEngine as its --settings: preemption, batch slots beside, block size, host KV tier", async () => {
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const e = await agent.client.startEngine({ instanceId: "i-flags", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1, settings: { preemption: "swap", batchSlotsBeside: 0, prefixBlockTokens: 32, hostKvCacheGiB: 0 } });
    expect(e).toMatchObject({ instanceId: "i-flags", state: "running" });
    try {
      const argv = readFileSync(`/proc/${e.pid}/cmdline`, "utf8").split("\0");
      const flag = (name: string) => argv[argv.indexOf(name) + 1];
      expect(JSON.parse(flag("--settings")!)).toEqual({ preemption: "swap", batchSlotsBeside: 0, prefixBlockTokens: 32, hostKvCacheGiB: 0 });
      // The engine runs with them: a prompt is looked up in its prefix cache, and with the host tier off no host counter exists.
      const res = await fetch(`${e.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "x".repeat(400), max_tokens: 2 }) });
      expect(res.status).toBe(200);
      const metrics = await (await fetch(`${e.url}/metrics`)).text();
      expect(metrics).toMatch(/^vllm:prefix_cache_queries_total\{[^}]*\} [1-9]/m);
      expect(metrics).not.toMatch(/tidegate_host_kv_cache_queries_total/);
    } finally {
      // Stopped whatever the checks found, so a failure here does not hold the node's slots for the tests after it.
      await agent.client.stopEngine("i-flags", 2000);
    }
    // Without them engine-sim runs its defaults: no --settings is passed.
    const plain = await agent.client.startEngine({ instanceId: "i-plain", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1 });
    try {
      const plainArgv = readFileSync(`/proc/${plain.pid}/cmdline`, "utf8").split("\0");
      expect(plainArgv.filter((a) => a === "--settings" || Object.values(ENGINE_SETTINGS_SCHEMA).some((s) => a === `--${s.flag}`))).toEqual([]);
    } finally {
      await agent.client.stopEngine("i-plain", 2000);
    }
  });

  it("carries every field of the engine-settings schema, as written, to the engine-sim it starts over gRPC (its /health answers them)", async () => {
    // Built from the schema (core/engine-settings.ts), not from a list here: a field added there is checked on this
    // whole path (AgentClient → proto → agent → engine-supervisor's --settings → engine-sim) with no edit to it.
    // `role` came that way: two files, core/engine-settings.ts (the field and its rules) and engines/sim/http.ts (what
    // the engine does with it); the config, StartEngine, the agent's checks, the supervisor and engine-sim's flags
    // took it unchanged.
    const settings = Object.fromEntries(ENGINE_SETTING_KEYS.map((k) => [k, ENGINE_SETTINGS_SCHEMA[k].example]));
    expect(Object.keys(settings).length).toBeGreaterThanOrEqual(6);
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const e = await agent.client.startEngine({ instanceId: "i-schema", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1, settings });
    try {
      const health = (await (await fetch(`${e.url}/health`)).json()) as { status: string; settings?: unknown };
      expect(health).toMatchObject({ status: "ok", settings });
      expect(health.settings).toEqual(settings);
    } finally {
      await agent.client.stopEngine("i-schema", 2000);
    }
  });

  it("carries a setting planted in the schema alone (a copy of the build, one entry added to core/engine-settings.js) to the engine-sim it starts", async () => {
    // The fixture: a setting no code knows, added in one place. Reaching engine-sim's /health through the agent's
    // gRPC StartEngine, its checks, the supervisor's --settings and engine-sim's parsing needs that file and no other;
    // an engine that acts on it adds the code that does (engines/sim/, the second file `role` needed).
    const root = mkdtempSync(join(tmpdir(), "tidegate-planted-setting-"));
    try {
      const repo = repoRoot();
      cpSync(join(repo, "dist"), join(root, "dist"), { recursive: true });
      cpSync(join(repo, "package.json"), join(root, "package.json"));
      // What the build reads from beside dist/ at run time: the protocol files and the data plane's addon.
      for (const file of ["nodes/proto/agent.proto", "region/proto/region.proto", "native/build/Release/tidegate_dataplane.node"]) {
        mkdirSync(dirname(join(root, file)), { recursive: true });
        cpSync(join(repo, file), join(root, file));
      }
      symlinkSync(join(repo, "node_modules"), join(root, "node_modules"));
      const schemaFile = join(root, "dist", "core", "engine-settings.js");
      const anchor = "export const ENGINE_SETTINGS_SCHEMA = {";
      const src = readFileSync(schemaFile, "utf8");
      expect(src).toContain(anchor);
      writeFileSync(schemaFile, src.replace(anchor, `${anchor}\n    plantedKnob: { kind: "integer", min: 0, max: 100, flag: "planted-knob", help: "planted by a test", example: 42, config: true },`));
      const settings = { plantedKnob: 42 } as unknown as EngineSettings;
      const planted = await spawnAgent({ nodeId: "e-planted", host: "127.0.0.1", cli: join(root, "dist", "bin", "tidegate.js"), extraArgs: ["--gpu-type", GPU, "--gpu-slots", "2"] });
      try {
        await planted.client.load({ ...STORE, fill: "pattern", seed: 5 });
        const e = await planted.client.startEngine({ instanceId: "i-planted", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1, settings });
        const health = (await (await fetch(`${e.url}/health`)).json()) as { settings?: unknown };
        expect(health.settings).toEqual({ plantedKnob: 42 });
        await planted.client.stopEngine("i-planted", 2000);
      } finally {
        await stopAgents([planted]);
      }
      // The build without the entry refuses the setting: the schema is what carried it.
      const refused = await errorOf(agent.client.startEngine({ instanceId: "i-unplanted", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1, settings }));
      expect(refused.message).toMatch(/plantedKnob/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("starts engine-sim as a pipeline of stages when StartEngine carries one; a pipeline its GPUs cannot hold is refused", async () => {
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const pipeline = JSON.stringify({ layersPerStage: [20, 12], profileTp: 2, mode: "key-stage", params: { intervalMs: 200 } });
    const e = await agent.client.startEngine({ instanceId: "i-pipe", model: MODEL, gpu: GPU, gpus: 3, timeScale: 0.1, pipeline });
    expect(e).toMatchObject({ instanceId: "i-pipe", gpus: 3, state: "running" });
    const status = (await (await fetch(`${e.url}/tidegate/keystage`)).json()) as { mode: string; budgetGpus: number; stages: { layers: number; replicas: number }[] };
    expect(status).toMatchObject({ mode: "key-stage", budgetGpus: 3, stages: [{ layers: 20, replicas: 1 }, { layers: 12, replicas: 1 }] });
    const res = await fetch(`${e.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "hi", max_tokens: 3 }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
    expect(await (await fetch(`${e.url}/metrics`)).text()).toMatch(/tidegate_pipeline_stage_replicas\{model_name="llama3\.1-8b",stage="1",state="serving"\} 1/);
    await agent.client.stopEngine("i-pipe", 2000);

    // 2 stages need 2 GPUs: engine-sim refuses the spec at start-up, naming the flag; the agent reports it exited.
    const bad = await agent.client.startEngine({ instanceId: "i-pipe1", model: MODEL, gpu: GPU, gpus: 1, timeScale: 0.1, pipeline }).then(
      (info) => info.detail,
      (err: Error) => err.message,
    );
    expect(bad).toMatch(/--pipeline: an instance of 1 GPUs cannot hold 2 stages/);
    await agent.client.stopEngine("i-pipe1", 100).catch(() => undefined);
  });

  it("starts one stage replica as its own engine-sim --stage process when StartEngine carries `stage`", async () => {
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const stage = JSON.stringify({ layersPerStage: [20, 12], profileTp: 2, stage: 1, loadMs: 0, windowMs: 10_000 });
    const e = await agent.client.startEngine({ instanceId: "stage/i-st/1/0", model: MODEL, gpu: GPU, gpus: 1, timeScale: 0.1, stage });
    expect(e).toMatchObject({ instanceId: "stage/i-st/1/0", gpus: 1, state: "running" });
    expect((await fetch(`${e.url}/health`)).status).toBe(200);
    // The last stage takes hidden (4096) × 2 bytes × tokens of activations and answers with the tokens.
    const res = await fetch(`${e.url}/tidegate/stage/run`, { method: "POST", headers: { "x-tidegate-stage": JSON.stringify({ id: "r", seed: 7, promptTokens: 10, outputTokens: 3, next: [] }) }, body: new Uint8Array(4096 * 2 * 13) });
    expect(res.status).toBe(200);
    expect((await res.text()).trim().split("\n")).toHaveLength(4);
    expect(((await (await fetch(`${e.url}/tidegate/stage`)).json()) as { stage: number; served: number })).toMatchObject({ stage: 1, served: 1 });
    await agent.client.stopEngine("stage/i-st/1/0", 2000);
    // A stage process is engine-sim on a complete store: not beside a pipeline.
    const both = await errorOf(agent.client.startEngine({ instanceId: "stage/i-st/1/1", model: MODEL, gpu: GPU, gpus: 1, stage, pipeline: JSON.stringify({ layersPerStage: [20, 12], profileTp: 2 }) }));
    expect(both.message).toMatch(/a stage process is engine-sim on a complete store/);
  });

  it("a template engine that exits at once becomes exited with its exit code and stderr", async () => {
    await agent.client.load({ ...STORE, fill: "pattern", seed: 5 });
    const e = await agent.client.startEngine({ instanceId: "i-boom", model: MODEL, gpu: GPU, gpus: 1, commandTemplate: "sh -c 'echo boom {instance} on {port} >&2; exit 3'" });
    expect(e.state === "starting" || e.state === "exited").toBe(true);
    const port = e.url.slice(e.url.lastIndexOf(":") + 1);
    const exited = await until("i-boom to exit", async () => (await agent.client.info()).engines.find((x) => x.instanceId === "i-boom" && x.state === "exited"));
    expect(exited.detail).toBe(`exited with code 3; stderr:\nboom i-boom on ${port}`);
    // A command that cannot be spawned exits too, saying why.
    await agent.client.startEngine({ instanceId: "i-missing", model: MODEL, gpu: GPU, gpus: 1, commandTemplate: "/nonexistent/engine --port {port}" });
    const missing = await until("i-missing to exit", async () => (await agent.client.info()).engines.find((x) => x.instanceId === "i-missing" && x.state === "exited"));
    expect(missing.detail).toMatch(/^cannot start \/nonexistent\/engine: spawn \/nonexistent\/engine ENOENT/);
    // An exited engine holds no slot.
    const s = await agent.client.startEngine({ instanceId: "i-sleep", model: MODEL, gpu: GPU, gpus: 3, commandTemplate: "sleep 30" });
    expect(s.state).toBe("starting");
    expect(alive([s.pid])).toContain(s.pid);
    const stopped = await agent.client.stopEngine("i-sleep", 200);
    expect(stopped!.detail).toBe("stopped; killed by SIGTERM");
    expect(alive([s.pid])).toEqual([]);
  });

  it("engine-sim --parameters-from exits 1 naming the model and the agent when the store is incomplete", async () => {
    await agent.client.load({ ...STORE, fill: "empty" });
    const cli = join(repoRoot(), "dist", "bin", "tidegate.js");
    const child = spawn(process.execPath, [cli, "engine-sim", "--model", MODEL, "--gpu", GPU, "--tp", "2", "--port", "0", "--parameters-from", agent.grpc], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    let stdout = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr.trim()).toBe(`engine-sim: model ${MODEL} on agent e1 (${agent.grpc}) has 0 of 4 blocks; refusing to start on incomplete parameters`);
  });
});

describe("engines die with their agent", () => {
  it("kill -9 of the agent leaves no engine process (engine-sim, and a template with a child of its own)", async () => {
    const a = await spawnAgent({ nodeId: "e2", host: "127.0.0.1", extraArgs: ["--gpu-slots", "4"] });
    let engines: EngineInfo[] = [];
    try {
      await a.client.load({ ...STORE, fill: "pattern", seed: 9 });
      engines = [
        await a.client.startEngine({ instanceId: "k-sim", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1 }),
        await a.client.startEngine({ instanceId: "k-sh", model: MODEL, gpu: GPU, gpus: 1, commandTemplate: "sh -c 'sleep 60 & sleep 60'" }),
      ];
      const pids = engines.map((e) => e.pid);
      expect(engines.map((e) => e.state)).toEqual(["running", "starting"]);
      // Each engine leads its own process group; the shell's background sleep is in it too.
      await until("the shell's two sleeps", () => (processTable().filter((p) => p.pgid === pids[1]).length >= 3 ? true : undefined));
      // Each engine's parent is its keeper, whose parent is the agent.
      const keepers = processTable().filter((p) => pids.includes(p.pid)).map((p) => p.ppid);
      expect(processTable().filter((p) => keepers.includes(p.pid)).map((p) => p.ppid)).toEqual([a.proc.pid, a.proc.pid]);
      expect(alive([...pids, ...keepers]).length).toBeGreaterThanOrEqual(5);

      a.proc.kill("SIGKILL");
      await until("every engine, its children and its keeper to be gone", () => (alive([...pids, ...keepers]).length === 0 ? true : undefined), 15_000);
    } finally {
      await stopAgents([a]);
    }
  });

  it("SIGTERM to the agent stops its engines before it exits", async () => {
    const a = await spawnAgent({ nodeId: "e3", host: "127.0.0.1", extraArgs: ["--gpu-slots", "2"] });
    await a.client.load({ ...STORE, fill: "pattern", seed: 9 });
    const e = await a.client.startEngine({ instanceId: "t-sim", model: MODEL, gpu: GPU, gpus: 2, timeScale: 0.1 });
    expect(alive([e.pid])).toContain(e.pid);
    const exited = new Promise<number | null>((resolve) => a.proc.once("exit", (c) => resolve(c)));
    a.proc.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(alive([e.pid])).toEqual([]);
    a.client.close();
  });
});
