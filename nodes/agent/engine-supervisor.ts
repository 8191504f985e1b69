/**
 * EngineSupervisor: the NodeEngineHost that runs real engine processes, each through a keeper (keeper.ts) that kills
 * the engine's whole process group when the agent's pipe closes, so engines die with the agent even on `kill -9`.
 * The default engine is `tidegate engine-sim --parameters-from <agent>`; a command template runs anything else.
 * The agent picks each engine's port (a free port on the engine host). Checks (store complete, slots, template
 * syntax) are NodeAgent's; this class only acts.
 */
import { settingsArgs } from "../../core/engine-settings.js";
import { tlsArgs, type TlsFiles } from "../../core/tls.js";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { TidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { NodeEngineHost, EngineInfo, EngineSpec, EngineState } from "./handle.js";
import { parseCommandTemplate, renderCommand } from "./template.js";

/** How the supervisor starts engines. */
export interface EngineSupervisorOptions {
  /** Address engines bind to and the host of their URL (must be dialable by the region). */
  engineHost: string;
  /** The agent's gRPC address, passed to engine-sim as --parameters-from (read at each start; "" = none). */
  parametersFrom: () => string;
  /** TLS files engine-sim uses to reach --parameters-from (the agent's own, when its gRPC is TLS). */
  parametersTls?: TlsFiles;
  log: Logger;
  /** The compiled CLI (default: defaultCliPath()). */
  cliPath?: string;
  /** The compiled keeper (default: keeper.js next to this module in dist/). */
  keeperPath?: string;
  /** Grace the keeper gives an engine when the agent goes away (SIGTERM → SIGKILL), default 2000. */
  orphanGraceMs?: number;
  /** Exited engines kept for Info (oldest dropped first), default 32. */
  keepExited?: number;
}

const STDERR_LINES = 20;
const MAX_LINE_CHARS = 64 * 1024;
const DEFAULT_START_TIMEOUT_MS = 20_000;
const CLOSE_GRACE_MS = 3000;

/** The compiled CLI: next to this module in dist/, or dist/bin/tidegate.js under the repository root. */
export function defaultCliPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const compiled = resolve(here, "../../bin/tidegate.js");
  if (here.includes(`${"/"}dist${"/"}`) && existsSync(compiled)) return compiled;
  return resolve(here, "../../dist/bin/tidegate.js");
}

/** The compiled keeper: keeper.js next to this module when it runs from dist/, else dist/nodes/agent/keeper.js. */
export function defaultKeeperPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const beside = join(here, "keeper.js");
  if (existsSync(beside)) return beside;
  return join(here, "..", "..", "dist", "nodes", "agent", "keeper.js");
}

/**
 * The `tidegate engine-sim` arguments of a StartEngine: model, GPU, tp, where to listen, --time-scale, the agent's
 * block store (--parameters-from, none when it is "": an in-process agent checked the store itself; --parameters-wait-ms
 * when it starts before its blocks), and the spec's --pipeline, --stage (a stage process) and --settings (its
 * EngineSettings as JSON: core/engine-settings.ts; the region's engines section and routing.blockTokens,
 * region/runtime/build-sim-engine.ts engineSettingsOf), the flag a static region's spawned engines get too.
 */
export function engineSimArgs(spec: EngineSpec, o: { engineHost: string; port: number; parametersFrom: string; parametersTls?: TlsFiles }): string[] {
  return [
    "engine-sim", "--model", spec.model, "--gpu", spec.gpu, "--tp", String(spec.gpus), "--host", o.engineHost, "--port", String(o.port),
    "--time-scale", String(spec.timeScale ?? 1),
    ...(o.parametersFrom === "" ? [] : ["--parameters-from", o.parametersFrom, ...tlsArgs(o.parametersTls)]),
    ...(spec.awaitBlocks === true ? ["--parameters-wait-ms", String(spec.startTimeoutMs || DEFAULT_START_TIMEOUT_MS)] : []),
    ...(spec.pipeline === undefined ? [] : ["--pipeline", spec.pipeline]),
    ...(spec.stage === undefined ? [] : ["--stage", spec.stage]),
    ...settingsArgs(spec.settings),
  ];
}

/** A free TCP port on `host` (bound and released; the engine binds it right after). */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, host, () => {
      const a = s.address();
      const port = typeof a === "object" && a !== null ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

interface Engine {
  info: EngineInfo;
  keeper?: ChildProcess;
  stderr: string[];
  /** Set once the keeper has exited; resolves with the final info. */
  exited: Promise<EngineInfo>;
  /** Why the agent ended it ("stopped", "no URL after …"), prefixed to detail. */
  endedBy?: string;
}

/** What a keeper reports on fd 3 (keeper.ts). */
interface KeeperReport {
  pid?: number;
  code?: number | null;
  signal?: string | null;
  error?: string;
}

/**
 * Calls `onLine` for each line of `stream` (at most MAX_LINE_CHARS each); the returned function hands over an
 * unterminated last line.
 */
function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): () => void {
  let part = "";
  stream.on("data", (d: Buffer) => {
    part += d.toString("utf8");
    for (let nl = part.indexOf("\n"); nl !== -1; nl = part.indexOf("\n")) {
      const line = part.slice(0, nl);
      part = part.slice(nl + 1);
      onLine(line);
    }
    if (part.length > MAX_LINE_CHARS) {
      onLine(part.slice(0, MAX_LINE_CHARS)); // a line without an end (progress bars) must not grow without bound
      part = "";
    }
  });
  return () => {
    if (part !== "") onLine(part);
    part = "";
  };
}

function hostForUrl(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/** Spawns and stops engine processes through keepers; see the module comment. */
export class EngineSupervisor implements NodeEngineHost {
  private readonly engines = new Map<string, Engine>();
  private readonly cli: string;
  private readonly keeper: string;

  constructor(private readonly o: EngineSupervisorOptions) {
    this.cli = o.cliPath ?? defaultCliPath();
    this.keeper = o.keeperPath ?? defaultKeeperPath();
  }

  list(): EngineInfo[] {
    return [...this.engines.values()].map((e) => ({ ...e.info }));
  }

  start(spec: EngineSpec): Promise<EngineInfo> {
    const prev = this.engines.get(spec.instanceId);
    if (prev !== undefined && prev.info.state !== "exited") return Promise.resolve({ ...prev.info });
    const info: EngineInfo = { instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, gpus: spec.gpus, url: "", pid: 0, state: "starting", startedAtMs: Date.now(), detail: "", ...(spec.settings?.role === undefined ? {} : { role: spec.settings.role }) };
    let markExited!: (i: EngineInfo) => void;
    const e: Engine = { info, stderr: [], exited: new Promise((r) => (markExited = r)) };
    this.engines.delete(spec.instanceId);
    this.engines.set(spec.instanceId, e);
    this.trimExited();
    return this.launch(spec, e, markExited);
  }

  private async launch(spec: EngineSpec, e: Engine, markExited: (i: EngineInfo) => void): Promise<EngineInfo> {
    const log = this.o.log.child({ instanceId: spec.instanceId, model: spec.model });
    let port: number;
    try {
      port = await freePort(this.o.engineHost);
    } catch (err) {
      e.info.state = "exited";
      e.info.detail = `no free port on ${this.o.engineHost}: ${(err as Error).message}`;
      markExited({ ...e.info });
      throw new TidegateError("internal", `engine ${spec.instanceId}: ${e.info.detail}`, { cause: err });
    }
    if (e.endedBy !== undefined) {
      e.info.state = "exited";
      e.info.detail = `${e.endedBy} before it was spawned`;
      markExited({ ...e.info });
      return { ...e.info };
    }
    const sim = spec.commandTemplate === undefined || spec.commandTemplate === "";
    const argv = sim
      ? [process.execPath, this.cli, ...engineSimArgs(spec, { engineHost: this.o.engineHost, port, parametersFrom: this.o.parametersFrom(), ...(this.o.parametersTls === undefined ? {} : { parametersTls: this.o.parametersTls }) })]
      : renderCommand(parseCommandTemplate(spec.commandTemplate!), { model: spec.model, port: String(port), host: this.o.engineHost, gpu: spec.gpu, tp: String(spec.gpus), instance: spec.instanceId });
    e.info.url = `http://${hostForUrl(this.o.engineHost)}:${port}`;
    const keeper = spawn(process.execPath, [this.keeper, String(this.o.orphanGraceMs ?? 2000), ...argv], { stdio: ["pipe", "pipe", "pipe", "pipe"] });
    e.keeper = keeper;
    keeper.stdin!.on("error", () => {}); // EPIPE after the keeper exited; its exit is handled below
    let exitReport: KeeperReport = {};
    let pidSeen!: () => void;
    const spawned = new Promise<void>((r) => (pidSeen = r));
    const flushReports = eachLine(keeper.stdio[3] as NodeJS.ReadableStream, (line) => {
      let msg: KeeperReport;
      try {
        msg = JSON.parse(line) as KeeperReport;
      } catch {
        log.warn("keeper sent an unreadable report", { line: line.slice(0, 200) });
        return;
      }
      if (msg.pid !== undefined) {
        e.info.pid = msg.pid;
        pidSeen();
      } else exitReport = msg;
    });
    const flushStderr = eachLine(keeper.stderr!, (line) => {
      if (line.trim() === "") return;
      e.stderr.push(line.slice(0, 500));
      if (e.stderr.length > STDERR_LINES) e.stderr.shift();
    });
    // The first stdout line is engine-sim's URL; the rest is read and dropped so an engine never blocks on a full pipe.
    let urlSeen: ((url: string) => void) | undefined;
    const urlLine = new Promise<string>((r) => (urlSeen = r));
    eachLine(keeper.stdout!, (line) => {
      urlSeen?.(line.trim());
      urlSeen = undefined;
    });
    const keeperGone = new Promise<void>((resolve) =>
      keeper.once("close", (code, signal) => {
        flushReports();
        flushStderr();
        const how =
          exitReport.error !== undefined
            ? exitReport.error
            : exitReport.code !== undefined || exitReport.signal !== undefined
              ? exitReport.signal
                ? `killed by ${exitReport.signal}`
                : `exited with code ${exitReport.code}`
              : `keeper exited (${signal ?? code}) without a report`;
        e.info.state = "exited";
        e.info.detail = [e.endedBy, how, e.stderr.length > 0 ? `stderr:\n${e.stderr.join("\n")}` : undefined].filter((x) => x !== undefined).join("; ");
        log.info("engine exited", { detail: e.info.detail.split("\n")[0] });
        markExited({ ...e.info });
        pidSeen();
        resolve();
      }),
    );
    await Promise.race([spawned, keeperGone]);
    if (e.info.state === "exited") return { ...e.info };
    log.info("engine spawned", { pid: e.info.pid, url: e.info.url, argv: argv.slice(sim ? 2 : 0).join(" ") });
    if (!sim) return { ...e.info };
    const timeoutMs = spec.startTimeoutMs || DEFAULT_START_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs)));
    const first = await Promise.race([urlLine, keeperGone.then(() => "exited" as const), timedOut]);
    clearTimeout(timer);
    if (first === "timeout") {
      e.endedBy = `no URL line after ${timeoutMs} ms`;
      return (await this.stop(spec.instanceId, 0)) ?? { ...e.info };
    }
    if (first === "exited" || (e.info.state as EngineState) === "exited") return { ...e.info };
    if (!/^https?:\/\/\S+$/.test(first)) {
      e.endedBy = `expected a URL as its first stdout line, got ${JSON.stringify(first.slice(0, 200))}`;
      return (await this.stop(spec.instanceId, 0)) ?? { ...e.info };
    }
    e.info.url = first;
    e.info.state = "running";
    return { ...e.info };
  }

  async stop(instanceId: string, graceMs: number): Promise<EngineInfo | undefined> {
    const e = this.engines.get(instanceId);
    if (e === undefined) return undefined;
    if (e.info.state === "exited") return { ...e.info };
    e.endedBy ??= "stopped";
    const keeper = e.keeper;
    if (keeper === undefined) return e.exited; // still picking its port; launch settles it
    keeper.stdin!.write(`stop ${Math.max(0, Math.round(graceMs))}\n`);
    // Backstop: a keeper that does not finish in time gets the group killed from here, then itself.
    const backstop = setTimeout(() => {
      if (e.info.pid > 0) {
        try {
          process.kill(-e.info.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      keeper.kill("SIGKILL");
    }, graceMs + 5000);
    const info = await e.exited;
    clearTimeout(backstop);
    return info;
  }

  /** Stops every engine (SIGTERM, SIGKILL after 3 s) and waits for them. */
  async close(): Promise<void> {
    await Promise.all([...this.engines.keys()].map((id) => this.stop(id, CLOSE_GRACE_MS)));
  }

  private trimExited(): void {
    const exited = [...this.engines.values()].filter((e) => e.info.state === "exited");
    for (const e of exited.slice(0, Math.max(0, exited.length - (this.o.keepExited ?? 32)))) this.engines.delete(e.info.instanceId);
  }
}
