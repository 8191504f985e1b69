import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import { defaultDataDir, shippedDataDir } from "../../core/paths.js";
import { SHARED_DATA, needingSharedData, sharedDataMissing } from "../../test/helpers/shared-data.js";
import { assignRequests } from "./assign.js";
import { parseAzureTimestamp, readAzureCsv, readMooncakeJsonl, readTrace } from "./traces.js";

describe("trace readers", () => {
  it("parses Azure timestamps with 7 fractional digits", () => {
    const a = parseAzureTimestamp("2023-11-16 18:15:46.6805900");
    const b = parseAzureTimestamp("2023-11-16 18:15:50.9951690");
    expect(b - a).toBeCloseTo(4314.579, 3);
    expect(parseAzureTimestamp("2023-11-16 18:15:46")).toBe(Date.UTC(2023, 10, 16, 18, 15, 46));
    expect(parseAzureTimestamp("16/11/2023")).toBeNaN();
  });

  it("reads an Azure CSV with CRLF lines, relative sorted arrivals, 0 output tokens read as 1", () => {
    const text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:47.0000000,10,0\r\n2023-11-16 18:15:46.5000000,374,44\r\n";
    const t = readAzureCsv(text, "mini");
    expect(t.requests).toEqual([
      { arrivalMs: 0, promptTokens: 374, outputTokens: 44 },
      { arrivalMs: 500, promptTokens: 10, outputTokens: 1 },
    ]);
    expect(t.spanMs).toBe(500);
  });

  it("names the line of a bad row", () => {
    expect(() => readAzureCsv("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:47.0,abc,3\r\n", "bad.csv")).toThrow(/bad\.csv:2.*ContextTokens/);
    expect(() => readAzureCsv("time,a,b\n", "h.csv")).toThrow(/header/);
    expect(() => readMooncakeJsonl('{"timestamp":0,"input_length":5,"output_length":2}\n{"timestamp":"x"}\n', "m.jsonl")).toThrow(/m\.jsonl:2\.timestamp/);
  });

  it("keeps Mooncake's hash_ids as block ids (issue 34) and names a bad one", () => {
    const t = readMooncakeJsonl('{"timestamp":5,"input_length":600,"output_length":2,"hash_ids":[7,9]}\n{"timestamp":0,"input_length":5,"output_length":1}\n', "m.jsonl");
    expect(t.requests).toEqual([
      { arrivalMs: 0, promptTokens: 5, outputTokens: 1 },
      { arrivalMs: 5, promptTokens: 600, outputTokens: 2, blockIds: [7, 9] },
    ]);
    expect(() => readMooncakeJsonl('{"timestamp":0,"input_length":5,"output_length":2,"hash_ids":[1,"x"]}\n', "m.jsonl")).toThrow(/m\.jsonl:1\.hash_ids/);
  });

  it("reads the shipped traces: Azure conv 19,366 over ~3,502 s, code 8,819", () => {
    const dir = defaultDataDir();
    expect(dir).toBe(shippedDataDir());
    const conv = readTrace("azure-conv", dir);
    expect(conv.requests.length).toBe(19366);
    expect(conv.spanMs / 1000).toBeCloseTo(3501.7, 0);
    expect(conv.requests[0]).toEqual({ arrivalMs: 0, promptTokens: 374, outputTokens: 44 });
    // The per-minute fast path gives the same times as parsing every timestamp in full.
    const lines = readFileSync(join(dir, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"), "utf8").split("\r\n").slice(1).filter((l) => l !== "");
    const full = lines.map((l) => parseAzureTimestamp(l.slice(0, l.indexOf(","))));
    const t0 = Math.min(...full);
    expect(conv.requests.map((r) => r.arrivalMs)).toEqual(full.map((t) => t - t0).sort((a, b) => a - b));
    expect(readTrace("azure-code", dir).requests.length).toBe(8819);
    expect(() => readTrace("mooncake", dir)).toThrow(/--trace: mooncake is not in .*core\/data \(tidegate ships only the Azure 2023 traces\): pass --data-dir/);
  });

  it.skipIf(sharedDataMissing !== undefined)(needingSharedData("reads Mooncake's conversation trace from the full data folder: 12,031 requests"), () => {
    const moon = readTrace("mooncake", SHARED_DATA);
    expect(moon.requests.length).toBe(12031);
    expect(moon.spanMs).toBe(3536999);
  });
});

describe("assignment of requests to (model, client region)", () => {
  const config = parseConfig(DEFAULT_CONFIG_JSON);
  const reqs = Array.from({ length: 2000 }, (_, i) => ({ arrivalMs: i, promptTokens: 100 + ((i * 37) % 9000), outputTokens: 50 }));

  it("is deterministic per seed and spreads over regions and models", () => {
    const a = assignRequests(reqs, config, 7);
    expect(assignRequests(reqs, config, 7)).toEqual(a);
    expect(assignRequests(reqs, config, 8)).not.toEqual(a);
    for (const region of ["us-east", "us-central", "us-west"]) {
      const n = a.filter((x) => x.clientRegion === region).length;
      expect(n).toBeGreaterThan(550);
      expect(n).toBeLessThan(790);
    }
    expect(new Set(a.map((x) => x.model)).size).toBe(4);
  });

  it("only assigns models whose context holds prompt + output", () => {
    const a = assignRequests(reqs, config, 1);
    a.forEach((x, i) => {
      const need = reqs[i]!.promptTokens + reqs[i]!.outputTokens;
      if (need > 4096) expect(x.model).not.toBe("llama2-70b");
      if (need > 8192) expect(x.model).not.toBe("bloom-176b");
    });
    const huge = assignRequests([{ arrivalMs: 0, promptTokens: 200_000, outputTokens: 1 }], config, 1);
    expect(huge[0]!.model).toBeUndefined();
  });
});
