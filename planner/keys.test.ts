/** Where /plans keys and prices come from: config + environment, the persisted dev key, GPU-hour prices. */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { fleetFromConfig } from "./fleet.js";
import { devAdminKey, devPlanKeys, planKeysFrom } from "./keys.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-keys-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const conf = (extra: Record<string, unknown> = {}) => parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), ...extra });

describe("plan keys", () => {
  it("join the config's keys and the environment's, by role", () => {
    const keys = planKeysFrom(conf({ router: { adminKeys: ["config-admin-1"], plannerKeys: ["config-planner-1"] } }), { TIDEGATE_ADMIN_KEYS: " env-admin-1 , env-admin-2", TIDEGATE_PLANNER_KEYS: "env-planner-1" });
    expect(keys).toEqual({ admin: ["config-admin-1", "env-admin-1", "env-admin-2"], planner: ["config-planner-1", "env-planner-1"] });
    expect(planKeysFrom(conf(), {})).toEqual({ admin: [], planner: [] });
    expect(() => planKeysFrom(conf(), { TIDEGATE_PLANNER_KEYS: "ok-key-123,short" })).toThrow(/TIDEGATE_PLANNER_KEYS: key 2 is shorter than 8 characters/);
    expect(() => conf({ router: { plannerKeys: ["short"] } })).toThrow(/router\.plannerKeys\[0\]/);
  });

  it("give dev one persisted admin key per data directory (mode 0600) unless one is configured", () => {
    const data = join(dir, "data");
    const a = devAdminKey(data);
    expect(a.created).toBe(true);
    expect(statSync(a.file).mode & 0o777).toBe(0o600);
    const b = devAdminKey(data);
    expect(b).toEqual({ ...a, created: false });
    const c = conf({ queue: { dataDir: data } });
    expect(devPlanKeys(c, {}).keys.admin).toEqual([a.key]);
    expect(devPlanKeys(c, { TIDEGATE_ADMIN_KEYS: "from-env-123" })).toEqual({ keys: { admin: ["from-env-123"], planner: [] } });
  });
});

describe("GPU-hour prices", () => {
  it("come from planner.gpuHourPrices in planner.currency; unknown GPU types are refused by path", () => {
    const f = fleetFromConfig(conf({ planner: { currency: "EUR", gpuHourPrices: { "h100-80gb": 2.5 } } }));
    expect(f.currency).toBe("EUR");
    expect(f.gpus["h100-80gb"]).toEqual({ holdPerGpu: 2.5, vmStartPerGpu: 0.2 });
    expect(fleetFromConfig(conf()).gpus["h100-80gb"]).toEqual({ holdPerGpu: 5, vmStartPerGpu: 0.4 });
    expect(() => conf({ planner: { gpuHourPrices: { "tpu-v9": 1 } } })).toThrow(/planner\.gpuHourPrices\.tpu-v9/);
  });
});
