/**
 * The queue's Lua scripts (lua/<name>-<NKEYS>.lua, with lua/_common.lua — helpers and return codes — prepended to
 * each), loaded and run through core/lua.ts: versioned names such as `claim_v0_1_0`, EVALSHA with EVAL on NOSCRIPT.
 */
import type { Redis } from "ioredis";
import { LuaScripts, loadScriptDir, locateBeside, type ScriptDef } from "../../core/lua.js";
import { packageVersion } from "../../core/paths.js";

export { packageVersion, type ScriptDef };

const OPTIONS = { prelude: "_common.lua" };

function luaDir(): string {
  return locateBeside(import.meta.url, "lua", "../../../router/queue");
}

/** Reads every queue script; throws if a file name does not follow `name-NKEYS.lua`. */
export function loadScripts(): ScriptDef[] {
  return loadScriptDir(luaDir(), OPTIONS);
}

/** Runs the queue's scripts on one client. */
export class ScriptRunner extends LuaScripts {
  constructor(client: Redis) {
    super(client, luaDir(), OPTIONS);
  }
}
