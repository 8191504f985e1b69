/**
 * Issue 32 item 6's heap check: 100,000 requests through the region's Gateway (test/region/gateway-heap.ts, in its
 * own `node --expose-gc` process, an in-process engine shaped like the openai-http adapter) leave the heap flat and
 * nothing running. Bounds: heap growth after the warm-up tenth under 1 MiB (measured: about 16 KB, 0.1 B/request)
 * and a least-squares slope under 2 B/request — well below the 420 B/request the issue reported — and the engine's
 * running count 0 (before the fix: 100,000). No timing bounds: the machine may be busy. Runs the compiled script
 * (npm test builds first).
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../e2e/procs.js";
import type { HeapReport } from "./gateway-heap.js";

describe("the region's request path over 100,000 requests", () => {
  it("keeps the heap flat and ends with nothing running", async () => {
    const script = resolve(REPO_ROOT, "dist/test/region/gateway-heap.js");
    const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", script, "--requests", "100000"], { cwd: REPO_ROOT, timeout: 50_000 });
    const report = JSON.parse(stdout.trim().split("\n").at(-1)!) as HeapReport;
    expect(report.requests).toBe(100_000);
    expect(report.heapSamples.map((s) => s.requests)).toEqual(Array.from({ length: 10 }, (_, i) => (i + 1) * 10_000));
    expect(report.inFlight).toBe(0);
    expect(report.engineRunning).toBe(0);
    expect(report.growthBytes).toBeLessThan(1024 * 1024);
    expect(Math.abs(report.slopeBytesPerRequest)).toBeLessThan(2);
  });
});
