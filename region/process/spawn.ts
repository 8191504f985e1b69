/**
 * `--spawn-engines`: one `tidegate engine-sim` child process per instance, reached through the openai-http adapter
 * exactly as vLLM would be. Each child is started with --port 0 and prints its base URL as its first stdout line.
 * Each runs under a keeper (nodes/agent/keeper.ts) in its own process group; the keeper's stdin is a pipe only this
 * process holds, so when the region dies — even by `kill -9` — the keeper stops the engine (SIGTERM, SIGKILL after
 * 2 s). Children are stopped with SIGTERM (SIGKILL after a grace period) when the region closes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import type { EngineFactory, InstanceSlot } from "../actuator/static.js";
import { defaultCliPath, defaultKeeperPath } from "../../nodes/agent/engine-supervisor.js";
import { instanceKvBytes } from "../runtime/agents-host.js";

export { defaultCliPath } from "../../nodes/agent/engine-supervisor.js";

/** KV bytes of one instance (GPU memory × 0.9 − weights, core/models.ts), to scale vLLM's usage fraction. */
export function slotKvBytes(slot: InstanceSlot): number {
  return instanceKvBytes(slot.model, slot.gpu, slot.tp, slot.instanceId);
}

/** Engines at the URLs of the config (engines.kind "openai-http"); `priorityField`: engines.priorityField; `roles`: engines.roles. */
export function urlEngineFactory(clock: Clock, log?: Logger, priorityField = false, roles: Readonly<Record<string, "prefill" | "decode" | "both">> = {}): EngineFactory {
  return async (slot) => {
    if (slot.url === undefined) throw new TidegateError("invalid_config", `no URL for ${slot.instanceId}`);
    const role = roles[slot.url];
    return new OpenAIHttpEngine({ instanceId: slot.instanceId, model: slot.model, baseUrl: slot.url, clock, kvBytesCapacity: slotKvBytes(slot), priorityField, ...(role === undefined ? {} : { role }), ...(log === undefined ? {} : { log }) });
  };
}

export interface SpawnedEngines {
  factory: EngineFactory;
  /** Stops every child (SIGTERM, SIGKILL after `graceMs`). */
  stopAll(graceMs?: number): Promise<void>;
  /** Children alive now. */
  readonly count: number;
}

/**
 * A factory that spawns one engine-sim per slot with the flags `flags(model, gpu)` gives (region/runtime/build-sim-engine.ts
 * engineSimFlags of the config's simEngineParams: --time-scale, then --settings or --pipeline),
 * and the means to stop them all.
 */
export function spawnedEngines(clock: Clock, flags: (model: string, gpu: string) => readonly string[], opts: { cliPath?: string; keeperPath?: string; log?: Logger; startTimeoutMs?: number } = {}): SpawnedEngines {
  const cli = opts.cliPath ?? defaultCliPath();
  const keeper = opts.keeperPath ?? defaultKeeperPath();
  const log = opts.log ?? silentLogger;
  const children = new Set<ChildProcess>();
  // On exit the keepers are told to stop their engines (their stdin also closes when this process is gone).
  const killAll = () => {
    for (const c of children) c.kill("SIGTERM");
  };
  process.once("exit", killAll);
  let stopping = false;

  // A child that dies after it was ready (killed, crashed) is started again on the same port, so the adapter's URL
  // stays valid: backoff from 200 ms doubling to 5 s while starts fail, until the region stops. The instance is out
  // of service meanwhile (engine-health.ts sees its scrapes fail) and back once the new child answers.
  const restart = (slot: InstanceSlot, port: number, delayMs: number) => {
    clock.after(delayMs, () => {
      if (stopping) return;
      start(slot, port).then(
        () => log.warn("engine-sim restarted", { instanceId: slot.instanceId, port }),
        (err: unknown) => {
          log.warn("engine-sim restart failed; trying again", { instanceId: slot.instanceId, err });
          restart(slot, port, Math.min(5000, delayMs * 2));
        },
      );
    });
  };

  const start = (slot: InstanceSlot, port = 0): Promise<string> =>
    new Promise<string>((resolveUrl, reject) => {
      const args = [keeper, "2000", process.execPath, cli, "engine-sim", "--model", slot.model, "--gpu", slot.gpu, "--tp", String(slot.tp), "--host", "127.0.0.1", "--port", String(port), ...flags(slot.model, slot.gpu)];
      const child = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "inherit"] });
      child.stdin!.on("error", () => {}); // EPIPE after the keeper exited; its exit is handled below
      children.add(child);
      let out = "";
      const timer = setTimeout(() => fail(`no URL after ${opts.startTimeoutMs ?? 20_000} ms`), opts.startTimeoutMs ?? 20_000);
      const fail = (why: string) => {
        clearTimeout(timer);
        child.kill("SIGTERM"); // the keeper stops the engine's whole group
        reject(new TidegateError("upstream_error", `engine-sim for ${slot.instanceId}: ${why}`));
      };
      const onData = (d: Buffer) => {
        out += d.toString("utf8");
        const nl = out.indexOf("\n");
        if (nl === -1) return;
        clearTimeout(timer);
        child.stdout!.off("data", onData);
        child.stdout!.resume();
        const url = out.slice(0, nl).trim();
        if (!/^https?:\/\/\S+$/.test(url)) return fail(`expected a URL as its first line, got ${JSON.stringify(url)}`);
        resolveUrl(url);
      };
      child.stdout!.on("data", onData);
      child.once("exit", (code, sig) => {
        children.delete(child);
        clearTimeout(timer);
        if (out.indexOf("\n") === -1) reject(new TidegateError("upstream_error", `engine-sim for ${slot.instanceId} exited (${code ?? sig}) before printing its URL`));
        else {
          log.warn("engine-sim exited", { instanceId: slot.instanceId, code, signal: sig });
          const readyPort = Number(/:(\d+)\/?$/.exec(out.slice(0, out.indexOf("\n")).trim())?.[1] ?? 0);
          if (!stopping && readyPort > 0) restart(slot, readyPort, 200);
        }
      });
    });

  return {
    factory: async (slot) => {
      const url = await start(slot);
      return new OpenAIHttpEngine({ instanceId: slot.instanceId, model: slot.model, baseUrl: url, clock, kvBytesCapacity: slotKvBytes(slot), log });
    },
    get count() {
      return children.size;
    },
    stopAll: async (graceMs = 3000) => {
      stopping = true;
      process.off("exit", killAll);
      await Promise.all(
        [...children].map(
          (c) =>
            new Promise<void>((done) => {
              const force = setTimeout(() => c.kill("SIGKILL"), graceMs);
              c.once("exit", () => {
                clearTimeout(force);
                done();
              });
              c.kill("SIGTERM");
            }),
        ),
      );
    },
  };
}
