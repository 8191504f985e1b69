import { describe, expect, it } from "vitest";
import { ChunkFormatter, estimateTokens, makeUsage, parseOpenAIRequest } from "./openai.js";
import { TidegateError } from "./errors.js";

function err(fn: () => unknown): TidegateError {
  try {
    fn();
  } catch (e) {
    if (e instanceof TidegateError) return e;
    throw e;
  }
  throw new Error("expected an error");
}

describe("parseOpenAIRequest", () => {
  it("parses a streaming chat request with usage", () => {
    const p = parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "hello there" }], stream: true, stream_options: { include_usage: true }, max_tokens: 50 });
    expect(p).toMatchObject({ kind: "chat", model: "m", stream: true, includeUsage: true, maxTokens: 50 });
    // "hello there" = 11 chars → 3 tokens, +3 per message, +3 reply priming
    expect(p.promptTokens).toBe(9);
  });

  it("prefers max_completion_tokens and applies defaults", () => {
    expect(parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "x" }], max_completion_tokens: 7, max_tokens: 99 }).maxTokens).toBe(7);
    expect(parseOpenAIRequest("completion", { model: "m", prompt: "abc" }).maxTokens).toBe(16);
  });

  it("rejects bad input with the parameter named", () => {
    expect(err(() => parseOpenAIRequest("chat", { model: "m", messages: [] })).param).toBe("messages");
    expect(err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "" }] })).param).toBe("messages[0].content");
    expect(err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "x", content: "a" }] })).param).toBe("messages[0].role");
    expect(err(() => parseOpenAIRequest("chat", { model: 5, messages: [{ role: "user", content: "a" }] })).param).toBe("model");
    expect(err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "a" }], max_tokens: -1 })).param).toBe("max_tokens");
    expect(err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "a" }], max_tokens: 1e12 })).param).toBe("max_tokens");
    expect(err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "a" }], max_tokens: 1.5 })).param).toBe("max_tokens");
    expect(err(() => parseOpenAIRequest("completion", { model: "m", prompt: 3 })).param).toBe("prompt");
    expect(err(() => parseOpenAIRequest("chat", "not an object")).status).toBe(400);
  });

  it("answers a request over the context as OpenAI does: context_length_exceeded, param messages (or prompt)", () => {
    const over = err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "a" }], max_tokens: 100 }, 50));
    expect(over.toOpenAI()).toEqual({ error: { message: "This model's maximum context length is 50 tokens. However, you requested 107 tokens (7 in the messages, 100 in the completion). Please reduce the length of the messages or completion.", type: "invalid_request_error", param: "messages", code: "context_length_exceeded" } });
    expect(over.status).toBe(400);
    const prompt = err(() => parseOpenAIRequest("chat", { model: "m", messages: [{ role: "user", content: "x".repeat(400) }] }, 50));
    expect(prompt.toOpenAI().error).toMatchObject({ message: "This model's maximum context length is 50 tokens. However, your messages resulted in 106 tokens. Please reduce the length of the messages.", param: "messages", code: "context_length_exceeded" });
    expect(err(() => parseOpenAIRequest("completion", { model: "m", prompt: "abcd", max_tokens: 60 }, 50)).toOpenAI().error).toMatchObject({ param: "prompt", code: "context_length_exceeded" });
  });
});

describe("ChunkFormatter", () => {
  it("emits OpenAI chat chunks that parse as JSON", () => {
    const f = new ChunkFormatter("chat", "chatcmpl-1", "m", 1700000000);
    const lines = [f.roleChunk(), f.textChunk(' he said "hi"\n'), f.finishChunk("length"), f.usageChunk(makeUsage(3, 2))];
    const objs = lines.map((l) => {
      expect(l.startsWith("data: ") && l.endsWith("\n\n")).toBe(true);
      return JSON.parse(l.slice(6));
    });
    expect(objs[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(objs[1].choices[0].delta.content).toBe(' he said "hi"\n');
    expect(objs[2].choices[0].finish_reason).toBe("length");
    expect(objs[3]).toMatchObject({ object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
  });

  it("emits completion chunks with text", () => {
    const f = new ChunkFormatter("completion", "cmpl-1", "m", 1);
    expect(f.roleChunk()).toBe("");
    expect(JSON.parse(f.textChunk("a").slice(6)).choices[0].text).toBe("a");
    expect(f.fullResponse("ab", "stop", makeUsage(1, 2))).toMatchObject({ object: "text_completion", choices: [{ text: "ab", finish_reason: "stop" }] });
  });

  it("estimates tokens as ceil(chars/4)", () => {
    expect([estimateTokens(""), estimateTokens("a"), estimateTokens("abcd"), estimateTokens("abcde")]).toEqual([0, 1, 1, 2]);
  });
});
