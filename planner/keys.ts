/**
 * Where the /plans keys come from: the config (router.adminKeys, router.plannerKeys) plus the environment
 * (TIDEGATE_ADMIN_KEYS, TIDEGATE_PLANNER_KEYS: comma-separated). Commands call `planKeysFrom(config, process.env)`
 * once at start-up; nothing here reads the environment by itself. `tidegate dev` with no admin key configured
 * uses a key kept in `<queue.dataDir>/planner/admin.key` (created once, mode 0600), so the key it prints stays
 * the same across restarts on the same data directory.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TidegateConfig } from "../core/config.js";
import { TidegateError } from "../core/errors.js";
import { randomToken, type PlanKeys } from "./auth.js";

/** Environment variables holding extra keys (comma-separated, each ≥ 8 characters). */
export const ADMIN_KEYS_ENV = "TIDEGATE_ADMIN_KEYS";
export const PLANNER_KEYS_ENV = "TIDEGATE_PLANNER_KEYS";

function fromEnv(env: Readonly<Record<string, string | undefined>>, name: string): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return [];
  const keys = raw.split(",").map((k) => k.trim()).filter((k) => k.length > 0);
  keys.forEach((k, i) => {
    if (k.length < 8) throw new TidegateError("invalid_config", `${name}: key ${i + 1} is shorter than 8 characters`);
  });
  return keys;
}

/** The keys of each role: the config's plus the environment's (`env` is process.env in a command, a map in tests). */
export function planKeysFrom(config: TidegateConfig, env: Readonly<Record<string, string | undefined>>): PlanKeys {
  return {
    admin: [...config.router.adminKeys, ...fromEnv(env, ADMIN_KEYS_ENV)],
    planner: [...config.router.plannerKeys, ...fromEnv(env, PLANNER_KEYS_ENV)],
  };
}

/** The dev admin key file under a data directory. */
export function devKeyFile(dataDir: string): string {
  return join(dataDir, "planner", "admin.key");
}

/** The persisted dev admin key: read from `devKeyFile(dataDir)`, or made (and written, 0600) on first use. */
export function devAdminKey(dataDir: string): { key: string; file: string; created: boolean } {
  const file = devKeyFile(dataDir);
  if (existsSync(file)) {
    const key = readFileSync(file, "utf8").trim();
    if (key.length < 8) throw new TidegateError("invalid_config", `${file}: the dev admin key is shorter than 8 characters; delete the file to make a new one`);
    return { key, file, created: false };
  }
  mkdirSync(join(dataDir, "planner"), { recursive: true });
  const key = `tg-admin-${randomToken(24)}`;
  writeFileSync(file, key + "\n", { mode: 0o600 });
  chmodSync(file, 0o600);
  return { key, file, created: true };
}

/**
 * `tidegate dev`'s keys: config + environment, and — when that gives no admin key — the persisted dev key, which
 * is returned as `devKey` for the command to print once (stdout, never the log).
 */
export function devPlanKeys(config: TidegateConfig, env: Readonly<Record<string, string | undefined>>): { keys: PlanKeys; devKey?: { key: string; file: string; created: boolean } } {
  const keys = planKeysFrom(config, env);
  if (keys.admin.length > 0) return { keys };
  const devKey = devAdminKey(config.queue.dataDir);
  return { keys: { admin: [devKey.key], planner: keys.planner }, devKey };
}
