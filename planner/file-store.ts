/**
 * Plan reports kept on disk, for `tidegate dev` (`<queue.dataDir>/planner/plans/`): one `<id>.json` per report,
 * each written durably (durable-file.ts: temporary file, fsync, rename), so a restart serves every plan made before
 * it and a crash loses none already stored. The newest `keep` reports (by decision id) are kept; older files are
 * removed as newer ones arrive. Reports are held in memory too (reads never touch the disk).
 *
 * A damaged file (one that is not JSON, or not a report whose id is its name) does not stop the store: it is moved
 * aside to `<id>.json.damaged-N` and named in `opened.setAside`, and every other report is served — the valid part
 * is kept. One process per directory: two processes writing the same directory would each miss the other's reports.
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { listDurable, removeDurably, setAside, writeDurably } from "./durable-file.js";
import type { PlanReport } from "./report.js";
import type { PlanStore } from "./store.js";

/** Ids that are safe as file names (what the planner makes: `plan-<decisionId>-<hex>`). */
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Newest first: higher decision id, then later madeAtMs. */
const newestFirst = (a: PlanReport, b: PlanReport) => b.decisionId - a.decisionId || b.madeAtMs - a.madeAtMs;

/** Why `value` (read from `<name>`) is not a stored report, or undefined when it is one. */
function notAReport(value: unknown, id: string): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not a JSON object";
  const r = value as Record<string, unknown>;
  if (r.id !== id) return `its id ${JSON.stringify(r.id)} is not its file name`;
  for (const k of ["decisionId", "madeAtMs", "intervalMs"]) if (typeof r[k] !== "number" || !Number.isFinite(r[k])) return `${k} is not a number`;
  for (const k of ["forecasts", "actions", "unmet", "warnings", "acks", "spot"]) if (!Array.isArray(r[k])) return `${k} is not an array`;
  for (const k of ["solver", "cost"]) if (typeof r[k] !== "object" || r[k] === null) return `${k} is missing`;
  return undefined;
}

/** What `FilePlanStore.open` found in its directory. */
export interface OpenedPlans {
  dir: string;
  /** Reports loaded. */
  plans: number;
  /** Files that could not be read as reports: where each was moved and why. */
  setAside: { file: string; movedTo: string; why: string }[];
}

/** The file-backed PlanStore (see the file comment). Open it with `FilePlanStore.open`. */
export class FilePlanStore implements PlanStore {
  private readonly reports: PlanReport[];
  /** Writes run one at a time, in the order `put` was called. */
  private writes: Promise<void> = Promise.resolve();

  private constructor(readonly dir: string, private readonly keep: number, loaded: PlanReport[], readonly opened: OpenedPlans) {
    this.reports = loaded.sort(newestFirst);
  }

  /** Opens `dir` (created if missing), loading every report in it; damaged files are set aside (see the file comment). */
  static async open(dir: string, keep = 168): Promise<FilePlanStore> {
    if (!(Number.isInteger(keep) && keep >= 1)) throw new RangeError(`keep must be an integer ≥ 1, got ${keep}`);
    await mkdir(dir, { recursive: true });
    const loaded: PlanReport[] = [];
    const opened: OpenedPlans = { dir, plans: 0, setAside: [] };
    for (const name of await listDurable(dir, ".json")) {
      const id = name.slice(0, -".json".length);
      // A file that cannot be read at all (permissions, I/O) is an error, not damage: it throws.
      const text = await readFile(join(dir, name), "utf8");
      let why: string | undefined;
      try {
        const value: unknown = JSON.parse(text);
        why = notAReport(value, id);
        if (why === undefined) loaded.push(value as PlanReport);
      } catch (err) {
        if (!(err instanceof SyntaxError)) throw err;
        why = `not JSON (${err.message})`;
      }
      if (why !== undefined) opened.setAside.push({ file: name, movedTo: await setAside(dir, name), why });
    }
    opened.plans = loaded.length;
    const store = new FilePlanStore(dir, keep, loaded, opened);
    // A directory holding more than `keep` (a smaller keep than last time) is trimmed now.
    for (const gone of store.reports.splice(keep)) await removeDurably(dir, `${gone.id}.json`);
    return store;
  }

  /** Stores `report` durably (resolves once it is on disk); one with the same id is replaced. */
  async put(report: PlanReport): Promise<void> {
    if (!SAFE_ID.test(report.id)) throw new RangeError(`plan id ${JSON.stringify(report.id)} cannot be a file name: letters, digits, ".", "_" and "-" only`);
    const text = JSON.stringify(report);
    const at = this.reports.findIndex((r) => r.id === report.id);
    if (at >= 0) this.reports.splice(at, 1);
    this.reports.push(report);
    this.reports.sort(newestFirst);
    const dropped = this.reports.splice(this.keep);
    const write = this.writes.then(async () => {
      if (!dropped.some((d) => d.id === report.id)) await writeDurably(this.dir, `${report.id}.json`, text);
      for (const d of dropped) await removeDurably(this.dir, `${d.id}.json`);
    });
    // A failed write fails this put; later puts still run.
    this.writes = write.catch(() => undefined);
    await write;
  }

  async get(id: string): Promise<PlanReport | undefined> {
    return this.reports.find((r) => r.id === id);
  }

  async list(): Promise<PlanReport[]> {
    return [...this.reports];
  }

  /** Resolves once every write so far is on disk. */
  async flush(): Promise<void> {
    await this.writes;
  }
}
