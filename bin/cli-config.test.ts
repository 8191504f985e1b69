/**
 * The compiled CLI (npm test builds first) as a user meets its flags: `--print-config` prints the configuration with
 * the flags applied (issue 49: `dev --print-config --port 8093` printed 8080), an unknown flag near a known one gets a
 * did-you-mean, and a listen port another process holds ends `dev`, `global`, `region` and `planner` at once with one
 * line naming it — before the dev fleet starts (no dev log is written).
 */
import { afterAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CLI, REPO_ROOT } from "../test/e2e/procs.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-cli-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI to its end: exit code, stdout, stderr and how long it took (ms). */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const t0 = performance.now();
  try {
    const r = await promisify(execFile)(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, timeout: 60_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - t0 };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr, ms: performance.now() - t0 };
  }
}

describe("the CLI's flags", () => {
  it("--print-config prints what the command runs with: the flags that set config keys applied", async () => {
    const dev = await cli(["dev", "--print-config", "--port", "8093", "--host", "0.0.0.0", "--redis-url", "redis://127.0.0.1:6390"]);
    expect(dev.code).toBe(0);
    const d = JSON.parse(dev.stdout) as { router: { port: number; host: string }; queue: { backend: string; redisUrl: string } };
    expect(d.router).toMatchObject({ port: 8093, host: "0.0.0.0" });
    expect(d.queue).toMatchObject({ backend: "redis", redisUrl: "redis://127.0.0.1:6390" });
    const region = JSON.parse((await cli(["region", "--print-config", "--region", "us-west", "--grpc-port", "50099"])).stdout) as { regions: { name: string; grpcAddress: string }[] };
    expect(region.regions.find((r) => r.name === "us-west")!.grpcAddress).toBe("127.0.0.1:50099");
    expect(region.regions.find((r) => r.name === "us-east")!.grpcAddress).toBe("127.0.0.1:50051");
    const planner = JSON.parse((await cli(["planner", "--print-config", "--interval-ms", "5000", "--advisory", "--key-prefix", "t:"])).stdout) as { planner: { intervalMs: number; advisory: boolean }; queue: { keyPrefix: string } };
    expect(planner.planner).toMatchObject({ intervalMs: 5000, advisory: true });
    expect(planner.queue.keyPrefix).toBe("t:");
  });

  it("an unknown flag near a known one is answered with it", async () => {
    const r = await cli(["dev", "--prot", "8093"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("tidegate: unknown flag --prot; did you mean --port? (see --help)\n");
    expect((await cli(["dev", "--zzzzzz"])).stderr).toBe("tidegate: unknown flag --zzzzzz (see --help)\n");
  });

  it("a port in use ends the command at once, in one line naming it, before anything starts", async () => {
    const held: Server = createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    const port = (held.address() as { port: number }).port;
    try {
      const dataDir = join(dir, "data");
      writeFileSync(join(dir, "dev.json"), JSON.stringify({ queue: { dataDir } }));
      for (const args of [["dev", "--config", join(dir, "dev.json"), "--port", String(port)], ["global", "--port", String(port)], ["region", "--region", "us-east", "--grpc-port", String(port)], ["planner", "--port", String(port)]]) {
        const r = await cli(args);
        expect(r.code, args.join(" ")).toBe(2);
        expect(r.stdout).toBe("");
        expect(r.stderr.split("\n").filter((l) => l !== ""), args.join(" ")).toEqual([expect.stringMatching(new RegExp(`^tidegate: 127\\.0\\.0\\.1:${port} \\(.*\\) is already in use: stop what listens there, or pick another port \\(0 picks a free one\\)$`))]);
        // dev loads its fleet's modules only after the check: its process (Node's start included) ends within 2 s.
        if (args[0] === "dev") expect(r.ms).toBeLessThan(2000);
      }
      expect(existsSync(join(dataDir, "dev.log"))).toBe(false);
    } finally {
      held.close();
    }
  });
});
