/**
 * Issue 15 item 2: property-based fuzzing (fast-check) of the router's HTTP API on a real `tidegate dev` process
 * (3 regions, simulated engines at 1/50 of real time, API keys, a 64 KiB body limit, the embedded queue).
 *
 * - 10,000 generated requests in 200 rounds of 50 sent concurrently: methods, known and random paths, query strings,
 *   auth headers, content types and encodings, bodies (near-valid completion requests with every field mutated,
 *   arbitrary JSON, nesting thousands deep, random bytes, invalid UTF-8, bodies over the limit).
 * - 10,000 generated batch JSONL files uploaded through POST /v1/files (valid lines, mutated lines, broken JSON,
 *   blank lines, CRLF, duplicate ids, wrong endpoints), one in 20 turned into a batch (POST /v1/batches) whose
 *   final state is checked: `failed` with line-numbered errors, or `completed`/`cancelled`.
 *
 * Properties: the process never exits; every response is a status other than 5xx, except 503
 * `no_region_available`; every error has an OpenAI-style body `{error:{message,type,param,code}}` (the planner's
 * browser pages under /login and /plans answer HTML to people and are exempt); a stream either
 * ends with [DONE] or an in-stream error object; after every round a good completion request is served (200).
 * The seed is printed; TIDEGATE_FUZZ_SEED replays a run.
 */
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON } from "../../core/config.js";
import { spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";

const SEED = Number(process.env.TIDEGATE_FUZZ_SEED ?? Date.now() % 2 ** 31);
const ROUNDS = 200;
const PER_ROUND = 50;
const FILES = 10_000;
const FILES_PER_ROUND = 50;
const BODY_LIMIT = 64 * 1024;
const MODELS = ["llama2-70b", "bloom-176b", "llama3.1-8b", "llama3.2-3b"];
const KEY_A = "sk-fuzz-tenant-a";
const KEY_B = "sk-fuzz-tenant-b-scoped";
const ADMIN = "admin-fuzz-key-1";

let dir: string;
let dev: Proc;
let host: string;
let port: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-fuzz-"));
  const base = DEFAULT_CONFIG_JSON as Record<string, Record<string, unknown>>;
  const file = join(dir, "config.json");
  writeFileSync(
    file,
    JSON.stringify({
      ...base,
      router: { ...base.router, bodyLimitBytes: BODY_LIMIT, apiKeys: [{ key: KEY_A, tenant: "a" }, { key: KEY_B, tenant: "b", models: ["llama3.2-3b"], region: "us-west" }], adminKeys: [ADMIN] },
      queue: { ...base.queue, dataDir: join(dir, "data"), maxFileBytes: 256 * 1024 },
      engines: { ...base.engines, timeScale: 0.02 },
    }),
  );
  dev = await spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "error"], /serving http:\/\/(127\.0\.0\.1):(\d+)/, 60_000);
  host = dev.match[1]!;
  port = Number(dev.match[2]);
  console.log(`[fuzz] seed ${SEED} (TIDEGATE_FUZZ_SEED=${SEED} replays it)`);
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Set when no complete answer came (socket error, timeout). */
  failure?: string;
}

/** Sends one request; bounded by `timeoutMs`. Never rejects. */
function send(r: FuzzRequest, timeoutMs = 15_000): Promise<Answer> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (a: Answer) => {
      if (!settled) {
        settled = true;
        resolve(a);
      }
    };
    // One connection per request (agent: false): a failure belongs to the request that caused it, not to a later one
    // that reused a socket the server was closing (after a 413 it stops reading and closes).
    const req = httpRequest({ host, port, method: r.method, path: r.path, headers: r.headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString("utf8") }));
      res.on("error", (err) => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString("utf8"), failure: `response: ${err.message}` }));
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      done({ status: 0, headers: {}, body: "", failure: `no complete answer in ${timeoutMs} ms` });
    });
    req.on("error", (err) => done({ status: 0, headers: {}, body: "", failure: `request: ${err.message}` }));
    req.end(r.body);
  });
}

/** The problem with an answer, or undefined when it satisfies the properties. */
function problem(r: FuzzRequest, a: Answer): string | undefined {
  // The router may close a connection on a body over the limit before reading all of it (413 already sent).
  if (a.failure !== undefined) {
    if (/ECONNRESET|EPIPE|socket hang up/.test(a.failure) && r.body !== undefined && r.body.length > BODY_LIMIT) return undefined;
    return a.failure;
  }
  if (a.status >= 500 && a.status !== 503) return `status ${a.status}: ${a.body.slice(0, 300)}`;
  if (r.method === "HEAD") return undefined;
  // The planner's browser pages (sign-in form, plan reports) answer people in HTML, errors included.
  if (/^\/(login|plans)(\/|\?|$)/.test(r.path) && String(a.headers["content-type"] ?? "").startsWith("text/html")) return undefined;
  if (a.status >= 400) {
    let e: { error?: { message?: unknown; type?: unknown; code?: unknown; param?: unknown } };
    try {
      e = JSON.parse(a.body) as typeof e;
    } catch {
      return `status ${a.status} without a JSON body: ${a.body.slice(0, 200)}`;
    }
    if (typeof e.error?.message !== "string" || e.error.message.length === 0 || typeof e.error.type !== "string" || !("code" in e.error) || !("param" in e.error)) {
      return `status ${a.status} body is not an OpenAI error: ${a.body.slice(0, 200)}`;
    }
    if (a.status === 503 && e.error.code !== "no_region_available") return `503 with code ${String(e.error.code)}`;
    return undefined;
  }
  if (String(a.headers["content-type"] ?? "").startsWith("text/event-stream")) {
    const last = a.body.trim().split("\n\n").at(-1) ?? "";
    if (last === "data: [DONE]") return undefined;
    try {
      const ev = JSON.parse(last.slice(6)) as { error?: { message?: unknown } };
      if (typeof ev.error?.message === "string") return undefined;
    } catch {
      // fall through
    }
    return `stream ended without [DONE] or an error: ${a.body.slice(-200)}`;
  }
  return undefined;
}

// ---- arbitraries ---------------------------------------------------------------------------------------------

const anyModel = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...MODELS) }, { weight: 1, arbitrary: fc.string({ maxLength: 40 }) }, { weight: 1, arbitrary: fc.anything({ maxDepth: 2 }) });
const message = fc.oneof(
  { weight: 4, arbitrary: fc.record({ role: fc.constantFrom("user", "system", "assistant"), content: fc.string({ maxLength: 200 }) }) },
  { weight: 1, arbitrary: fc.record({ role: fc.oneof(fc.string({ maxLength: 10 }), fc.integer()), content: fc.oneof(fc.string(), fc.array(fc.record({ type: fc.constantFrom("text", "image_url", "x"), text: fc.string() }), { maxLength: 3 }), fc.constant(null), fc.integer()) }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 3 }) },
);
const maxTokens = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 24 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -1, 1.5, 1e9, 2 ** 53, Number.MAX_SAFE_INTEGER, "10", null, true, [], {}) },
);
const completionBody = fc.record(
  {
    model: anyModel,
    messages: fc.oneof({ weight: 5, arbitrary: fc.array(message, { minLength: 1, maxLength: 4 }) }, { weight: 1, arbitrary: fc.anything({ maxDepth: 3 }) }),
    prompt: fc.oneof(fc.string({ maxLength: 300 }), fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }), fc.array(fc.integer(), { maxLength: 5 }), fc.anything({ maxDepth: 2 })),
    max_tokens: maxTokens,
    max_completion_tokens: maxTokens,
    stream: fc.oneof({ weight: 5, arbitrary: fc.boolean() }, { weight: 1, arbitrary: fc.anything({ maxDepth: 1 }) }),
    stream_options: fc.oneof(fc.record({ include_usage: fc.oneof(fc.boolean(), fc.string()) }), fc.anything({ maxDepth: 2 })),
    temperature: fc.oneof(fc.double(), fc.string({ maxLength: 5 })),
    n: fc.oneof(fc.integer({ min: -2, max: 4 }), fc.string({ maxLength: 3 })),
    stop: fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 5 }), { maxLength: 6 })),
    user: fc.string({ maxLength: 20 }),
  },
  { requiredKeys: [] },
);
const bodyBytes: fc.Arbitrary<Buffer | undefined> = fc.oneof(
  { weight: 8, arbitrary: completionBody.map((b) => Buffer.from(JSON.stringify(b))) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 6 }).map((v) => Buffer.from(JSON.stringify(v) ?? "null")) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 20_000 }).map((n) => Buffer.from("[".repeat(n) + "]".repeat(n))) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 20_000 }).map((n) => Buffer.from('{"a":'.repeat(n) + "1" + "}".repeat(n))) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2048 }).map((u) => Buffer.from(u)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 300 }).map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.constantFrom(Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from('{"model":"\udc00"}'), Buffer.from('{"model":"llama3.2-3b","messages":[{"role":"user","content":"\\ud800"}]}'), Buffer.from('{"__proto__":{"max_tokens":5},"constructor":{"prototype":1},"model":"llama3.2-3b","messages":[{"role":"user","content":"x"}],"max_tokens":1}')) },
  { weight: 1, arbitrary: fc.integer({ min: BODY_LIMIT - 16, max: BODY_LIMIT * 4 }).map((n) => Buffer.from(`{"model":"llama3.2-3b","prompt":"${"x".repeat(n)}"}`)) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);
/** A request body the endpoint accepts (so the fuzz also drives dispatch, streaming and aborts). */
function validBody(path: string): fc.Arbitrary<Buffer> {
  const common = { model: fc.constantFrom(...MODELS), max_tokens: fc.integer({ min: 1, max: 16 }), stream: fc.boolean(), stream_options: fc.record({ include_usage: fc.boolean() }), temperature: fc.double({ min: 0, max: 2, noNaN: true }) };
  const shape =
    path === "/v1/chat/completions"
      ? fc.record({ ...common, messages: fc.array(fc.record({ role: fc.constantFrom("user", "system", "assistant"), content: fc.string({ maxLength: 200 }) }), { minLength: 1, maxLength: 3 }) }, { requiredKeys: ["model", "messages"] })
      : fc.record({ ...common, prompt: fc.oneof(fc.string({ maxLength: 300 }), fc.array(fc.string({ maxLength: 30 }), { minLength: 1, maxLength: 3 })) }, { requiredKeys: ["model", "prompt"] });
  return shape.map((b) => ("stream_options" in b && b.stream !== true ? { ...b, stream_options: undefined } : b)).map((b) => Buffer.from(JSON.stringify(b)));
}

const knownPath = fc.constantFrom(
  "/v1/chat/completions", "/v1/completions", "/v1/models", "/healthz", "/metrics", "/v1/files", "/v1/batches",
  "/v1/files/file-nope", "/v1/files/file-nope/content", "/v1/batches/batch_nope", "/v1/batches/batch_nope/cancel",
  "/admin/regions/us-east/instances", "/admin/regions/nowhere/instances", "/plans", "/plans/latest", "/login", "/",
);
const pathArb = fc.oneof(
  { weight: 6, arbitrary: knownPath },
  { weight: 2, arbitrary: fc.tuple(knownPath, fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 12 }), { maxKeys: 3 })).map(([p, q]) => `${p}?${new URLSearchParams(q).toString()}`) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom("/v1/files/", "/v1/batches/", "/admin/regions/", "/v1/"), fc.string({ maxLength: 30 })).map(([p, s]) => p + encodeURIComponent(s)) },
  { weight: 1, arbitrary: fc.webPath().map((p) => (p.startsWith("/") ? p : `/${p}`)) },
  { weight: 1, arbitrary: fc.constantFrom("/v1/batches?limit=-1", "/v1/batches?limit=1e9", "/v1/batches?after=%00", "/v1/files?purpose=x", "//v1//models", "/v1/../healthz", "/%ZZ", "/v1/chat/completions/") },
);
const anyRequest = {
  method: fc.oneof({ weight: 6, arbitrary: fc.constant("POST") }, { weight: 3, arbitrary: fc.constant("GET") }, { weight: 1, arbitrary: fc.constantFrom("PUT", "DELETE", "PATCH", "OPTIONS", "HEAD") }),
  path: pathArb,
};
/** Half the requests aim at the completion endpoints (where the parsing is), the rest anywhere. */
const completionRequest = {
  method: fc.constant("POST"),
  path: fc.constantFrom("/v1/chat/completions", "/v1/completions"),
};
const requestArb: fc.Arbitrary<FuzzRequest> = fc
  .oneof(fc.record(anyRequest), fc.record(completionRequest))
  .chain((target) => fc.record({
    method: fc.constant(target.method),
    path: fc.constant(target.path),
    auth: fc.oneof(
      { weight: 8, arbitrary: fc.constant(`Bearer ${KEY_A}`) },
      { weight: 2, arbitrary: fc.constant(`Bearer ${KEY_B}`) },
      { weight: 1, arbitrary: fc.constant(`Bearer ${ADMIN}`) },
      { weight: 2, arbitrary: fc.constantFrom(undefined, "Bearer wrong-key", "Basic YTpi", "Bearer", "bearer  " + KEY_A) },
    ),
    contentType: fc.constantFrom(undefined, "application/json", "application/json", "text/plain", "multipart/form-data; boundary=xyz", "multipart/form-data", "application/json; charset=latin1", "application/x-www-form-urlencoded"),
    encoding: fc.constantFrom(undefined, undefined, undefined, "gzip", "br", "deflate", "identity", "x-garbage"),
    region: fc.constantFrom(undefined, undefined, "us-east", "us-west", "mars", ""),
    chunked: fc.boolean(),
    body: target.path === "/v1/chat/completions" || target.path === "/v1/completions" ? fc.oneof({ weight: 1, arbitrary: validBody(target.path) }, { weight: 2, arbitrary: bodyBytes }) : bodyBytes,
  }))
  .map(({ method, path, auth, contentType, encoding, region, chunked, body }) => {
    const headers: Record<string, string> = {};
    // The planner's pages answer a key that is not an admin or planner key after a 1 s delay, one at a time (a
    // brute-force brake, planner/routes.ts): there the fuzz sends no key or the admin key, or a round would take minutes.
    const plannerPage = /^\/(login|plans)(\/|\?|$)/.test(path);
    if (auth !== undefined && !(plannerPage && auth !== `Bearer ${ADMIN}`)) headers.authorization = auth;
    if (contentType !== undefined) headers["content-type"] = contentType;
    if (encoding !== undefined) headers["content-encoding"] = encoding;
    if (region !== undefined) headers["x-tidegate-region"] = region;
    const sent = method === "GET" || method === "HEAD" ? undefined : body;
    if (sent !== undefined && !chunked) headers["content-length"] = String(sent.length);
    return { method, path, headers, body: sent };
  });

// ---- JSONL files ---------------------------------------------------------------------------------------------

const goodLine = (i: number, model: string, url: string) =>
  JSON.stringify({ custom_id: `req-${i}`, method: "POST", url, body: url === "/v1/completions" ? { model, prompt: "hi", max_tokens: 2 } : { model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 } });
const jsonlLine = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(fc.nat(40), fc.constantFrom(...MODELS), fc.constantFrom("/v1/chat/completions", "/v1/completions")).map(([i, m, u]) => goodLine(i, m, u)) },
  { weight: 2, arbitrary: fc.record({ custom_id: fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null)), method: fc.constantFrom("POST", "GET", 1), url: fc.constantFrom("/v1/chat/completions", "/v1/completions", "/v1/embeddings", ""), body: fc.oneof(completionBody, fc.anything({ maxDepth: 2 })) }, { requiredKeys: [] }).map((o) => JSON.stringify(o)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? "") },
  { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
  { weight: 1, arbitrary: fc.constantFrom("", "   ", "{", '{"custom_id":"x"', "\u0000", "[".repeat(5000)) },
);
const jsonlFile = fc.record({
  lines: fc.array(jsonlLine, { minLength: 0, maxLength: 12 }),
  eol: fc.constantFrom("\n", "\r\n"),
  trailing: fc.boolean(),
  purpose: fc.constantFrom("batch", "batch", "batch", "fine-tune", ""),
  endpoint: fc.constantFrom("/v1/chat/completions", "/v1/completions", "/v1/embeddings"),
  makeBatch: fc.nat(19).map((n) => n === 0),
});

function multipart(purpose: string, content: string): { body: Buffer; type: string } {
  const b = `fuzzboundary${Math.random().toString(36).slice(2)}`;
  const body = Buffer.from(
    `--${b}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n${purpose}\r\n` +
      `--${b}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n${content}\r\n--${b}--\r\n`,
  );
  return { body, type: `multipart/form-data; boundary=${b}` };
}

/** fc.check with a short failure message (the counterexample is printed truncated; the seed and path replay it). */
async function checkProperty<T>(prop: fc.IAsyncProperty<T>, numRuns: number): Promise<void> {
  const out = await fc.check(prop, { numRuns, seed: SEED, endOnFailure: true });
  if (out.failed) {
    const err = out.errorInstance instanceof Error ? out.errorInstance.message : String(out.errorInstance);
    throw new Error(`property failed (seed ${out.seed}, path ${String(out.counterexamplePath)}): ${err.slice(0, 1500)}`);
  }
}

async function goodRequestServed(): Promise<void> {
  const a = await send({
    method: "POST",
    path: "/v1/chat/completions",
    headers: { authorization: `Bearer ${KEY_A}`, "content-type": "application/json" },
    body: Buffer.from(JSON.stringify({ model: "llama3.2-3b", messages: [{ role: "user", content: "still there?" }], max_tokens: 3 })),
  });
  expect(a.failure).toBeUndefined();
  expect(a.status, a.body).toBe(200);
  expect((JSON.parse(a.body) as { choices: unknown[] }).choices).toHaveLength(1);
  expect(dev.child.exitCode).toBeNull();
}

describe("fuzzing the router's HTTP API (fast-check)", () => {
  it(`${ROUNDS * PER_ROUND} generated requests: no exit, no 5xx but 503, OpenAI errors, a good request served after each round`, async () => {
    const statuses = new Map<string, number>();
    const t0 = Date.now();
    await checkProperty(
      fc.asyncProperty(fc.array(requestArb, { minLength: PER_ROUND, maxLength: PER_ROUND }), async (reqs) => {
        const answers = await Promise.all(reqs.map((r) => send(r)));
        answers.forEach((a, i) => {
          let code = "";
          try {
            code = a.status >= 400 ? `:${String((JSON.parse(a.body) as { error: { code: string } }).error.code)}` : "";
          } catch {
            // counted without a code
          }
          statuses.set(`${a.status}${code}`, (statuses.get(`${a.status}${code}`) ?? 0) + 1);
          const p = problem(reqs[i]!, a);
          if (p !== undefined) throw new Error(`${reqs[i]!.method} ${reqs[i]!.path} ${JSON.stringify(reqs[i]!.headers)} body ${JSON.stringify(reqs[i]!.body?.toString("utf8").slice(0, 300))}: ${p}`);
        });
        await goodRequestServed();
      }),
      ROUNDS,
    );
    console.log(`[fuzz] http: ${ROUNDS * PER_ROUND} requests in ${((Date.now() - t0) / 1000).toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0].localeCompare(b[0]))))}`);
    expect(dev.child.exitCode).toBeNull();
  }, 300_000);

  it(`${FILES} generated batch JSONL files: every upload answered 200 or an OpenAI 4xx; created batches end failed with line errors, or run`, async () => {
    const outcomes = new Map<string, number>();
    const batches: string[] = [];
    const t0 = Date.now();
    await checkProperty(
      fc.asyncProperty(fc.array(jsonlFile, { minLength: FILES_PER_ROUND, maxLength: FILES_PER_ROUND }), async (files) => {
        await Promise.all(
          files.map(async (f) => {
            const content = f.lines.join(f.eol) + (f.trailing ? f.eol : "");
            const mp = multipart(f.purpose, content);
            const up: FuzzRequest = { method: "POST", path: "/v1/files", headers: { authorization: `Bearer ${KEY_A}`, "content-type": mp.type }, body: mp.body };
            const a = await send(up);
            const p = problem(up, a);
            if (p !== undefined) throw new Error(`upload of ${JSON.stringify(content.slice(0, 300))}: ${p}`);
            outcomes.set(`upload ${a.status}`, (outcomes.get(`upload ${a.status}`) ?? 0) + 1);
            if (a.status !== 200 || !f.makeBatch) return;
            const fileId = (JSON.parse(a.body) as { id: string }).id;
            const cr: FuzzRequest = { method: "POST", path: "/v1/batches", headers: { authorization: `Bearer ${KEY_A}`, "content-type": "application/json" }, body: Buffer.from(JSON.stringify({ input_file_id: fileId, endpoint: f.endpoint, completion_window: "24h" })) };
            const b = await send(cr);
            const pb = problem(cr, b);
            if (pb !== undefined) throw new Error(`batch on ${JSON.stringify(content.slice(0, 300))}: ${pb}`);
            outcomes.set(`batch ${b.status}`, (outcomes.get(`batch ${b.status}`) ?? 0) + 1);
            if (b.status === 200) batches.push((JSON.parse(b.body) as { id: string }).id);
          }),
        );
        await goodRequestServed();
      }),
      FILES / FILES_PER_ROUND,
    );
    // Every batch reaches a final state: failed with line-numbered errors, or completed (bounded wait).
    const final = new Map<string, number>();
    const deadline = Date.now() + 60_000;
    for (const id of batches) {
      for (;;) {
        const a = await send({ method: "GET", path: `/v1/batches/${id}`, headers: { authorization: `Bearer ${KEY_A}` }, body: undefined });
        expect(a.status, a.body).toBe(200);
        const b = JSON.parse(a.body) as { status: string; errors?: { data: { line: number | null; message: string }[] } | null; request_counts: { total: number; completed: number; failed: number } };
        if (b.status === "failed") {
          expect(b.errors?.data.length ?? 0).toBeGreaterThan(0);
          for (const e of b.errors!.data) expect(e.message.length).toBeGreaterThan(0);
        }
        if (["failed", "completed", "expired", "cancelled"].includes(b.status)) {
          if (b.status === "completed") expect(b.request_counts.completed + b.request_counts.failed).toBe(b.request_counts.total);
          final.set(b.status, (final.get(b.status) ?? 0) + 1);
          break;
        }
        expect(Date.now(), `batch ${id} still ${b.status}`).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    console.log(`[fuzz] jsonl: ${FILES} files in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${JSON.stringify(Object.fromEntries(outcomes))}; batches ${JSON.stringify(Object.fromEntries(final))}`);
    expect(dev.child.exitCode).toBeNull();
  }, 300_000);
});
