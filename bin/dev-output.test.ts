import { afterAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../core/log.js";
import { DevConsole, devLogFile, openDevLog, progressText, showProgress } from "./dev-output.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-dev-output-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A console stream that keeps what was written. */
function stream(tty: boolean, columns?: number): { out: { write(s: string): boolean; isTTY: boolean; columns?: number }; text(): string } {
  let text = "";
  return { out: { write: (s: string) => ((text += s), true), isTTY: tty, ...(columns === undefined ? {} : { columns }) }, text: () => text };
}

describe("dev's log and console", () => {
  it("writes every line to <dataDir>/dev.log (truncated at start) and copies warnings and errors to the console", () => {
    const data = join(dir, "data");
    const s = stream(false);
    const target = openDevLog(undefined, data, new DevConsole(s.out));
    expect(target.file).toBe(devLogFile(data));
    expect(target.file).toBe(join(data, "dev.log"));
    const log = createLogger("info", { cmd: "dev" }, (l, lvl) => target.sink(l, lvl));
    log.debug("not at info");
    log.info("instance serving", { instanceId: "r/n/m/1" });
    log.warn("no ServeGen data");
    log.error("scaling failed", { model: "m" });
    const file = readFileSync(target.file!, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { msg: string; level: string });
    expect(file.map((l) => l.msg)).toEqual(["instance serving", "no ServeGen data", "scaling failed"]);
    const copied = s.text().trim().split("\n").map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(copied).toEqual(["no ServeGen data", "scaling failed"]);
    target.close();
    target.sink("after close", "info"); // not in the file: on the console
    expect(readFileSync(target.file!, "utf8")).not.toContain("after close");
    expect(s.text()).toContain("after close\n");

    // A second start overwrites the file.
    const again = openDevLog(undefined, data, new DevConsole(stream(false).out));
    expect(readFileSync(again.file!, "utf8")).toBe("");
    again.close();
  });

  it.skipIf(!existsSync("/dev/full"))("a write that fails (a full disk: /dev/full) is said once on the console, and the log goes on there", () => {
    const s = stream(false);
    const target = openDevLog("/dev/full", join(dir, "unused"), new DevConsole(s.out));
    target.sink('{"msg":"a"}', "info");
    target.sink('{"msg":"b"}', "info");
    expect(s.text()).toMatch(/^tidegate dev: cannot write the log to \/dev\/full \(ENOSPC[^\n]*\n\{"msg":"a"\}\n\{"msg":"b"\}\n$/);
    target.close();
  });

  it("--log-file - sends every line to the console; another value is the file", () => {
    const s = stream(false);
    const target = openDevLog("-", join(dir, "unused"), new DevConsole(s.out));
    expect(target.file).toBeUndefined();
    target.sink('{"msg":"a"}', "info");
    target.sink('{"msg":"b"}', "warn");
    expect(s.text()).toBe('{"msg":"a"}\n{"msg":"b"}\n');
    const own = openDevLog(join(dir, "elsewhere", "x.log"), join(dir, "unused"), new DevConsole(stream(false).out));
    own.sink('{"msg":"c"}', "info");
    own.close();
    expect(readFileSync(join(dir, "elsewhere", "x.log"), "utf8")).toBe('{"msg":"c"}\n');
  });

  it("progress: the counts, capped at what each region wants, then the time", () => {
    const text = progressText(
      [
        { region: "us-east", serving: 3, wanted: 8 },
        { region: "us-west", serving: 9, wanted: 8 },
      ],
      3250,
    );
    expect(text).toBe("11/16 instances serving after 3.3 s (us-east 3/8, us-west 8/8)");
  });

  it("on a terminal the status line is rewritten in place, cut to the width, and a printed line clears and redraws it", () => {
    const s = stream(true, 30);
    const c = new DevConsole(s.out);
    c.status("first");
    c.status("a status line longer than thirty characters");
    c.line("a warning");
    c.status("");
    expect(s.text()).toBe("\r\x1b[Kfirst" + "\r\x1b[Ka status line longer than th…" + "\r\x1b[Ka warning\na status line longer than th…" + "\r\x1b[K");
  });

  it("off a terminal, progress is a plain line now and then and no status line", async () => {
    const s = stream(false);
    const p = showProgress({ console: new DevConsole(s.out), regions: () => [{ region: "r", serving: 1, wanted: 2 }], plainEveryMs: 10 });
    for (let i = 0; i < 500 && !s.text().includes("\n"); i++) await new Promise((r) => setTimeout(r, 10));
    p.stop();
    const lines = s.text().split("\n").filter((l) => l !== "");
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l).toMatch(/^tidegate dev: waiting — 1\/2 instances serving after \d+\.\d s \(r 1\/2\)$/);
    expect(s.text()).not.toContain("\r");
  });
});
