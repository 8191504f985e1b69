import { describe, expect, it } from "vitest";
import { modelForbidden } from "../auth.js";
import { validateBatchInput, MAX_REPORTED_ERRORS } from "./validate.js";

const MODELS = new Set(["llama3.2-3b", "llama2-70b"]);
const line = (id: string, over: Record<string, unknown> = {}, body: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "llama3.2-3b", messages: [{ role: "user", content: "hi" }], ...body }, ...over });

describe("batch input validation", () => {
  it("accepts a valid file, skipping blank lines and CRLF endings", () => {
    const r = validateBatchInput([line("a"), "", line("b") + "\r", ""].join("\n"), "/v1/chat/completions", MODELS);
    expect(r).toMatchObject({ ok: true, model: "llama3.2-3b" });
    if (r.ok) expect(r.requests.map((q) => q.custom_id)).toEqual(["a", "b"]);
  });

  it("reports every broken line with its 1-based number and yields no requests", () => {
    const text = [
      line("ok1"),
      "{not json",
      line("ok1"),
      line("x", { method: "GET" }),
      line("y", { url: "/v1/completions" }),
      line("z", {}, { model: "gpt-unknown" }),
      line("w", {}, { model: "llama2-70b" }),
      line("v", {}, { max_tokens: -3 }),
      JSON.stringify({ method: "POST", url: "/v1/chat/completions", body: {} }),
      "[1,2]",
      line("s", {}, { stream: true }),
    ].join("\n");
    const r = validateBatchInput(text, "/v1/chat/completions", MODELS);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => [e.line, e.code])).toEqual([
      [2, "invalid_json_line"],
      [3, "duplicate_custom_id"],
      [4, "invalid_method"],
      [5, "mismatched_endpoint"],
      [6, "model_not_found"],
      [7, "mismatched_model"],
      [8, "invalid_request"],
      [9, "missing_required_parameter"],
      [10, "invalid_request"],
      [11, "invalid_request"],
    ]);
    expect(r.errors[5]!.message).toContain("line 1");
    expect(r.errors[6]!.param).toBe("body.max_tokens");
    expect(r.errors[9]!.param).toBe("body.stream");
  });

  it("a line over the model's context fails as a streamed request does: context_length_exceeded, OpenAI's sentence", () => {
    const r = validateBatchInput(line("big", {}, { max_tokens: 131072 }), "/v1/chat/completions", MODELS);
    if (r.ok) throw new Error("expected errors");
    expect(r.errors).toEqual([{ line: 1, code: "context_length_exceeded", param: "body.messages", message: expect.stringMatching(/^line 1: This model's maximum context length is \d+ tokens\. However, you requested \d+ tokens/) }]);
  });

  it("a served model the API key may not use fails with the reason streaming gives, not as an unknown model", () => {
    const scoped = new Set(["llama2-70b"]);
    const text = [line("a"), line("b", {}, { model: "gpt-unknown" }), line("c", {}, { model: "llama2-70b" })].join("\n");
    const r = validateBatchInput(text, "/v1/chat/completions", MODELS, scoped);
    if (r.ok) throw new Error("expected errors");
    expect(r.errors.map((e) => [e.line, e.code, e.param])).toEqual([
      [1, "forbidden", "body.model"],
      [2, "model_not_found", "body.model"],
    ]);
    // The message a streamed request for the same model gets (router/completions.ts throws modelForbidden).
    expect(r.errors[0]!.message).toBe(`line 1: ${modelForbidden("llama3.2-3b").message}`);
    expect(r.errors[0]!.message).toBe('line 1: this API key may not use model "llama3.2-3b"');
    // The same file is valid for a key that may use every model, and a file of the key's own model passes.
    expect(validateBatchInput([line("a"), line("c")].join("\n"), "/v1/chat/completions", MODELS).ok).toBe(true);
    expect(validateBatchInput(line("c", {}, { model: "llama2-70b" }), "/v1/chat/completions", MODELS, scoped)).toMatchObject({ ok: true, model: "llama2-70b" });
  });

  it("rejects an empty file and caps the error list", () => {
    expect(validateBatchInput("\n\n", "/v1/chat/completions", MODELS)).toMatchObject({ ok: false, errors: [{ code: "empty_file", line: null }] });
    const many = Array.from({ length: 150 }, () => "nope").join("\n");
    const r = validateBatchInput(many, "/v1/chat/completions", MODELS);
    if (r.ok) throw new Error("expected errors");
    expect(r.errors).toHaveLength(MAX_REPORTED_ERRORS + 1);
    expect(r.errors[MAX_REPORTED_ERRORS]).toMatchObject({ code: "too_many_errors", message: expect.stringContaining("150 errors") });
  });
});
