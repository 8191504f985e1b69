/**
 * Where a request goes within the region (SageServe §6.2, "Routing logic at region endpoint"): the endpoint of its
 * model with the least effective memory utilization, then the instance the routing policy picks (scoring/plugins.ts;
 * join-the-shortest-queue on remaining tokens by default, region/gateway/jsq.ts), and the books behind both.
 *
 * Between stats refreshes (every `statsRefreshMs` of the injected Clock) it adds its own in-flight estimate to each
 * instance — the prompt + max output tokens and the prompt's KV bytes of the requests it sent there since the last
 * refresh — so a burst that arrives before the engines' stats move spreads over instances and endpoints instead of
 * herding onto the first. Both of the gateway's request paths book through `book` and `settle`, so a replayed burst
 * spreads exactly as a live one does.
 */
import { PLAIN_ROLES, roleOf, type Role } from "./roles.js";
import type { Clock } from "../../core/clock.js";
import { DEFAULT_PD_MIN_PREFILL_TOKENS } from "../../core/defaults.js";
import { DEFAULT_BLOCK_TOKENS, blockHashesOfBody } from "../../core/prefix.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { InstanceRecord, ModelEntry } from "./instance-table.js";
import { pickEndpoint } from "./jsq.js";
import { JSQ_POLICY, RoutingPolicy, type PolicySpec } from "./scoring/plugins.js";
import { PrefixIndex } from "./scoring/prefix-index.js";

/** Where one request went. */
export interface RouteChoice {
  endpointId: string;
  instanceId: string;
}

/** What one admitted request added to its instance's estimate, to take back when it ends (`settle`). */
export interface Ticket {
  rec: InstanceRecord;
  epoch: number;
  tokens: number;
  kvBytes: number;
  /** Prompt tokens the prefix index says the instance holds (0 without block hashes). */
  cachedTokens: number;
  /** Ends the request's in-flight entry in the prefix index (scoring/prefix-index.ts `routed`), if it has one. */
  unroute: (() => void) | undefined;
}

export interface ChooserOptions {
  clock: Clock;
  /** How long an instance's stats snapshot is used before `engine.stats()` is read again (ms, ≥ 0). */
  statsRefreshMs: number;
  /**
   * The plugin policy (default JSQ_POLICY), the block size prompts are hashed with (default 16) and the uncached
   * prompt from which a disaggregated model's request is split in two (default 0: always; pd.ts).
   */
  routing?: { policy: PolicySpec; blockTokens: number; pdMinPrefillTokens?: number };
  /** Called at each routing decision (`book`). */
  onRouted?: (req: GenerateRequest, instanceId: string) => void;
}

const NO_BLOCKS: readonly number[] = Object.freeze([]);

/** Takes an ended request out of the estimate (only within the refresh epoch it was added in). */
export function settle(t: Ticket): void {
  t.unroute?.();
  t.rec.inFlight--;
  if (t.rec.epoch === t.epoch) {
    t.rec.addedTokens -= t.tokens;
    t.rec.addedKvBytes -= t.kvBytes;
  }
}

/** Instance choice and its books for one region's gateway. Not thread-safe (one event loop). */
export class Chooser {
  /** Instance choice (scoring/plugins.ts) and what each instance holds of which prefixes (scoring/prefix-index.ts). */
  readonly policy: RoutingPolicy;
  readonly prefixIndex: PrefixIndex;
  /** routing.pdMinPrefillTokens (pd.ts `splits`). */
  readonly pdMinPrefillTokens: number;

  constructor(private readonly o: ChooserOptions) {
    this.pdMinPrefillTokens = o.routing?.pdMinPrefillTokens ?? DEFAULT_PD_MIN_PREFILL_TOKENS;
    this.policy = new RoutingPolicy(o.routing?.policy ?? JSQ_POLICY);
    this.prefixIndex = new PrefixIndex(o.routing?.blockTokens ?? DEFAULT_BLOCK_TOKENS);
    if (!(o.statsRefreshMs >= 0)) throw new RangeError(`statsRefreshMs must be ≥ 0, got ${o.statsRefreshMs}`);
  }

  /** Starts indexing a new instance's prefixes when the policy scores them (the table's `onAdded`). */
  attach(rec: InstanceRecord, kvBytesPerToken: number): void {
    if (!this.policy.needsPrefix) return;
    // The routing history of an instance remembers about as many blocks as its KV holds.
    const kvTokens = rec.engine.stats().kvBytesCapacity / kvBytesPerToken;
    this.prefixIndex.attach(rec.engine.instanceId, kvTokens > 1 ? kvTokens / this.prefixIndex.blockTokens : 65_536, rec.engine.kvEvents);
  }

  /** Forgets a removed instance's prefixes (the table's `onRemoved`). */
  detach(instanceId: string): void {
    this.prefixIndex.detach(instanceId);
  }

  /** Reads an instance's stats now and drops the in-flight estimate added since the last read. */
  refresh(rec: InstanceRecord, now: number): void {
    rec.stats = rec.engine.stats();
    rec.statsAtMs = now;
    rec.epoch++;
    rec.addedTokens = 0;
    rec.addedKvBytes = 0;
  }

  /** Where a request with no prompt blocks would go now, without booking it. */
  route(model: ModelEntry): RouteChoice | undefined {
    const rec = this.choose(model, undefined, NO_BLOCKS);
    return rec === undefined ? undefined : { endpointId: rec.endpoint.endpointId, instanceId: rec.engine.instanceId };
  }

  /**
   * Endpoint by estimated utilization, then the instance by the routing policy (scoring/plugins.ts; JSQ on estimated
   * remaining tokens by default) given the prompt's `blocks`; `exclude` holds failed instances.
   */
  choose(model: ModelEntry, exclude: ReadonlySet<InstanceRecord> | undefined, blocks: readonly number[], roles: ReadonlySet<Role> = PLAIN_ROLES): InstanceRecord | undefined {
    const now = this.o.clock.now();
    for (const e of model.endpoints) {
      for (const i of e.instances) if (now - i.statsAtMs >= this.o.statsRefreshMs) this.refresh(i, now);
    }
    // Stale instances (stats unreadable) are routed around while any fresh one serves; only then are they tried. An
    // instance whose engine the region believes down takes nothing (engineDown), and counts as full.
    // Only instances of `roles` take this request (pd.ts: a prefill, a decode, or a plain one).
    const fresh = model.endpoints.some((e) => e.instances.some((i) => i.state === "serving" && i.down === undefined && i.stats.stale !== true && !(exclude?.has(i) ?? false) && roles.has(roleOf(i))));
    for (const e of model.endpoints) {
      let used = 0;
      let capacity = 0;
      e.loads.length = 0;
      for (const i of e.instances) {
        const serving = i.state === "serving" && i.down === undefined && !(exclude?.has(i) ?? false) && !(fresh && i.stats.stale === true) && roles.has(roleOf(i));
        if (i.state === "serving") {
          used += (i.stats.stale === true || i.down !== undefined ? i.stats.kvBytesCapacity : i.stats.kvBytesUsed) + i.addedKvBytes;
          capacity += i.stats.kvBytesCapacity;
        }
        const kvUtilization = i.stats.kvBytesCapacity > 0 ? (i.stats.kvBytesUsed + i.addedKvBytes) / i.stats.kvBytesCapacity : 0;
        e.loads.push({ instanceId: i.engine.instanceId, remainingTokens: i.stats.remainingTokens + i.addedTokens, serving, waiting: i.stats.waiting, kvUtilization, rec: i });
      }
      e.effectiveMemoryUtilization = capacity > 0 ? used / capacity : 1;
    }
    const endpoint = pickEndpoint(model.endpoints.map((e) => ({ endpointId: e.endpointId, effectiveMemoryUtilization: e.effectiveMemoryUtilization, instances: e.loads })));
    if (endpoint === undefined) return undefined;
    const index = this.prefixIndex;
    return this.policy.choose({ blockHashes: blocks, prefixBlocks: (id) => index.prefixBlocks(id, blocks) }, endpoint.instances)?.rec;
  }

  /**
   * The prompt's block hashes when the policy scores prefixes: those the request carries (a trace's), else hashed
   * from its body with the chat template applied, as the engine hashes it (core/prefix.ts); none otherwise.
   */
  blocksOf(req: GenerateRequest): readonly number[] {
    if (!this.policy.needsPrefix) return NO_BLOCKS;
    return req.blockHashes ?? blockHashesOfBody(req.kind, req.body, this.prefixIndex.blockTokens);
  }

  /** Prompt tokens of `req` that `rec`'s instance holds by the prefix index (at most prompt − 1; 0 without block hashes). */
  cachedOn(rec: InstanceRecord, req: GenerateRequest, blocks: readonly number[]): number {
    if (blocks.length === 0) return 0;
    return Math.min(req.promptTokens - 1, this.prefixIndex.prefixBlocks(rec.engine.instanceId, blocks) * this.prefixIndex.blockTokens);
  }

  /**
   * Books a request on the instance chosen for it until the next stats refresh, and reports the decision
   * (`onRouted`): prompt + max output tokens less `cachedOn` (the JSQ load: work still to do, as the engine counts
   * it, core/ports.ts remainingTokens), the prompt's KV bytes (the endpoint's effective memory), one request in
   * flight, and its blocks as routed there. Undo with `settle` when the request ends.
   */
  book(rec: InstanceRecord, req: GenerateRequest, kvBytesPerToken: number, blocks: readonly number[]): Ticket {
    const cachedTokens = this.cachedOn(rec, req, blocks);
    const t: Ticket = { rec, epoch: rec.epoch, tokens: req.promptTokens + req.maxTokens - cachedTokens, kvBytes: req.promptTokens * kvBytesPerToken, cachedTokens, unroute: undefined };
    rec.addedTokens += t.tokens;
    rec.addedKvBytes += t.kvBytes;
    rec.inFlight++;
    t.unroute = this.prefixIndex.routed(rec.engine.instanceId, blocks);
    this.o.onRouted?.(req, rec.engine.instanceId);
    return t;
  }

  /** Stops following the engines' KV events. */
  close(): void {
    this.prefixIndex.close();
  }
}
