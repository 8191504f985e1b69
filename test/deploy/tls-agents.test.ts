/**
 * Mutual TLS on every gRPC link of an agents-mode deployment (deploy/kubernetes prod): the global router → region,
 * node agent → region (announce), region → agent (transfers, engines), engine-sim → its agent (parameters). One CA
 * and one certificate whose names cover the region (IP 127.0.0.1 here) and the agents (`tidegate-agent`, which the
 * region and the engines expect through --tls-server-name because agents are dialled by address). An agent without
 * a certificate cannot announce itself.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, spawnTidegate, stopAll } from "../e2e/procs.js";
import { makeTestCa } from "../helpers/certs.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-tls-agents-"));
afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

const ADMIN = "admin-key-for-tls-test";

describe("agents mode over mutual TLS", () => {
  it("deploys an engine through TLS agents and serves a completion through a TLS router; an agent without a certificate is refused", async () => {
    // 127.0.0.1 is the region's address; agents are dialled by address too, but their certificate is checked
    // against the name tidegate-agent (--tls-server-name), so their SANs need not list node IPs.
    const ca = makeTestCa(dir);
    const cert = ca.issue("tier", "IP:127.0.0.1,DNS:tidegate-agent");
    const tls = ["--tls-ca", ca.caFile, "--tls-cert", cert.certFile, "--tls-key", cert.keyFile];
    const grpc = await freePort();
    const config = join(dir, "fleet.json");
    writeFileSync(
      config,
      JSON.stringify({
        models: [{ name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } }],
        regions: [{ name: "r1", grpcAddress: `127.0.0.1:${grpc}`, gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 }] }],
        router: { adminKeys: [ADMIN] },
        controller: { actuator: "agents", reconcileIntervalMs: 250, agentLostAfterMs: 3000 },
        engines: { timeScale: 0.05, startTimeoutMs: 30_000 },
        parameters: { blockCount: 4, models: { "llama3.2-3b": { bytes: 1 << 20, seed: 3 } } },
      }),
    );
    await spawnTidegate("region", ["region", "--config", config, "--region", "r1", ...tls, "--tls-server-name", "tidegate-agent", "--log-level", "warn"], /tidegate region r1: grpc/, 60_000);
    const plain = await spawnTidegate("agent plain", ["agent", "--node-id", "plain", "--region", "r1", "--region-address", `127.0.0.1:${grpc}`, "--gpu-slots", "0", "--transport", "tcp", "--announce-interval-ms", "300"], /metrics (http:\/\/\S+)/, 60_000);
    await spawnTidegate("agent", ["agent", "--node-id", "n1", "--region", "r1", "--region-address", `127.0.0.1:${grpc}`, "--gpu-slots", "4", "--transport", "tcp", "--announce-interval-ms", "300", ...tls, "--tls-server-name", "tidegate-agent"], /metrics (http:\/\/\S+)/, 60_000);
    const global = await spawnTidegate("global", ["global", "--config", config, "--port", "0", ...tls, "--telemetry-interval-ms", "250"], /serving (http:\/\/\S+) /, 60_000);
    const routerUrl = global.match[1]!;
    const deadline = Date.now() + 90_000;
    let listing: { instances: { state: string; node: string; url: string }[]; nodes: { nodeId: string }[] } | undefined;
    for (;;) {
      const r = await fetch(`${routerUrl}/admin/regions/r1/instances`, { headers: { authorization: `Bearer ${ADMIN}` } }).catch(() => undefined);
      if (r?.status === 200) {
        listing = (await r.json()) as typeof listing;
        if (listing!.instances.some((i) => i.state === "serving")) break;
      }
      if (Date.now() > deadline) throw new Error(`no serving instance: ${JSON.stringify(listing)}`);
      await new Promise((res) => setTimeout(res, 250));
    }
    expect(listing!.instances.find((i) => i.state === "serving")?.node).toBe("n1");
    expect(listing!.nodes.map((n) => n.nodeId)).toEqual(["n1"]);
    // The router sees the serving instance with its next telemetry snapshot (over TLS).
    for (;;) {
      const h = (await (await fetch(`${routerUrl}/healthz`)).json()) as { regions: Record<string, { available: boolean }> };
      if (h.regions.r1?.available === true) break;
      if (Date.now() > deadline) throw new Error("r1 never available at the router");
      await new Promise((res) => setTimeout(res, 100));
    }
    const res = await fetch(`${routerUrl}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "llama3.2-3b", prompt: "hi", max_tokens: 3 }) });
    expect(res.status).toBe(200);
    // The agent without a certificate never got through: not ready, and it says so.
    const ready = await fetch(`${plain.match[1]}/readyz`);
    expect(ready.status).toBe(503);
    expect(plain.output()).toMatch(/region unreachable/);
  });
});
