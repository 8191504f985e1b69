/** Ids: prefixed, random, URL-safe (`chatcmpl-…`, `batch_…`, `file-…`). */
import { randomFillSync } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const ID_CHARS = 24;
/**
 * Random bytes drawn 4 KiB at a time: one `randomBytes(24)` per id was a crypto call on every streamed request in
 * the router (3% of its per-request CPU in bench:router's profile); this is one call per 170 ids.
 */
const pool = Buffer.alloc(4096);
let used = pool.length;

/** `prefix` + 24 random base62-ish characters (OpenAI's ids look like `batch_abc123…`). */
export function newId(prefix: string): string {
  if (used + ID_CHARS > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  let s = prefix;
  for (let i = used; i < used + ID_CHARS; i++) s += ALPHABET[pool[i]! % 62];
  used += ID_CHARS;
  return s;
}
