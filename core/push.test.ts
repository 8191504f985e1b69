import { describe, expect, it } from "vitest";
import { TidegateError } from "./errors.js";
import type { EngineEvent } from "./ports.js";
import { openReportingLater, pushFrom, streamOf, type EventSink } from "./push.js";

const tok = (text: string): EngineEvent => ({ type: "token", text, tokens: 1 });
const DONE: EngineEvent = { type: "done", finishReason: "stop", usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } };

/** A producer the test drives by hand: the sink and signal `streamOf` opened it with, and how often it was resumed. */
function manual() {
  const h = { sink: undefined as EventSink | undefined, signal: undefined as AbortSignal | undefined, resumed: 0 };
  const open = (sink: EventSink, signal: AbortSignal) => {
    h.sink = sink;
    h.signal = signal;
    return { resume: () => void h.resumed++ };
  };
  return { h, open };
}

describe("streamOf", () => {
  it("hands pushed events to next() in order, queued or awaited, and ends after done", async () => {
    const { h, open } = manual();
    const s = streamOf(open);
    expect(h.sink!.event(tok("a"))).toBe(true);
    const first = s.next();
    const second = s.next(); // nothing queued for it yet: waits
    expect(h.sink!.event(tok("b"))).toBe(true);
    expect((await first).value).toEqual(tok("a"));
    expect((await second).value).toEqual(tok("b"));
    h.sink!.event(DONE);
    expect((await s.next()).value).toEqual(DONE);
    expect((await s.next()).done).toBe(true);
  });

  it("delivers queued events before a later failure, then rejects with it", async () => {
    const { h, open } = manual();
    const s = streamOf(open);
    h.sink!.event(tok("a"));
    h.sink!.fail(new TidegateError("upstream_error", "engine gone"));
    expect((await s.next()).value).toEqual(tok("a"));
    await expect(s.next()).rejects.toThrow("engine gone");
    expect((await s.next()).done).toBe(true);
  });

  it("reads a done to the end: the event, then done: true", async () => {
    const { h, open } = manual();
    const s = streamOf(open);
    h.sink!.event(tok("a"));
    h.sink!.event(DONE);
    const got: EngineEvent[] = [];
    for await (const ev of s) got.push(ev);
    expect(got).toEqual([tok("a"), DONE]);
    // Nothing after done reaches the stream: the producer is told the stream is closed.
    expect(h.sink!.event(tok("late"))).toBe(false);
  });

  it("asks the producer to pause at 64 unread events and resumes it once the reader is under half of that", async () => {
    const { h, open } = manual();
    const s = streamOf(open);
    for (let i = 0; i < 63; i++) expect(h.sink!.event(tok(String(i)))).toBe(true);
    expect(h.sink!.event(tok("63"))).toBe(false);
    for (let i = 0; i < 32; i++) await s.next();
    expect(h.resumed).toBe(0);
    await s.next(); // 31 left: under half
    expect(h.resumed).toBe(1);
  });

  it("return() aborts the producer and resolves only once the producer has ended", async () => {
    const { h, open } = manual();
    const s = streamOf(open);
    h.sink!.event(tok("a"));
    let returned = false;
    const r = s.return().then(() => (returned = true));
    expect(h.signal!.aborted).toBe(true);
    await Promise.resolve();
    expect(returned).toBe(false);
    h.sink!.fail(h.signal!.reason);
    await r;
    expect(returned).toBe(true);
  });

  it("an aborted caller's signal drops what is queued and ends with the abort's reason", async () => {
    const { h, open } = manual();
    const ctl = new AbortController();
    const s = streamOf(open, ctl.signal);
    h.sink!.event(tok("a"));
    ctl.abort(new Error("client went away"));
    expect(h.signal!.aborted).toBe(true);
    h.sink!.fail(h.signal!.reason);
    await expect(s.next()).rejects.toThrow("client went away");
  });

  it("a producer that throws while opening fails the stream", async () => {
    const s = streamOf(() => {
      throw new TidegateError("model_not_found", "no such model");
    });
    await expect(s.next()).rejects.toThrow("no such model");
  });
});

describe("pushFrom", () => {
  it("pushes a stream's events, returns the stream before done goes on, and pauses while the sink is full", async () => {
    const log: string[] = [];
    async function* gen(): AsyncGenerator<EngineEvent> {
      try {
        yield tok("a");
        yield tok("b");
        yield DONE;
      } finally {
        log.push("closed");
      }
    }
    let full = true;
    const got: EngineEvent[] = [];
    let end!: () => void;
    const ended = new Promise<void>((r) => (end = r));
    const flow = pushFrom(gen(), {
      event(ev) {
        got.push(ev);
        if (ev.type === "done") {
          log.push("done");
          end();
        }
        return !full;
      },
      fail: (err) => {
        throw err;
      },
    });
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(got).toEqual([tok("a")]); // paused after the first: the sink said it was full
    full = false;
    flow.resume();
    await ended;
    expect(got).toEqual([tok("a"), tok("b"), DONE]);
    expect(log).toEqual(["closed", "done"]);
  });

  it("fails the sink when the stream throws or ends without done", async () => {
    const errors: unknown[] = [];
    const sink = (resolve: () => void): EventSink => ({ event: () => true, fail: (e) => (errors.push(e), resolve()) });
    async function* broken(): AsyncGenerator<EngineEvent> {
      throw new TidegateError("upstream_error", "reset");
    }
    async function* short(): AsyncGenerator<EngineEvent> {
      yield tok("a");
    }
    await new Promise<void>((r) => pushFrom(broken(), sink(r)));
    await new Promise<void>((r) => pushFrom(short(), sink(r)));
    expect(errors.map((e) => (e as Error).message)).toEqual(["reset", "the stream ended without a done event"]);
  });

  it("returns a paused stream and fails the sink when its signal aborts (a paused stream is not pulled, so it would never see it)", async () => {
    const ctl = new AbortController();
    let closed = false;
    async function* endless(): AsyncGenerator<EngineEvent> {
      try {
        for (;;) yield tok("x");
      } finally {
        closed = true;
      }
    }
    let failed: unknown;
    let end!: () => void;
    const ended = new Promise<void>((r) => (end = r));
    pushFrom(endless(), { event: () => false, fail: (e) => ((failed = e), end()) }, { signal: ctl.signal });
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(closed).toBe(false);
    ctl.abort(new Error("cancelled by the router"));
    await ended;
    expect(closed).toBe(true);
    expect((failed as Error).message).toBe("cancelled by the router");
  });
});

describe("openReportingLater", () => {
  it("hands what the producer reports while opening to the sink after the call returns, in order, then reports straight through", async () => {
    const log: string[] = [];
    let later: EventSink | undefined;
    openReportingLater(
      (sink) => {
        sink.event(tok("a"));
        sink.event(tok("b"));
        later = sink;
        return { resume() {} };
      },
      { event: (ev) => (log.push(ev.type === "token" ? ev.text : "done"), true), fail: (e) => void log.push(`fail ${(e as Error).message}`) },
    );
    log.push("returned");
    later!.event(tok("c")); // before the held reports went out: queued behind them
    await Promise.resolve();
    later!.event(DONE);
    expect(log).toEqual(["returned", "a", "b", "c", "done"]);
  });

  it("defers a refusal known at once the same way", async () => {
    const log: string[] = [];
    openReportingLater((sink) => (sink.fail(new Error("no instance")), { resume() {} }), { event: () => true, fail: (e) => void log.push((e as Error).message) });
    log.push("returned");
    await Promise.resolve();
    expect(log).toEqual(["returned", "no instance"]);
  });
});

