import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON, loadConfig, mergeOverDefault, parseConfig, validateConfig } from "./config.js";
import { repoRoot } from "./paths.js";
import "../region/config-sections.js"; // region's sections: one case below has a keystage section

/** A copy of the default config with the value at `path` replaced (objects and arrays walked by key/index). */
function patched(path: readonly (string | number)[], value: unknown): unknown {
  const cfg = structuredClone(DEFAULT_CONFIG_JSON) as Record<string, unknown>;
  let node: Record<string | number, unknown> = cfg;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]!] = value;
  return cfg;
}

describe("config", () => {
  it("the embedded default has 3 regions and 4 models", () => {
    const cfg = loadConfig();
    expect(cfg.regions.map((r) => r.name)).toEqual(["us-east", "us-central", "us-west"]);
    expect(cfg.models.map((m) => m.name)).toEqual(["llama2-70b", "bloom-176b", "llama3.1-8b", "llama3.2-3b"]);
    expect(cfg.router.memoryThreshold).toBe(0.7);
    expect(cfg.queue.dispatchOneBelow).toBe(0.6);
  });

  it("names the exact path of a bad value", () => {
    expect(() => parseConfig(patched(["regions", 1, "gpus", 0, "count"], -3))).toThrow("regions[1].gpus[0].count: must be ≥ 0, got -3");
    expect(() => parseConfig(patched(["regions", 0, "gpus", 0, "count"], "8"))).toThrow("regions[0].gpus[0].count: expected a finite number");
  });

  it("router.spill (issue 46 item 5): off by default; true/\"on\" and false/\"off\"; anything else names router.spill", () => {
    expect(loadConfig().router.spill).toBe(false);
    const withSpill = (v: unknown) => parseConfig(patched(["router"], { spill: v })).router.spill;
    expect(withSpill(true)).toBe(true);
    expect(withSpill("on")).toBe(true);
    expect(withSpill(false)).toBe(false);
    expect(withSpill("off")).toBe(false);
    expect(() => withSpill("yes")).toThrow('router.spill: must be true, false, "on" or "off", got "yes"');
    expect(() => withSpill(1)).toThrow("router.spill: must be true");
  });

  it("rejects unknown fields instead of ignoring them", () => {
    expect(() => parseConfig(patched(["router"], { prot: 1 }))).toThrow("router.prot: is not a known field");
  });

  it("rejects a fleet whose starting instances do not fit", () => {
    expect(() => parseConfig(patched(["regions", 2, "gpus", 0, "count"], 4))).toThrow(/regions\[2\]\.gpus\[0\]\.count: 4 h100-80gb GPUs cannot hold/);
  });

  it("rejects references to unknown regions and models", () => {
    expect(() => parseConfig(patched(["regions", 0, "proximity"], ["eu-west"]))).toThrow("regions[0].proximity[0]: unknown region");
    expect(() => parseConfig(patched(["regions", 0, "endpoints", 0, "model"], "gpt-9"))).toThrow("regions[0].endpoints[0].model: unknown model");
    const key = (k: Record<string, unknown>) => patched(["router"], { apiKeys: [{ key: "sk-resident", tenant: "t", ...k }] });
    expect(() => parseConfig(key({ regions: ["eu-west"] }))).toThrow("router.apiKeys[0].regions[0]: unknown region");
    expect(() => parseConfig(key({ regions: [] }))).toThrow("router.apiKeys[0].regions");
    expect(() => parseConfig(key({ region: "us-west", regions: ["us-east"] }))).toThrow('router.apiKeys[0].region: home region "us-west" is not among the key\'s regions (us-east)');
    expect(parseConfig(key({ region: "us-east", regions: ["us-east", "us-central"] })).router.apiKeys[0]!.regions).toEqual(["us-east", "us-central"]);
  });

  it("rejects dispatch thresholds in the wrong order", () => {
    expect(() => parseConfig(patched(["queue"], { dispatchOneBelow: 0.4, dispatchTwoBelow: 0.5 }))).toThrow("queue.dispatchTwoBelow");
    expect(() => parseConfig(patched(["queue"], { fillToPreemptible: 0.5 }))).toThrow("queue.fillToPreemptible: must be ≥ fillTo (0.55)");
    expect(() => parseConfig(patched(["engines"], { preemption: "kill" }))).toThrow("engines.preemption");
  });
});

describe("partial config files and every error at once", () => {
  const write = (body: unknown): string => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-config-"));
    const file = join(dir, "tidegate.json");
    writeFileSync(file, JSON.stringify(body));
    return file;
  };
  it("merges a partial file over the embedded default", () => {
    const cfg = loadConfig(write({ controller: { strategy: "reactive" }, router: { port: 9999 } }));
    expect(cfg.controller.strategy).toBe("reactive");
    expect(cfg.router.port).toBe(9999);
    expect(cfg.regions.map((r) => r.name)).toEqual(["us-east", "us-central", "us-west"]);
    expect(mergeOverDefault({ regions: [] })).toMatchObject({ regions: [] });
  });
  it("reports every error, each with its path, and suggests the nearest key for a typo", () => {
    const file = write({ router: { prot: 8080, telemetryStaleMs: -1 }, engines: { timeScal: 2 } });
    expect(() => loadConfig(file)).toThrow(/3 errors:\n {2}router\.telemetryStaleMs: must be > 0, got -1\n {2}router\.prot: is not a known field; did you mean "port"\?\n {2}engines\.timeScal: is not a known field; did you mean "timeScale"\?/);
    const { config, errors } = validateConfig(mergeOverDefault({ queue: { backend: "nope" } }));
    expect(config).toBeUndefined();
    expect(errors.map((e) => e.path)).toEqual(["queue.backend"]);
  });
  it("does not report what removing a bad field causes in its container", () => {
    const bloom = { model: "bloom-176b", gpu: "h100-80gb", layersPerStage: [35, 35], profileTp: 8 };
    const { errors } = validateConfig(mergeOverDefault({ keystage: { pipelines: [bloom] }, router: { port: -1 } }));
    // Removing layersPerStage[0] leaves one stage ("at least 2 elements"): not the user's error.
    expect(errors.map((e) => e.path)).toEqual(["router.port", "keystage.pipelines[0].layersPerStage[0]"]);
  });
  it("suggests nothing for a key far from every known one", () => {
    expect(() => loadConfig(write({ router: { completelyDifferent: 1 } }))).toThrow(/router\.completelyDifferent: is not a known field$/);
  });
});

describe("a misspelt key gets the known one it was meant to be", () => {
  /** The errors a partial config with `patch` gives, each as reported ("path: message"). */
  const only = (patch: Record<string, unknown>): string[] => validateConfig(mergeOverDefault(patch)).errors.map((e) => e.message);
  it.each([
    ["one letter missing, of a key the file does not set", { engines: { kvCapacityToken: 24_000 } }, "engines.kvCapacityToken", "kvCapacityTokens"],
    ["a case difference, of a key the file does not set", { engines: { kvCapacitytokens: 24_000 } }, "engines.kvCapacitytokens", "kvCapacityTokens"],
    ["case only", { router: { MemoryThreshold: 0.6 } }, "router.MemoryThreshold", "memoryThreshold"],
    ["one letter deleted", { engines: { startTimeoutM: 1000 } }, "engines.startTimeoutM", "startTimeoutMs"],
    ["one letter inserted", { queue: { dataDirr: "/tmp/x" } }, "queue.dataDirr", "dataDir"],
    ["one letter substituted", { engines: { timeScalo: 2 } }, "engines.timeScalo", "timeScale"],
    ["two letters transposed", { engines: { kvCapacityTokesn: 24_000 } }, "engines.kvCapacityTokesn", "kvCapacityTokens"],
    ["two letters transposed in a short key", { router: { hsot: "0.0.0.0" } }, "router.hsot", "host"],
    ["a per-model key the file does not set", { engines: { models: { "llama3.2-3b": { maxbatch: 8 } } } }, 'engines.models.llama3.2-3b.maxbatch', "maxBatch"],
  ])("%s", (_what, patch, path, meant) => {
    expect(only(patch)).toEqual([`${path}: is not a known field; did you mean ${JSON.stringify(meant)}?`]);
  });
  it("a key far from every known one gets no suggestion", () => {
    expect(only({ engines: { gpuMemoryUtilization: 0.9 } })).toEqual(["engines.gpuMemoryUtilization: is not a known field"]);
  });
  it("engines.hostKvCacheGiB: read when ≥ 0, refused below", () => {
    expect(parseConfig(patched(["engines"], { hostKvCacheGiB: 64 })).engines.hostKvCacheGiB).toBe(64);
    expect(parseConfig(patched(["engines"], { hostKvCacheGiB: 0 })).engines.hostKvCacheGiB).toBe(0);
    expect(() => parseConfig(patched(["engines"], { hostKvCacheGiB: -1 }))).toThrow("engines.hostKvCacheGiB");
  });
  it("regions[].endpoints[].role (issue 48): a prefill and a decode pool of one model, each needing the other; no duplicate endpoint; refused where the region cannot give engines a role", () => {
    const ep = { model: "llama3.2-3b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 4 };
    const pools = [{ ...ep, role: "prefill" }, { ...ep, role: "decode" }];
    const withPools = (extra: unknown[], top: Record<string, unknown> = {}) => {
      const c = patched(["regions", 0, "endpoints"], [...(DEFAULT_CONFIG_JSON as { regions: { endpoints: unknown[] }[] }).regions[0]!.endpoints.slice(0, 3), ...extra]) as Record<string, unknown>;
      return parseConfig({ ...c, ...top });
    };
    expect(withPools(pools).regions[0]!.endpoints.slice(3).map((e) => e.role)).toEqual(["prefill", "decode"]);
    expect(() => withPools([pools[0]])).toThrow('regions[0].endpoints[3].role: a prefill pool of llama3.2-3b needs a decode pool of it in the region (an endpoint with role "decode")');
    expect(() => withPools([...pools, pools[1]])).toThrow("regions[0].endpoints[5]: duplicate endpoint llama3.2-3b/h100-80gb (decode): endpoints[4] is the same");
    expect(() => withPools([ep, ep])).toThrow("regions[0].endpoints[4]: duplicate endpoint llama3.2-3b/h100-80gb: endpoints[3] is the same");
    expect(() => withPools([...pools, { ...ep, gpu: "h100-80gb", instances: 0, minInstances: 0 }])).toThrow("regions[0].endpoints[5]");
    expect(() => withPools([ep, ...pools])).toThrow("regions[0].endpoints[3]: llama3.2-3b is served as prefill and decode pools in this region");
    expect(() => withPools([{ ...ep, role: "both" }])).toThrow("regions[0].endpoints[3].role: must be one of prefill, decode");
    expect(() => withPools(pools, { controller: { actuator: "static" } })).toThrow("regions[0].endpoints[3].role: a static region's engines are fixed");
    expect(() => withPools(pools, { engines: { commandTemplate: "vllm serve {model} --port {port}" } })).toThrow("regions[0].endpoints[3].role: engines.commandTemplate starts real engines");
  });
  it("engines.roles: each URL of engines.urls, or a static region's instance id, may be prefill, decode or both; another key or role names the path", () => {
    const urls = { "us-east/llama3.2-3b": ["http://a:1", "http://b:2"] };
    expect(parseConfig(patched(["engines"], { kind: "openai-http", urls, roles: { "http://a:1": "prefill", "http://b:2": "decode" } })).engines.roles).toEqual({ "http://a:1": "prefill", "http://b:2": "decode" });
    expect(() => parseConfig(patched(["engines"], { kind: "openai-http", urls, roles: { "http://c:3": "prefill" } }))).toThrow("engines.roles.http://c:3: is neither one of engines.urls' URLs nor a configured instance id (region/model/gpu/index)");
    expect(() => parseConfig(patched(["engines"], { kind: "openai-http", urls, roles: { "http://a:1": "prefil" } }))).toThrow("engines.roles.http://a:1: must be one of prefill, decode, both");
    expect(parseConfig(patched(["engines"], {})).engines.roles).toEqual({});
    // In-process simulated engines: region/model/gpu/index, index under the endpoint's instances.
    const example = JSON.parse(readFileSync(join(repoRoot(), "deploy", "examples", "dev-pd-sim.json"), "utf8")) as Record<string, unknown> & { engines: Record<string, unknown> };
    expect(parseConfig(example).engines.roles).toEqual({ "us-east/llama3.2-3b/h100-80gb/0": "prefill", "us-east/llama3.2-3b/h100-80gb/1": "decode" });
    expect(() => parseConfig({ ...example, engines: { roles: { "us-east/llama3.2-3b/h100-80gb/2": "decode" } } })).toThrow("engines.roles.us-east/llama3.2-3b/h100-80gb/2: is neither");
  });
  it("a correct optional key is still read", () => {
    expect(parseConfig(patched(["engines"], { kvCapacityTokens: 24_000, models: { "llama3.2-3b": { maxBatch: 8 } } })).engines).toMatchObject({ kvCapacityTokens: 24_000, models: { "llama3.2-3b": { maxBatch: 8 } } });
  });
});
