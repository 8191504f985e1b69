/**
 * Incremental parsing of an OpenAI-style SSE stream (`data: {...}\n\n` … `data: [DONE]\n\n`). Token chunks take a
 * fast path: the text is cut out of the chunk by locating `"content":"` / `"text":"` and decoding only that JSON
 * string; chunks that carry a finish reason, usage or an error (a handful per stream) are JSON-parsed in full.
 */

/** What one SSE `data:` payload means to the adapter. */
export type SseChunk =
  | { kind: "text"; text: string }
  | { kind: "finish"; reason: string; text: string }
  | { kind: "usage"; promptTokens: number; completionTokens: number }
  | { kind: "error"; message: string; code: string | null }
  | { kind: "done" }
  | { kind: "other" };

/**
 * Splits a byte stream into SSE event payloads (the joined `data:` lines of each event). Hot path (one call per
 * token of every stream): a chunk that ends in an ASCII byte while the decoder holds no partial character is
 * decoded in one native call (`Buffer#toString`, which cannot leave a character unfinished there) instead of the
 * streaming TextDecoder, and `\r\n\r\n` separators are looked for only once the stream has sent a `\r`.
 */
export class SseSplitter {
  private buf = "";
  private readonly decoder = new TextDecoder();
  /**
   * True while the decoder may hold the first bytes of a character (its last chunk ended in a non-ASCII byte); true
   * at the start, so that the first chunk goes through the decoder, which drops a leading byte-order mark.
   */
  private partial = true;
  /** True once a `\r` arrived: CRLF separators are possible from then on. */
  private crlfSeen = false;

  /** Feeds bytes; returns the complete events' data payloads in order. */
  push(bytes: Uint8Array): string[] {
    const n = bytes.length;
    let text: string;
    if (!this.partial && n > 0 && bytes[n - 1]! < 0x80) text = Buffer.from(bytes.buffer, bytes.byteOffset, n).toString("utf8");
    else {
      text = this.decoder.decode(bytes, { stream: true });
      this.partial = n > 0 && bytes[n - 1]! >= 0x80;
    }
    if (!this.crlfSeen && text.includes("\r")) this.crlfSeen = true;
    this.buf = this.buf.length === 0 ? text : this.buf + text;
    const out: string[] = [];
    for (;;) {
      let end = this.buf.indexOf("\n\n");
      let sepLen = 2;
      const crlf = this.crlfSeen ? this.buf.indexOf("\r\n\r\n") : -1;
      if (crlf !== -1 && (end === -1 || crlf < end)) {
        end = crlf;
        sepLen = 4;
      }
      if (end === -1) return out;
      const event = this.buf.slice(0, end);
      this.buf = end + sepLen === this.buf.length ? "" : this.buf.slice(end + sepLen);
      const data = dataOf(event);
      if (data !== undefined) out.push(data);
    }
  }
}

function dataOf(event: string): string | undefined {
  if (event.startsWith("data: ") && event.indexOf("\n") === -1) return event.slice(6);
  let data: string | undefined;
  for (const raw of event.split(/\r?\n/)) {
    if (!raw.startsWith("data:")) continue; // comments (":"), event:, id:, retry:
    const v = raw.slice(raw[5] === " " ? 6 : 5);
    data = data === undefined ? v : data + "\n" + v;
  }
  return data;
}

/** Decodes the JSON string literal that starts at `s[start]` (a `"`); undefined when malformed. */
function stringAt(s: string, start: number): string | undefined {
  let i = start + 1;
  let escaped = false;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x5c /* \ */) {
      escaped = true;
      i++;
    } else if (c === 0x22 /* " */) break;
  }
  if (i >= s.length) return undefined;
  if (!escaped) return s.slice(start + 1, i);
  try {
    return JSON.parse(s.slice(start, i + 1)) as string;
  } catch {
    return undefined;
  }
}

const FAST_KEYS = ['"delta":{"content":"', '"text":"'];

/** Classifies one SSE data payload. */
export function parseChunk(data: string): SseChunk {
  if (data === "[DONE]") return { kind: "done" };
  if (data.includes('"finish_reason":null') && !data.includes('"usage":{') && !data.startsWith('{"error"')) {
    for (const key of FAST_KEYS) {
      const at = data.indexOf(key);
      if (at !== -1) {
        const text = stringAt(data, at + key.length - 1);
        if (text !== undefined) return { kind: "text", text };
      }
    }
  }
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    return { kind: "error", message: `upstream sent a malformed chunk: ${data.slice(0, 120)}`, code: null };
  }
  if (typeof v !== "object" || v === null) return { kind: "other" };
  const o = v as Record<string, unknown>;
  if (typeof o.error === "object" && o.error !== null) {
    const e = o.error as Record<string, unknown>;
    return { kind: "error", message: typeof e.message === "string" ? e.message : "upstream error", code: typeof e.code === "string" ? e.code : null };
  }
  const usage = o.usage as Record<string, unknown> | null | undefined;
  const choices = Array.isArray(o.choices) ? (o.choices as Record<string, unknown>[]) : [];
  const c = choices[0];
  if (c !== undefined) {
    const delta = c.delta as Record<string, unknown> | undefined;
    const text = typeof delta?.content === "string" ? delta.content : typeof c.text === "string" ? c.text : "";
    if (typeof c.finish_reason === "string") return { kind: "finish", reason: c.finish_reason, text };
    if (text.length > 0) return { kind: "text", text };
  }
  if (usage && typeof usage.prompt_tokens === "number" && typeof usage.completion_tokens === "number") {
    return { kind: "usage", promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens };
  }
  return { kind: "other" };
}

/**
 * Every sample of metric `name` in a Prometheus text exposition, with its labels (values unescaped for \\, \" and
 * \n). Lines of other metrics, comments and unparsable values are skipped.
 */
export function promSamples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith(name) || (line[name.length] !== "{" && line[name.length] !== " ")) continue;
    const labels: Record<string, string> = {};
    let rest = line.slice(name.length);
    if (rest.startsWith("{")) {
      const re = /\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/y;
      let i = 1;
      for (;;) {
        re.lastIndex = i;
        const m = re.exec(rest);
        if (m === null) break;
        labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
        i = re.lastIndex;
      }
      if (rest[i] !== "}") continue;
      rest = rest.slice(i + 1);
    }
    const value = Number(rest.trim().split(/\s+/)[0]);
    if (Number.isFinite(value)) out.push({ labels, value });
  }
  return out;
}

/** Sums the samples of `name` (any labels) in Prometheus text format; undefined when absent. */
export function promValue(text: string, name: string): number | undefined {
  const samples = promSamples(text, name);
  return samples.length === 0 ? undefined : samples.reduce((a, x) => a + x.value, 0);
}
