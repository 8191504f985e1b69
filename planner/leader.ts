/**
 * One leader across planner replicas (DESIGN: "one leader (Redis lock)"). A lock with an expiry that the leader
 * renews each round; a leader that stops renewing loses it after `ttlMs`, and another replica takes over. The lock
 * also mints decision ids (fencing tokens): monotonic, and only for the holder. Adapters: Redis (Lua scripts in
 * lua/) and in-memory on a Clock (dev, replay, tests).
 */
import type { Redis } from "ioredis";
import type { Clock } from "../core/clock.js";
import { LuaScripts, locateBeside } from "../core/lua.js";

/** Outcome of an acquire. */
export type AcquireResult = "acquired" | "renewed" | "held_by_other";

/** The leader lock port (Redis and in-memory adapters). */
export interface LeaderLock {
  /** Takes or renews the lock for `holder` for `ttlMs`. */
  acquire(holder: string, ttlMs: number): Promise<AcquireResult>;
  /** Releases it if `holder` has it; false otherwise. */
  release(holder: string): Promise<boolean>;
  /** The next decision id (≥ 1, increasing), or undefined when `holder` does not hold the lock. */
  nextDecisionId(holder: string): Promise<number | undefined>;
  /**
   * Makes every later decision id greater than `decisionId`: the loop calls it with the newest stored plan's id, so a
   * lock whose counter lives in memory (reopened over a plan store on disk, `tidegate dev`) continues after the plans
   * it finds instead of minting plan-1 again. Absent where the counter outlives the process (Redis).
   */
  continueAfter?(decisionId: number): Promise<void>;
}

/** Lock return codes of lua/lock-acquire-1.lua. */
export const LOCK_CODES: Record<number, AcquireResult> = { 1: "acquired", 2: "renewed", [-1]: "held_by_other" };

/** The lock on Redis, every change one Lua script. */
export class RedisLeaderLock implements LeaderLock {
  private readonly scripts: LuaScripts;
  private readonly lockKey: string;
  private readonly counterKey: string;

  /** Keys: `<keyPrefix>planner:leader` and `<keyPrefix>planner:decision`. The client is the caller's. */
  constructor(client: Redis, keyPrefix: string) {
    this.scripts = new LuaScripts(client, locateBeside(import.meta.url, "lua", "../../planner"));
    this.lockKey = `${keyPrefix}planner:leader`;
    this.counterKey = `${keyPrefix}planner:decision`;
  }

  async acquire(holder: string, ttlMs: number): Promise<AcquireResult> {
    if (!(ttlMs > 0)) throw new RangeError(`ttlMs must be > 0, got ${ttlMs}`);
    const code = Number(await this.scripts.run("lock-acquire", [this.lockKey], [holder, Math.ceil(ttlMs)]));
    const r = LOCK_CODES[code];
    if (r === undefined) throw new Error(`lock-acquire returned ${code}`);
    return r;
  }

  async release(holder: string): Promise<boolean> {
    return Number(await this.scripts.run("lock-release", [this.lockKey], [holder])) === 1;
  }

  async nextDecisionId(holder: string): Promise<number | undefined> {
    const id = Number(await this.scripts.run("decision-next", [this.lockKey, this.counterKey], [holder]));
    return id > 0 ? id : undefined;
  }
}

/** The same semantics in memory, with expiry on an injected Clock. */
export class MemoryLeaderLock implements LeaderLock {
  private holder: string | undefined;
  private expiresAtMs = 0;
  private decision = 0;
  constructor(private readonly clock: Clock) {}

  private current(): string | undefined {
    return this.holder !== undefined && this.clock.now() < this.expiresAtMs ? this.holder : undefined;
  }

  async acquire(holder: string, ttlMs: number): Promise<AcquireResult> {
    if (!(ttlMs > 0)) throw new RangeError(`ttlMs must be > 0, got ${ttlMs}`);
    const cur = this.current();
    if (cur !== undefined && cur !== holder) return "held_by_other";
    this.holder = holder;
    this.expiresAtMs = this.clock.now() + ttlMs;
    return cur === holder ? "renewed" : "acquired";
  }

  async release(holder: string): Promise<boolean> {
    if (this.current() !== holder) return false;
    this.holder = undefined;
    return true;
  }

  async nextDecisionId(holder: string): Promise<number | undefined> {
    return this.current() === holder ? ++this.decision : undefined;
  }

  async continueAfter(decisionId: number): Promise<void> {
    if (Number.isFinite(decisionId)) this.decision = Math.max(this.decision, Math.floor(decisionId));
  }
}
