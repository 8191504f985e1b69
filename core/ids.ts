/** Ids: prefixed, random, URL-safe (`chatcmpl-…`, `batch_…`, `file-…`). */
import { randomBytes } from "node:crypto";

/** `prefix` + 24 random base62-ish characters (OpenAI's ids look like `batch_abc123…`). */
export function newId(prefix: string): string {
  const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const bytes = randomBytes(24);
  let s = prefix;
  for (const b of bytes) s += alphabet[b % 62];
  return s;
}
