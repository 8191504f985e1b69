/**
 * Lua scripts for Redis state changes (STYLE: every Redis state change is one Lua script named `name-NKEYS.lua`,
 * opening with a header that lists KEYS, ARGV and return codes; script names carry the package version). A
 * `LuaScripts` reads one folder of scripts and runs them by SHA, loading a script with EVAL on NOSCRIPT.
 *
 * Folders are found next to the calling module, or — when running compiled code from dist/ — in the source tree
 * (`upFromDist` is the path from the compiled module's folder to the source folder, e.g. "../../planner").
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";

/** Finds folder `rel` beside `moduleUrl`'s file, or under `upFromDist` from it. */
export function locateBeside(moduleUrl: string, rel: string, upFromDist: string): string {
  const here = dirname(fileURLToPath(moduleUrl));
  for (const dir of [join(here, rel), join(here, upFromDist, rel)]) if (existsSync(dir)) return dir;
  throw new Error(`cannot find ${rel} near ${here}`);
}

interface Script {
  name: string;
  keys: number;
  lua: string;
  sha: string;
}

function version(): string {
  const file = locateBeside(import.meta.url, "../package.json", "..");
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

/** The scripts of one folder, run on one ioredis client. */
export class LuaScripts {
  private readonly scripts = new Map<string, Script>();

  /** Reads every `<name>-<NKEYS>.lua` in `dir`; a file not named so is an error. */
  constructor(private readonly client: Redis, dir: string) {
    const v = version();
    for (const file of readdirSync(dir).sort()) {
      if (!file.endsWith(".lua")) continue;
      const m = /^([a-z][a-z-]*)-(\d+)\.lua$/.exec(file);
      if (m === null) throw new Error(`script ${file} must be named <name>-<NKEYS>.lua`);
      const lua = `-- tidegate ${v} ${m[1]}\n${readFileSync(join(dir, file), "utf8")}`;
      this.scripts.set(m[1]!, { name: m[1]!, keys: Number(m[2]), lua, sha: createHash("sha1").update(lua).digest("hex") });
    }
  }

  /** Script names (without version) this runner knows. */
  names(): string[] {
    return [...this.scripts.keys()];
  }

  /** Runs `name` with exactly its declared number of keys. */
  async run(name: string, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const s = this.scripts.get(name);
    if (s === undefined) throw new Error(`no Lua script ${name}`);
    if (keys.length !== s.keys) throw new Error(`script ${name} takes ${s.keys} keys, got ${keys.length}`);
    try {
      return await this.client.evalsha(s.sha, s.keys, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return this.client.eval(s.lua, s.keys, ...keys, ...args);
    }
  }
}
