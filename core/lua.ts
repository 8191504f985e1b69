/**
 * Lua scripts for Redis state changes (STYLE: every Redis state change is one Lua script named `name-NKEYS.lua`,
 * opening with a header that lists KEYS, ARGV and return codes; script names carry the package version). A
 * `LuaScripts` reads one folder of scripts and runs them by SHA, loading a script with EVAL on NOSCRIPT. Every
 * script's text starts with `-- tidegate <version> <name>`, so its SHA changes with the version and two tidegate
 * versions sharing a Redis never run each other's scripts; its versioned name is `<name>_v<version>`
 * (e.g. `claim_v0_1_0`). Files starting with `_` are not scripts; `prelude` names one of them (shared helpers and
 * return codes) to prepend to every script of the folder.
 *
 * Folders are found next to the calling module, or — when running compiled code from dist/ — in the source tree
 * (`upFromDist` is the path from the compiled module's folder to the source folder, e.g. "../../planner").
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";
import { packageVersion } from "./paths.js";

/** Finds folder (or file) `rel` beside `moduleUrl`'s file, or under `upFromDist` from it. */
export function locateBeside(moduleUrl: string, rel: string, upFromDist: string): string {
  const here = dirname(fileURLToPath(moduleUrl));
  for (const dir of [join(here, rel), join(here, upFromDist, rel)]) if (existsSync(dir)) return dir;
  throw new Error(`cannot find ${rel} near ${here}`);
}

/** One script as loaded: `command` is the versioned name, `lua` the full text sent to Redis. */
export interface ScriptDef {
  name: string;
  command: string;
  numberOfKeys: number;
  lua: string;
}

export interface ScriptDirOptions {
  /** A `_*.lua` file in the same folder whose text is prepended to every script. */
  prelude?: string;
}

/** Reads every `<name>-<NKEYS>.lua` in `dir`; a `.lua` file not named so (and not starting with `_`) is an error. */
export function loadScriptDir(dir: string, opts: ScriptDirOptions = {}): ScriptDef[] {
  const version = packageVersion();
  const suffix = "_v" + version.replace(/[^0-9A-Za-z]/g, "_");
  const prelude = opts.prelude === undefined ? "" : readFileSync(join(dir, opts.prelude), "utf8") + "\n";
  const out: ScriptDef[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith(".lua") || file.startsWith("_")) continue;
    const m = /^([a-z][a-z-]*)-(\d+)\.lua$/.exec(file);
    if (m === null) throw new Error(`script ${join(dir, file)} must be named <name>-<NKEYS>.lua`);
    const name = m[1]!;
    out.push({
      name,
      command: name.replace(/-/g, "_") + suffix,
      numberOfKeys: Number(m[2]),
      lua: `-- tidegate ${version} ${name}\n${prelude}${readFileSync(join(dir, file), "utf8")}`,
    });
  }
  return out;
}

/** The scripts of one folder, run on one ioredis client. */
export class LuaScripts {
  private readonly scripts = new Map<string, ScriptDef & { sha: string }>();

  constructor(
    private readonly client: Redis,
    dir: string,
    opts: ScriptDirOptions = {},
  ) {
    for (const s of loadScriptDir(dir, opts)) this.scripts.set(s.name, { ...s, sha: createHash("sha1").update(s.lua).digest("hex") });
  }

  /** Script names (without version) this runner knows. */
  names(): string[] {
    return [...this.scripts.keys()];
  }

  /** The versioned names, for logs and tests. */
  commands(): string[] {
    return [...this.scripts.values()].map((s) => s.command);
  }

  /** Runs `name` with exactly its declared number of keys. */
  async run(name: string, keys: readonly string[], args: readonly (string | number | Buffer)[]): Promise<unknown> {
    const s = this.scripts.get(name);
    if (s === undefined) throw new Error(`no Lua script ${name}`);
    if (keys.length !== s.numberOfKeys) throw new Error(`script ${s.command} takes ${s.numberOfKeys} keys, got ${keys.length}`);
    try {
      return await this.client.evalsha(s.sha, s.numberOfKeys, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return this.client.eval(s.lua, s.numberOfKeys, ...keys, ...args);
    }
  }
}
