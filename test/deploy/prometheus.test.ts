/**
 * The multi-process deployment on loopback — Redis, `tidegate global`, three `tidegate region`s in agents mode, one
 * `tidegate agent` per region (each starts an engine-sim), `tidegate planner` — scraped by a real Prometheus
 * (Debian's `prometheus`). Every process answers the probe paths the manifests use (/livez, /readyz). After traffic
 * it asks Prometheus's HTTP API for a sample from every process (`up` = 1 for every target) and for every metric the
 * Grafana dashboard (deploy/grafana/tidegate.json) uses; `promtool check metrics` on each process's /metrics reports
 * nothing for tidegate's own metrics (prom-client's nodejs_* and process_* defaults, and engine-sim's deliberate
 * vllm: names, aside); every dashboard expression evaluates on that Prometheus and names only metrics some process
 * exports. Skipped, with the reason, where prometheus/promtool or redis-server are not installed (.ci/run installs
 * them).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, REPO_ROOT, spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";
import { startTestRedis, type TestRedis } from "../helpers/redis.js";

const have = (cmd: string) => spawnSync(cmd, ["--version"], { encoding: "utf8" }).status === 0;
const missing = ["prometheus", "promtool", "redis-server"].filter((c) => !have(c));
const REGIONS = ["us-east", "us-central", "us-west"] as const;
const MODEL = "llama3.2-3b";
const ADMIN_KEY = "admin-key-for-prometheus-test";

const dir = mkdtempSync(join(tmpdir(), "tidegate-prom-"));
let redis: TestRedis | undefined;
let prometheus: ChildProcess | undefined;
let promUrl = "";
/** Every scraped process: job name → host:port of its /metrics. */
const targets = new Map<string, string>();
let routerUrl = "";

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const start = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms (${String(last)})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const hostPort = (url: string) => new URL(url).host;

/** An instant query; the result vector. */
async function query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
  const r = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = (await r.json()) as { status: string; error?: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
  if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
  return body.data.result;
}

/** The dashboard's expressions with Grafana's variables replaced as "All" would. */
function dashboardExprs(): string[] {
  const d = JSON.parse(readFileSync(join(REPO_ROOT, "deploy/grafana/tidegate.json"), "utf8")) as { panels: { targets?: { expr: string }[] }[]; templating: { list: { query: { query: string } }[] } };
  const exprs = d.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
  return exprs.map((e) => e.replace(/\$__rate_interval/g, "1m").replace(/\$(region|model)\b/g, ".*"));
}

/** Metric names an expression names (identifiers followed by `{`, `[` or `)` that are not functions or labels). */
function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\b((?:tidegate|vllm)[a-z0-9_:]*)\b/g)].map((m) => m[1]!))];
}

describe.skipIf(missing.length > 0)(`a deployment scraped by a real Prometheus${missing.length > 0 ? ` (skipped: ${missing.join(", ")} not installed; .ci/run installs them)` : ""}`, () => {
  beforeAll(async () => {
    redis = await startTestRedis();
    const grpc = Object.fromEntries(await Promise.all(REGIONS.map(async (r) => [r, await freePort()] as const)));
    const config = join(dir, "fleet.json");
    writeFileSync(
      config,
      JSON.stringify({
        models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
        regions: REGIONS.map((r, i) => ({
          name: r,
          utcOffsetH: -5 - i,
          proximity: REGIONS.filter((x) => x !== r),
          grpcAddress: `127.0.0.1:${grpc[r]}`,
          gpus: [{ type: "h100-80gb", count: 4 }],
          endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 2 }],
        })),
        router: { adminKeys: [ADMIN_KEY], telemetryStaleMs: 5000 },
        queue: { backend: "redis", redisUrl: redis.url, keyPrefix: `tgprom${process.pid}:` },
        planner: { intervalMs: 4000 },
        controller: { actuator: "agents", strategy: "lt-i", reconcileIntervalMs: 250, agentLostAfterMs: 3000 },
        engines: { timeScale: 0.05, startTimeoutMs: 30_000 },
        parameters: { blockCount: 8, models: { [MODEL]: { bytes: 4 * 1024 * 1024, seed: 7 } } },
      }),
    );
    const regions = await Promise.all(
      REGIONS.map((r) => spawnTidegate(`region ${r}`, ["region", "--config", config, "--region", r, "--metrics-port", "0", "--log-level", "warn"], /tidegate region \S+: grpc \S+ metrics (http:\/\/\S+)/, 60_000)),
    );
    regions.forEach((p, i) => targets.set(`region-${REGIONS[i]}`, hostPort(p.match[1]!)));
    const agents: Proc[] = await Promise.all(
      REGIONS.map((r) =>
        spawnTidegate(`agent ${r}`, ["agent", "--node-id", `${r}-0`, "--region", r, "--region-address", `127.0.0.1:${grpc[r]}`, "--gpu-slots", "4", "--transport", "tcp", "--announce-interval-ms", "300", "--metrics-port", "0", "--log-level", "warn"], /metrics (http:\/\/\S+)/, 60_000),
      ),
    );
    agents.forEach((p, i) => targets.set(`agent-${REGIONS[i]}`, hostPort(p.match[1]!)));
    const global = await spawnTidegate("global", ["global", "--config", config, "--port", "0", "--telemetry-interval-ms", "250", "--log-level", "warn"], /serving (http:\/\/\S+) /, 60_000);
    routerUrl = global.match[1]!;
    targets.set("global", hostPort(routerUrl));
    const planner = await spawnTidegate("planner", ["planner", "--config", config, "--port", "0", "--log-level", "warn", "--forecaster", "seasonal-naive"], /\/plans on (http:\/\/\S+) /, 60_000);
    targets.set("planner", hostPort(planner.match[1]!));

    // Every region deploys its instance (blocks over the data plane, then an engine-sim on its agent).
    const engines = await until(
      "an engine serving in every region",
      async () => {
        const urls: string[] = [];
        for (const r of REGIONS) {
          const res = await fetch(`${routerUrl}/admin/regions/${r}/instances`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
          const l = (await res.json()) as { instances: { state: string; url: string }[] };
          const s = l.instances.find((i) => i.state === "serving" && i.url !== "");
          if (s === undefined) return undefined;
          urls.push(s.url);
        }
        return urls;
      },
      90_000,
    );
    engines.forEach((u, i) => targets.set(`engine-sim-${REGIONS[i]}`, hostPort(u)));
    await until("router ready", async () => ((await fetch(`${routerUrl}/readyz`)).status === 200 ? true : undefined), 20_000);

    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    const scrape = [...targets].map(([job, addr]) => `  - job_name: ${job}\n    static_configs:\n      - targets: ["${addr}"]`).join("\n");
    writeFileSync(join(dir, "prometheus.yml"), `global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n${scrape}\n`);
    prometheus = spawn("prometheus", [`--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "tsdb")}`, `--web.listen-address=127.0.0.1:${promPort}`, "--log.level=warn"], { stdio: "ignore" });
    await until("prometheus ready", async () => ((await fetch(`${promUrl}/-/ready`)).status === 200 ? true : undefined), 30_000);
    // Prometheus hands targets to its scrapers a few seconds after start: traffic goes once every target was scraped.
    await until("first scrape of every target", async () => ((await query("up")).length === targets.size ? true : undefined), 30_000);

    // Traffic: streamed completions through the router to every region (the client's region header spreads them).
    for (const r of REGIONS) {
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          const res = await fetch(`${routerUrl}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-tidegate-region": r }, body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hello" }], stream: true, max_tokens: 8 }) });
          expect(res.status).toBe(200);
          await res.text();
        }),
      );
    }
  }, 240_000);

  afterAll(async () => {
    prometheus?.kill("SIGTERM");
    await stopAll();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("Prometheus scrapes every process: global, three regions, their agents and engines, the planner", async () => {
    expect([...targets.keys()].sort()).toEqual(["agent-us-central", "agent-us-east", "agent-us-west", "engine-sim-us-central", "engine-sim-us-east", "engine-sim-us-west", "global", "planner", "region-us-central", "region-us-east", "region-us-west"]);
    const up = await until(
      "every target up",
      async () => {
        const r = await query("up");
        return r.length === targets.size && r.every((s) => s.value[1] === "1") ? r : undefined;
      },
      30_000,
    );
    expect(up.map((s) => s.metric.job).sort()).toEqual([...targets.keys()].sort());
    // The probe paths the manifests use answer on the same port: live, and ready once the deployment runs.
    for (const [job, addr] of targets) {
      expect((await fetch(`http://${addr}/livez`)).status, `${job} /livez`).toBe(200);
      const ready = await fetch(`http://${addr}/readyz`);
      expect(ready.status, `${job} /readyz: ${await ready.text()}`).toBe(200);
    }
    // Each process also exports the process's standard metrics.
    const cpu = await query("process_cpu_seconds_total");
    expect(new Set(cpu.map((s) => s.metric.job))).toEqual(new Set(targets.keys()));
  });

  it("has a sample of every metric the dashboard uses, and every dashboard expression evaluates", async () => {
    // rate() needs two samples after the traffic: wait for three scrapes of every target.
    await until("three scrapes of every target", async () => {
      const r = await query("count_over_time(up[1m])");
      return r.length === targets.size && r.every((x) => Number(x.value[1]) >= 3) ? true : undefined;
    }, 20_000);
    const exprs = dashboardExprs();
    expect(exprs.length).toBeGreaterThanOrEqual(15);
    const names = [...new Set(exprs.flatMap(metricNames))];
    expect(names.length).toBeGreaterThanOrEqual(14);
    // The requests above have been scraped (the router counted them and the regions did too).
    await until("requests scraped", async () => ((await query(`sum(tidegate_region_requests_total{outcome="ok"})`))[0]?.value[1] === "12" ? true : undefined), 15_000);
    await until("planner targets scraped", async () => ((await query("count(tidegate_planner_target_instances)"))[0]?.value[1] === String(REGIONS.length) ? true : undefined), 15_000);
    const absent: string[] = [];
    for (const n of names) if ((await query(`count({__name__="${n}"})`)).length === 0) absent.push(n);
    expect(absent).toEqual([]);
    // Every expression parses and evaluates (an error is a rejected query); those over request metrics have data.
    for (const e of exprs) await query(e);
    const ttft = exprs.find((e) => e.includes("tidegate_router_ttft_seconds_bucket"))!;
    expect((await query(ttft)).length, ttft).toBeGreaterThan(0);
    expect((await query(exprs.find((e) => e.includes("tidegate_router_tbt_seconds_bucket"))!)).length).toBeGreaterThan(0);
    // Per region: a serving instance of the model in each region, from its own process.
    const serving = await query(`tidegate_region_instances{state="serving"} > 0`);
    expect(new Set(serving.map((s) => s.metric.region))).toEqual(new Set(REGIONS));
  });

  it("the dashboard names only metrics some process exports, and promtool finds nothing wrong with tidegate's own", async () => {
    const exported = new Set<string>();
    for (const [job, addr] of targets) {
      const text = await (await fetch(`http://${addr}/metrics`)).text();
      for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
        exported.add(m[1]!);
        if (m[2] === "histogram") for (const s of ["_bucket", "_sum", "_count"]) exported.add(m[1]! + s);
      }
      const check = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
      const problems = `${check.stdout}\n${check.stderr}`
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l !== "" && !/^(nodejs_|process_|vllm:)/.test(l));
      expect(problems, `${job}: promtool check metrics`).toEqual([]);
    }
    const used = [...new Set(dashboardExprs().flatMap(metricNames))];
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
    // promtool parses every expression too (as recording rules).
    const rules = `groups:\n  - name: dashboard\n    rules:\n${dashboardExprs().map((e, i) => `      - record: dashboard:expr${i}\n        expr: ${JSON.stringify(e)}`).join("\n")}\n`;
    writeFileSync(join(dir, "rules.yml"), rules);
    const r = spawnSync("promtool", ["check", "rules", join(dir, "rules.yml")], { encoding: "utf8" });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });
});
