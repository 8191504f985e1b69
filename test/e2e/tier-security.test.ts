/**
 * Security between tiers (issue 15 item 8), over real processes: `tidegate global`, `tidegate region r1` in agents
 * mode and one `tidegate agent`, every gRPC link with mutual TLS from one CA (certificates made here by openssl).
 * - A client holding a certificate from another CA, or none, is refused by the region's gRPC service and by the
 *   agent's; the same calls with the tiers' certificate succeed.
 * - API keys scoped to a tenant, to models and to regions are enforced on every route: streaming and plain
 *   completions (a model outside the key's scope; a region header outside the key's `regions`), files (list,
 *   retrieve, content, delete) and batches (create from another tenant's file, or with a model outside the scope;
 *   list, retrieve, cancel): a tenant never sees another tenant's file or batch
 *   (404, as if it did not exist); a key's `region` is its home region (routed there first; a header may name
 *   another); admin routes refuse non-admin keys.
 * - No API key, admin key, PEM block or private-key material appears in any process's output (every line, debug
 *   level).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI, { toFile } from "openai";
import { AgentClient } from "../../nodes/agent/client.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import type { TlsFiles } from "../../core/tls.js";
import { chatJsonl, pollBatch } from "../batch/harness.js";
import { hasOpenssl, makeTestCa, opensslMissing } from "../helpers/certs.js";
import { freePort, spawnTidegate, stopAll, type Proc } from "./procs.js";

const MODEL = "llama3.2-3b";
const OTHER_MODEL = "llama3.1-8b";
const ADMIN = "admin-key-3f1d0c9b7a";
/** Keep every character a process writes: the log check reads all of it. */
const ALL = 64 * 1024 * 1024;
const KEYS = { a: "sk-tenant-a-5e8c1f2d", b: "sk-tenant-b-9a7b3c4e", scoped: "sk-tenant-c-only-8b-77d1", east: "sk-tenant-d-r1-0c4f6a", resident: "sk-tenant-e-in-r1-3b9e" };

const dir = mkdtempSync(join(tmpdir(), "tidegate-tier-security-"));
const procs: Proc[] = [];
let routerUrl = "";
let grpcAddress = "";
let agentAddress = "";
let tier: TlsFiles;
let intruder: TlsFiles;
let keyMaterial: string[] = [];

afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

beforeAll(async () => {
  if (!hasOpenssl) return;
  const ca = makeTestCa(dir, "tier-ca");
  const other = makeTestCa(dir, "other-ca");
  // 127.0.0.1 is the region's address; agents are dialled by address but checked against the name tidegate-agent.
  const sans = "IP:127.0.0.1,DNS:tidegate-agent";
  tier = { caFile: ca.caFile, ...ca.issue("tier", sans) };
  intruder = { caFile: ca.caFile, ...other.issue("intruder", sans) };
  // The base64 body of every private key and certificate made here: none of it may reach a log.
  keyMaterial = [tier.keyFile, tier.certFile, intruder.keyFile, join(dir, "tier-ca.key")].map((f) => readFileSync(f, "utf8").split("\n")[1]!.trim());
  const tls = ["--tls-ca", tier.caFile, "--tls-cert", tier.certFile, "--tls-key", tier.keyFile];
  const [grpc, unused] = [await freePort(), await freePort()];
  grpcAddress = `127.0.0.1:${grpc}`;
  const config = join(dir, "fleet.json");
  writeFileSync(
    config,
    JSON.stringify({
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }, { name: OTHER_MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [
        { name: "r1", grpcAddress, gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 }] },
        // Never started: there so OTHER_MODEL is hosted somewhere (a key can be scoped to it).
        {
          name: "r2", grpcAddress: `127.0.0.1:${unused}`, gpus: [{ type: "h100-80gb", count: 4 }],
          endpoints: [MODEL, OTHER_MODEL].map((model) => ({ model, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 })),
        },
      ],
      router: {
        adminKeys: [ADMIN],
        apiKeys: [
          { key: KEYS.a, tenant: "a" },
          { key: KEYS.b, tenant: "b" },
          { key: KEYS.scoped, tenant: "c", models: [OTHER_MODEL] },
          { key: KEYS.east, tenant: "d", region: "r1" },
          { key: KEYS.resident, tenant: "e", regions: ["r1"] },
        ],
      },
      queue: { dataDir: join(dir, "queue") },
      controller: { actuator: "agents", reconcileIntervalMs: 250, agentLostAfterMs: 3000 },
      engines: { timeScale: 0.05, startTimeoutMs: 30_000 },
      parameters: { blockCount: 4, models: { [MODEL]: { bytes: 1 << 20, seed: 3 }, [OTHER_MODEL]: { bytes: 1 << 20, seed: 4 } } },
    }),
  );
  procs.push(await spawnTidegate("region", ["region", "--config", config, "--region", "r1", ...tls, "--tls-server-name", "tidegate-agent", "--log-level", "debug"], /tidegate region r1: grpc/, 60_000, ALL));
  const agent = await spawnTidegate("agent", ["agent", "--node-id", "n1", "--region", "r1", "--region-address", grpcAddress, "--gpu-slots", "4", "--transport", "tcp", "--announce-interval-ms", "300", ...tls, "--tls-server-name", "tidegate-agent", "--log-level", "debug"], /grpc (\S+) data .*metrics (http:\/\/\S+)/, 60_000, ALL);
  procs.push(agent);
  agentAddress = agent.match[1]!;
  const global = await spawnTidegate("global", ["global", "--config", config, "--port", "0", ...tls, "--telemetry-interval-ms", "250", "--log-level", "debug"], /serving (http:\/\/\S+) /, 60_000, ALL);
  procs.push(global);
  routerUrl = global.match[1]!;
  const deadline = Date.now() + 90_000;
  for (;;) {
    const h = (await (await fetch(`${routerUrl}/healthz`)).json()) as { regions: Record<string, { available: boolean }> };
    if (h.regions.r1?.available === true) break;
    if (Date.now() > deadline) throw new Error(`r1 never available at the router\n${procs.map((p) => p.output()).join("\n")}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}, 150_000);

const as = (key: string) => new OpenAI({ apiKey: key, baseURL: `${routerUrl}/v1`, maxRetries: 0 });

/** The status and OpenAI-style error code of a failed call (or "ok"). */
async function failure(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (err) {
    if (err instanceof OpenAI.APIError) return `${err.status} ${(err.error as { code?: string } | undefined)?.code ?? ""}`.trim();
    throw err;
  }
}

if (opensslMissing !== undefined) it.skip(`security between tiers (mutual TLS): ${opensslMissing}`, () => undefined);

describe.skipIf(!hasOpenssl)("security between tiers (real processes, mutual TLS)", () => {
  it("refuses gRPC clients with a certificate from another CA, or none, at the region and at the agent", async () => {
    const link = (tls?: TlsFiles) => new GrpcRegionLink({ region: "r1", address: grpcAddress, ...(tls === undefined ? {} : { tls }), targetsTimeoutMs: 3000 });
    const good = link(tier);
    expect((await good.instances()).instances.length).toBeGreaterThan(0);
    await good.close();
    for (const who of [intruder, undefined]) {
      const bad = link(who);
      await expect(bad.instances()).rejects.toThrow();
      await bad.close();
    }
    const agent = (tls?: TlsFiles) => new AgentClient(agentAddress, "n1", tls === undefined ? undefined : { ...tls, serverName: "tidegate-agent" });
    const okAgent = agent(tier);
    expect((await okAgent.info()).nodeId).toBe("n1");
    okAgent.close();
    for (const who of [intruder, undefined]) {
      const bad = agent(who);
      await expect(Promise.race([bad.info(), new Promise((_, rej) => setTimeout(() => rej(new Error("no answer in 5 s")), 5000))])).rejects.toThrow();
      bad.close();
    }
  }, 60_000);

  it("enforces API keys' tenant, model and region scope on streaming, files and batches; admin routes want an admin key", async () => {
    // Streaming: in scope works; a model outside the key's scope, no key and a wrong key do not.
    const stream = await as(KEYS.a).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4, stream: true });
    let chunks = 0;
    for await (const _ of stream) chunks++;
    expect(chunks).toBeGreaterThan(0);
    expect(await failure(as(KEYS.scoped).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4, stream: true }))).toBe("403 forbidden");
    expect(await failure(as(KEYS.scoped).completions.create({ model: MODEL, prompt: "hi", max_tokens: 4 }))).toBe("403 forbidden");
    // A key's region is its clients' home region: the first choice when no x-tidegate-region header names one.
    const home = await fetch(`${routerUrl}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${KEYS.east}` }, body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }) });
    expect(home.status).toBe(200);
    expect(home.headers.get("x-tidegate-region")).toBe("r1");
    await home.json();
    // A key with `regions` (data residency) is served only there: a header naming another region is refused; its
    // batches run only in its regions (router/dispatch/dispatcher.test.ts shows another region's claims parked).
    const resident = new OpenAI({ apiKey: KEYS.resident, baseURL: `${routerUrl}/v1`, maxRetries: 0 });
    expect((await resident.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })).choices.length).toBe(1);
    const elsewhere = new OpenAI({ apiKey: KEYS.resident, baseURL: `${routerUrl}/v1`, maxRetries: 0, defaultHeaders: { "x-tidegate-region": "r2" } });
    expect(await failure(elsewhere.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4, stream: true }))).toBe("403 forbidden");
    const residentFile = await resident.files.create({ file: await toFile(Buffer.from(chatJsonl(1, MODEL)), "e.jsonl"), purpose: "batch" });
    const kept = await resident.batches.create({ input_file_id: residentFile.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect((await pollBatch(resident, kept.id, (st) => st === "completed" || st === "failed", 60_000)).request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    expect(await failure(as("sk-not-a-key-at-all").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }))).toBe("401 unauthorized");
    const bare = await fetch(`${routerUrl}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] }) });
    expect(bare.status).toBe(401);
    expect(((await bare.json()) as { error: { code: string } }).error.code).toBe("unauthorized");

    // Files: tenant a's file is invisible to tenant b on every files route.
    const a = as(KEYS.a);
    const b = as(KEYS.b);
    const file = await a.files.create({ file: await toFile(Buffer.from(chatJsonl(3, MODEL)), "a.jsonl"), purpose: "batch" });
    expect(await failure(b.files.retrieve(file.id))).toBe("404 not_found");
    expect(await failure(b.files.content(file.id))).toBe("404 not_found");
    expect(await failure(b.files.delete(file.id))).toBe("404 not_found");
    expect((await b.files.list()).data.map((f) => f.id)).not.toContain(file.id);
    expect((await a.files.list()).data.map((f) => f.id)).toContain(file.id);
    // …nor can b batch it.
    expect(await failure(b.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }))).toMatch(/^404/);

    // Batches: tenant a's batch is invisible to b; b cannot cancel it.
    const batch = await a.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(await failure(b.batches.retrieve(batch.id))).toBe("404 not_found");
    expect(await failure(b.batches.cancel(batch.id))).toBe("404 not_found");
    expect((await b.batches.list()).data.map((x) => x.id)).not.toContain(batch.id);
    const done = await pollBatch(a, batch.id, (s) => s === "completed" || s === "failed", 60_000);
    expect(done.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
    expect(await failure(b.files.content(done.output_file_id!))).toBe("404 not_found");

    // A key scoped to another model: its batch over MODEL fails validation, naming the model; nothing runs.
    const scoped = as(KEYS.scoped);
    const own = await scoped.files.create({ file: await toFile(Buffer.from(chatJsonl(2, MODEL)), "c.jsonl"), purpose: "batch" });
    const refused = await scoped.batches.create({ input_file_id: own.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const failed = await pollBatch(scoped, refused.id, (s) => s === "completed" || s === "failed", 30_000);
    expect(failed.status).toBe("failed");
    expect(JSON.stringify(failed.errors)).toContain(MODEL);

    // Admin routes: a tenant key is refused, an admin key is served.
    const admin = (key?: string) => fetch(`${routerUrl}/admin/regions/r1/instances`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
    expect((await admin()).status).toBe(401);
    expect((await admin(KEYS.a)).status).toBe(403);
    expect((await admin(ADMIN)).status).toBe(200);
  }, 120_000);

  it("no key, token or certificate material in any process's output", () => {
    const out = procs.map((p) => `--- ${p.name}\n${p.output()}`).join("\n");
    expect(out.length).toBeGreaterThan(1000); // debug logs were captured
    for (const secret of [...Object.values(KEYS), ADMIN, ...keyMaterial]) expect(out).not.toContain(secret);
    expect(out).not.toMatch(/-----BEGIN [A-Z ]*(PRIVATE KEY|CERTIFICATE)-----/);
  });
});
