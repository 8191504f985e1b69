/**
 * Loads the queue's Lua scripts (lua/<name>-<NKEYS>.lua) and registers each on an ioredis client as a command named
 * `<name>_v<package version>` (e.g. `claim_v0_1_0`), so two tidegate versions sharing a Redis never run each other's
 * scripts. `_common.lua` (helpers and return codes) is prepended to every script; the version is embedded in the
 * script text too, so its SHA changes with the version.
 */
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

const here = dirname(fileURLToPath(import.meta.url));

/** Finds `rel` next to this module in the source tree or, when running from dist/, in the source tree beside it. */
function locate(rel: string, upFromDist: string): string {
  const direct = join(here, rel);
  if (existsSync(direct)) return direct;
  const fromDist = join(here, upFromDist, rel);
  if (existsSync(fromDist)) return fromDist;
  throw new Error(`cannot find ${rel} near ${here}`);
}

/** The package version (package.json), e.g. "0.1.0". */
export function packageVersion(): string {
  const file = locate("../../package.json", "..");
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

export interface ScriptDef {
  /** Script name without version, e.g. "claim". */
  name: string;
  /** The command name registered on the client. */
  command: string;
  numberOfKeys: number;
  lua: string;
}

/** Reads every script in lua/; throws if a file name does not follow `name-NKEYS.lua`. */
export function loadScripts(): ScriptDef[] {
  const dir = locate("lua", "../../../router/queue");
  const version = packageVersion();
  const suffix = "_v" + version.replace(/[^0-9A-Za-z]/g, "_");
  const common = readFileSync(join(dir, "_common.lua"), "utf8");
  const out: ScriptDef[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (file === "_common.lua" || !file.endsWith(".lua")) continue;
    const m = /^([a-z][a-z-]*)-(\d+)\.lua$/.exec(file);
    if (m === null) throw new Error(`queue script ${file} must be named <name>-<NKEYS>.lua`);
    const name = m[1]!;
    const body = readFileSync(join(dir, file), "utf8");
    out.push({
      name,
      command: name.replace(/-/g, "_") + suffix,
      numberOfKeys: Number(m[2]),
      lua: `-- tidegate ${version} ${name}\n${common}\n${body}`,
    });
  }
  return out;
}

/** Runs scripts by SHA (EVALSHA), loading a script with EVAL the first time a server answers NOSCRIPT. */
export class ScriptRunner {
  private readonly defs = new Map<string, ScriptDef & { sha: string }>();

  constructor(private readonly client: Redis) {
    for (const s of loadScripts()) this.defs.set(s.name, { ...s, sha: createHash("sha1").update(s.lua).digest("hex") });
  }

  /** The versioned command names, for logs and tests. */
  commands(): string[] {
    return [...this.defs.values()].map((d) => d.command);
  }

  /** Runs script `name` with exactly its declared number of keys. */
  async run(name: string, keys: string[], args: (string | number | Buffer)[]): Promise<unknown> {
    const def = this.defs.get(name);
    if (def === undefined) throw new Error(`no queue script ${name}`);
    if (keys.length !== def.numberOfKeys) throw new Error(`script ${def.command} takes ${def.numberOfKeys} keys, got ${keys.length}`);
    try {
      return await this.client.evalsha(def.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return this.client.eval(def.lua, keys.length, ...keys, ...args);
    }
  }
}
