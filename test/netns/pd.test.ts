// Issue 48, real processes and real bytes: a prefill engine-sim and a decode engine-sim each in its own network
// namespace with a tbf-shaped link, `tidegate region` (fixed engines with roles) and `tidegate global` on the bridge's
// host side, streams through the official `openai` client. The prompt's KV crosses the shaped links between the two
// namespaces (the decode side checks every byte against the prefill's pattern), in the time the bandwidth allows; a
// `kill -9` of the prefill engine in the middle of a transfer ends the request with an error within 3 s.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, it } from "vitest";
import { freePort, spawnTidegate, spawnTidegateIn, stopAll, type Proc } from "../e2e/procs.js";
import { killPrefillMidTransfer, streamKvAcross } from "./pd-checks.js";
import { createTopology, netnsUnavailable, type Topology } from "./topology.js";

const MODEL = "llama3.2-3b";
const RATE_MBIT = 200;
const why = netnsUnavailable();

let topo: Topology | undefined;
let dir: string;
let prefill: Proc;
let decode: Proc;
let routerUrl: string;

/** An engine-sim with `role` inside node `i`'s namespace, listening on its address. */
function engineIn(i: number, role: string): Promise<Proc> {
  const n = topo!.nodes[i]!;
  return spawnTidegateIn(n.ns, `engine-sim ${role}`, ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--host", n.ip, "--port", "0", "--time-scale", "0.1", "--role", role], /(http:\/\/[\d.]+:\d+)/);
}

describe.skipIf(why !== undefined)(`prefill and decode across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  beforeAll(async () => {
    topo = createTopology([RATE_MBIT, RATE_MBIT], 9000);
    dir = mkdtempSync(join(tmpdir(), "tidegate-netns-pd-"));
    [prefill, decode] = await Promise.all([engineIn(0, "prefill"), engineIn(1, "decode")]);
    const [p, d] = [prefill.match[1]!, decode.match[1]!];
    const grpcPort = await freePort();
    const config = {
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "us-east", proximity: [], grpcAddress: `127.0.0.1:${grpcPort}`, gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 2, minInstances: 2, maxInstances: 2 }] }],
      controller: { actuator: "static" },
      routing: { pdMinPrefillTokens: 0 },
      engines: { kind: "openai-http", urls: { [`us-east/${MODEL}`]: [p, d] }, roles: { [p]: "prefill", [d]: "decode" } },
      queue: { dataDir: join(dir, "data") },
    };
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify(config));
    await spawnTidegate("region", ["region", "--config", file, "--region", "us-east", "--log-level", "warn"], /tidegate region \S+: grpc \S+ metrics (\S+)/);
    const global = await spawnTidegate("global", ["global", "--config", file, "--port", "0", "--log-level", "warn", "--telemetry-interval-ms", "200"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
    routerUrl = global.match[1]!;
  }, 120_000);

  afterAll(async () => {
    await stopAll();
    topo?.destroy();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("moves each prompt's KV between the namespaces at the shaped rate, checked byte for byte", async () => {
    await streamKvAcross({ routerUrl, decodeUrl: decode.match[1]!, model: MODEL, rateMbit: RATE_MBIT, label: "fixed engines" });
  }, 60_000);

  it("kill -9 of the prefill engine in the middle of a transfer ends the request with an error within 3 s", async () => {
    await killPrefillMidTransfer({ routerUrl, prefillUrl: prefill.match[1]!, decodeUrl: decode.match[1]!, model: MODEL, kill: () => prefill.child.kill("SIGKILL"), label: "fixed engines" });
  }, 60_000);
});
