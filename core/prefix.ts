/**
 * Prefix identity (issue 34): the block hashes of a prompt, computed the same way by the engine (engine-sim's prefix
 * cache, engines/sim/prefix-cache.ts) and by the routers that score instances and regions by the prefix they
 * hold (region/gateway/scoring/, router/prefix-regions.ts).
 *
 * As vLLM's automatic prefix caching (vllm/v1/core/kv_cache_utils.py `hash_block_tokens`): the prompt, with the chat
 * template applied, is cut into blocks of `blockTokens` tokens; only FULL blocks are hashed, and block i's hash is a
 * hash of (block i−1's hash, block i's tokens), so equal hashes mean equal prefixes up to and including that block.
 *
 * tidegate has no tokenizer: a "token" here is 4 characters of the templated text (the same ⌈chars/4⌉ rule as
 * core/openai.ts estimateTokens), so a block is 4 × blockTokens characters. A real vLLM or SGLang hashes its own
 * tokenizer's ids with its own hash; these hashes are therefore tidegate's own identity of a prefix, equal between
 * the router and engine-sim, and for a real engine a consistent key for the router-side index (routing history).
 *
 * Hashes are integers below 2^53 (two 32-bit FNV-1a lanes), exact as JS numbers and in JSON.
 */

/** vLLM's default KV block size (tokens per block), `--block-size 16`. */
export const DEFAULT_BLOCK_TOKENS = 16;
/** Characters per pseudo-token (core/openai.ts estimateTokens). */
export const CHARS_PER_TOKEN = 4;
/** Tokens per block of the Mooncake traces' `hash_ids` (Mooncake FAST'25 trace appendix: 512-token blocks). */
export const MOONCAKE_BLOCK_TOKENS = 512;

const FNV_OFFSET_A = 0x811c9dc5;
const FNV_OFFSET_B = 0x01000193 ^ 0x5bd1e995;
const FNV_PRIME = 0x01000193;
const TWO_32 = 4294967296;
/** The parent hash of a prompt's first block (vLLM's NONE_HASH; any fixed value). */
const ROOT = 0x1d2e3f4;

/** Combines two 32-bit lanes into one integer below 2^53. */
function join53(a: number, b: number): number {
  return (b & 0x1fffff) * TWO_32 + (a >>> 0);
}

/** Hash of (parent, the characters text[start, end)): the chained block hash. */
function hashChars(parent: number, text: string, start: number, end: number): number {
  let a = FNV_OFFSET_A ^ (parent >>> 0);
  let b = FNV_OFFSET_B ^ Math.floor(parent / TWO_32);
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, FNV_PRIME);
    b = Math.imul(b ^ c, 0x5bd1e995) ^ (b >>> 15);
  }
  return join53(a, b);
}

/** Hash of (parent, an integer): how a trace's block id or a sub-block index is folded into a chain. */
export function mixHash(parent: number, value: number): number {
  let a = FNV_OFFSET_A ^ (parent >>> 0);
  let b = FNV_OFFSET_B ^ Math.floor(parent / TWO_32);
  for (const v of [value >>> 0, Math.floor(value / TWO_32) >>> 0]) {
    for (let k = 0; k < 4; k++) {
      const byte = (v >>> (8 * k)) & 0xff;
      a = Math.imul(a ^ byte, FNV_PRIME);
      b = Math.imul(b ^ byte, 0x5bd1e995) ^ (b >>> 15);
    }
  }
  return join53(a, b);
}

/**
 * Chained hashes of the full blocks of `text` (tokens of CHARS_PER_TOKEN characters, blocks of `blockTokens`
 * tokens); a trailing partial block has none. E.g. 130 characters with blockTokens 16 (64 characters a block): 2.
 */
export function blockHashesOfText(text: string, blockTokens = DEFAULT_BLOCK_TOKENS): readonly number[] {
  if (!(Number.isInteger(blockTokens) && blockTokens >= 1)) throw new RangeError(`blockTokens must be an integer ≥ 1, got ${blockTokens}`);
  const width = blockTokens * CHARS_PER_TOKEN;
  if (text.length < width) return NO_HASHES;
  if (text.length > RECENT_MAX_CHARS) return hashBlocks(text, width, NO_HASHES, 0);
  let memo = recentHashes.get(blockTokens);
  if (memo === undefined) recentHashes.set(blockTokens, (memo = new Map()));
  const known = memo.get(text);
  if (known !== undefined) return known;
  const [prefix, count] = longestKnownPrefix(blockTokens, text, width);
  const out = hashBlocks(text, width, prefix, count);
  if (memo.size >= RECENT_TEXTS) memo.delete(memo.keys().next().value!);
  memo.set(text, out);
  let newest = newestHashed.get(blockTokens);
  if (newest === undefined) newestHashed.set(blockTokens, (newest = []));
  if (newest.length >= RECENT_PREFIX_PROBES) newest.shift();
  newest.push([text, out]);
  return out;
}

/**
 * The hashes of the longest recent text whose full blocks begin `text` (only the RECENT_PREFIX_PROBES newest are
 * tried), and how many of them are `text`'s: a chat's next turn is its last prompt and more, so its chain goes on
 * from the last prompt's; a text that is itself a prefix of a recent one takes that one's chain up to its own blocks.
 */
function longestKnownPrefix(blockTokens: number, text: string, width: number): [readonly number[], number] {
  const newest = newestHashed.get(blockTokens);
  if (newest === undefined) return [NO_HASHES, 0];
  // The shortest recent text at least as long as `text`: one comparison covers all of `text`'s blocks.
  let cover: [string, readonly number[]] | undefined;
  for (const e of newest) if (e[0].length >= text.length && (cover === undefined || e[0].length < cover[0].length)) cover = e;
  if (cover !== undefined && cover[0].startsWith(text)) return [cover[1], Math.floor(text.length / width)];
  // Else the longest shorter one that begins `text`.
  let best: readonly number[] = NO_HASHES;
  for (const [s, hashes] of newest) if (s.length < text.length && hashes.length > best.length && text.startsWith(s)) best = hashes;
  return [best, best.length];
}

/** The chained hashes of `text`'s full blocks of `width` characters, as a frozen list; the first `count` are `known`'s. */
function hashBlocks(text: string, width: number, known: readonly number[], count: number): readonly number[] {
  const out: number[] = known.slice(0, count);
  let parent = out.length === 0 ? ROOT : out[out.length - 1]!;
  for (let start = out.length * width; start + width <= text.length; start += width) {
    parent = hashChars(parent, text, start, start + width);
    out.push(parent);
  }
  return Object.freeze(out);
}

const NO_HASHES: readonly number[] = Object.freeze([]);
/**
 * The hashes of the last RECENT_TEXTS prompts hashed, per block size (oldest dropped first). One request's prompt is
 * hashed where each tier scores prefixes — the router choosing a region, the gateway an instance, the engine's cache —
 * and equal text has equal hashes, so the second and third take the first's (frozen) list.
 */
const RECENT_TEXTS = 64;
/** How many of the newest memo entries a new text is compared with for a shared beginning. */
const RECENT_PREFIX_PROBES = 8;
/** Longer texts are hashed each time: the memo holds at most RECENT_TEXTS × this many characters per block size. */
const RECENT_MAX_CHARS = 262_144;
const recentHashes = new Map<number, Map<string, readonly number[]>>();
/** The RECENT_PREFIX_PROBES texts hashed last and their hashes, per block size (oldest first). */
const newestHashed = new Map<number, [string, readonly number[]][]>();

/** The text of one chat message's content (a string, or the text parts of an array); other shapes give "". */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let s = "";
  for (const part of content) {
    if (typeof part === "object" && part !== null && (part as { type?: unknown }).type === "text") {
      const t = (part as { text?: unknown }).text;
      if (typeof t === "string") s += t;
    }
  }
  return s;
}

/**
 * The prompt as the engine sees it: for chat, the messages with a ChatML-style template applied
 * (`<|im_start|>{role}\n{content}<|im_end|>\n` each, then the generation prompt `<|im_start|>assistant\n`); for a
 * completion, its prompt string (the first of an array). A body of another shape gives "" (no blocks).
 */
export function templatedPrompt(kind: "chat" | "completion", body: Record<string, unknown>): string {
  if (kind === "completion") {
    const p = body.prompt;
    if (typeof p === "string") return p;
    return Array.isArray(p) && typeof p[0] === "string" ? p[0] : "";
  }
  const messages = body.messages;
  if (!Array.isArray(messages)) return "";
  let s = "";
  for (const m of messages) {
    if (typeof m !== "object" || m === null) continue;
    const role = (m as { role?: unknown }).role;
    s += `<|im_start|>${typeof role === "string" ? role : ""}\n${contentText((m as { content?: unknown }).content)}<|im_end|>\n`;
  }
  return s + "<|im_start|>assistant\n";
}

/** Block hashes of an OpenAI request body (templatedPrompt, then blockHashesOfText). */
export function blockHashesOfBody(kind: "chat" | "completion", body: Record<string, unknown>, blockTokens = DEFAULT_BLOCK_TOKENS): readonly number[] {
  return blockHashesOfText(templatedPrompt(kind, body), blockTokens);
}

/**
 * A trace's block ids (Mooncake `hash_ids`: one id per `traceBlockTokens` tokens, equal ids = equal prefixes) as
 * engine blocks of `blockTokens`: each trace block splits into traceBlockTokens / blockTokens engine blocks (chained
 * hashes of (previous, id, index)), and only the full engine blocks of the `promptTokens` prompt are kept (the
 * trace's last id covers a partial block). traceBlockTokens must be a multiple of blockTokens. E.g. ids [7, 9],
 * 512-token trace blocks, 16-token engine blocks, a 600-token prompt: 32 blocks for id 7 and 5 for id 9 (37).
 */
export function blockHashesOfTrace(hashIds: readonly number[], promptTokens: number, traceBlockTokens = MOONCAKE_BLOCK_TOKENS, blockTokens = DEFAULT_BLOCK_TOKENS): number[] {
  if (!(Number.isInteger(blockTokens) && blockTokens >= 1 && traceBlockTokens % blockTokens === 0)) {
    throw new RangeError(`trace blocks of ${traceBlockTokens} tokens must be a whole number of ${blockTokens}-token blocks`);
  }
  const per = traceBlockTokens / blockTokens;
  const n = Math.min(hashIds.length * per, Math.floor(promptTokens / blockTokens));
  const out = new Array<number>(n);
  let parent = ROOT;
  for (let i = 0; i < n; i++) {
    const id = hashIds[Math.floor(i / per)]!;
    // Within one trace block the chain runs on from its first sub-block; a new trace id restarts from (parent, id).
    parent = i % per === 0 ? mixHash(mixHash(parent, id), 0) : mixHash(parent, i % per);
    out[i] = parent;
  }
  return out;
}

/** How many leading blocks of `hashes` `has` holds (the longest cached prefix, in blocks). */
export function longestPrefix(hashes: readonly number[], has: (h: number) => boolean): number {
  let n = 0;
  while (n < hashes.length && has(hashes[n]!)) n++;
  return n;
}

/**
 * One KV-cache event as vLLM publishes them (vllm/distributed/kv_events.py, `--kv-events-config`): blocks stored
 * (their hashes, in prompt order, and the hash of the block before the first, null at the root), blocks removed
 * (evicted), or the whole cache cleared. `blockSize` is tokens per block. `medium` says which tier stored or
 * removed them, as vLLM's events with KV offloading (`medium`: "GPU", or "CPU" for the host tier; absent: GPU);
 * AllBlocksCleared clears every tier (engine-sim's reset, and a KV-event stream's start).
 */
export type KvEvent =
  | { type: "BlockStored"; blockHashes: number[]; parentBlockHash: number | null; blockSize: number; medium?: KvMedium }
  | { type: "BlockRemoved"; blockHashes: number[]; medium?: KvMedium }
  | { type: "AllBlocksCleared" };

/** Where a KV block lives: GPU memory, or the host-memory tier (engine-sim prefix-cache.ts; vLLM CPU offloading). */
export type KvMedium = "GPU" | "CPU";

/** A listener of KV events; called in the order they happen. */
export type KvEventListener = (ev: KvEvent) => void;

/**
 * A set of block hashes in least-recently-touched order holding at most `cap` (the oldest dropped first): a router's
 * memory of what it sent where (region/gateway/scoring/prefix-index.ts per instance, router/prefix-regions.ts per
 * region). `cap` may change; the next `touch` trims to it. With `cap` infinite (an index fed by KV events) a touch
 * only adds the missing hashes: the order, never read then, is first insertion.
 */
export class PrefixSet {
  private readonly m = new Map<number, true>();
  constructor(public cap: number) {}
  /** Adds `hashes` (or moves them to the newest end), then drops the oldest beyond `cap`. */
  touch(hashes: readonly number[]): void {
    if (this.cap === Number.POSITIVE_INFINITY) {
      // Nothing is ever dropped for the cap, so the order is never read: only add what is missing.
      for (const h of hashes) if (!this.m.has(h)) this.m.set(h, true);
      return;
    }
    for (const h of hashes) {
      this.m.delete(h);
      this.m.set(h, true);
    }
    if (this.m.size <= this.cap) return;
    let excess = this.m.size - this.cap;
    for (const h of this.m.keys()) {
      if (excess-- <= 0) break;
      this.m.delete(h);
    }
  }
  remove(hashes: readonly number[]): void {
    for (const h of hashes) this.m.delete(h);
  }
  clear(): void {
    this.m.clear();
  }
  has(h: number): boolean {
    return this.m.has(h);
  }
  get size(): number {
    return this.m.size;
  }
}
