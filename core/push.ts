/**
 * The push shape of one request's events (issue 47 item 3): every layer on the token path — the openai-http adapter,
 * the region gateway, the region's side of the dispatch stream — implements one `open(req, sink, signal)` that calls
 * the sink once per event, with no promise per token; a stream the caller pulls (`AsyncIterable<EngineEvent>`) is
 * built on top where a caller wants one (`streamOf`), and a producer that only streams is pushed by `pushFrom`.
 *
 * Contract of a push producer:
 * - it calls `sink.event` for each event, a `done` last, or `sink.fail` once (before or after events), and nothing
 *   after either; it may call them synchronously inside `open` (a refusal known at once: `fail`);
 * - `sink.event` returning false asks it to pause (stop reading its source) until `flow.resume()` — backpressure;
 *   events it already holds may still come;
 * - aborting `signal` cancels the request upstream; the producer then ends with `sink.fail` (the abort's reason or
 *   its own cancelled error), so a consumer always learns the end.
 */
import { TidegateError } from "./errors.js";
import type { EngineEvent, EventSink, Flow } from "./ports.js";

export type { EventSink, Flow } from "./ports.js";

/** A producer of one request's events in push form. */
export type PushOpen = (sink: EventSink, signal: AbortSignal) => Flow;

/** A Flow with nothing to resume (a producer that never pauses, or one that already ended). */
export const NO_FLOW: Flow = Object.freeze({ resume() {} });

/** What `streamOf` returns: an async iterator whose `return()` always exists (and waits for the producer's end). */
export interface EventStream extends AsyncIterableIterator<EngineEvent> {
  return(value?: unknown): Promise<IteratorResult<EngineEvent>>;
  [Symbol.asyncIterator](): EventStream;
}

/** Fails `sink` with `err` and returns a flow with nothing to resume: a producer's refusal known at once. */
export function refused(sink: EventSink, err: unknown): Flow {
  sink.fail(err);
  return NO_FLOW;
}

/**
 * Opens a producer for a caller whose reports must come after its call returns (the callback shapes: the caller has
 * its answer — where the request went — before any callback): what the producer reports while `open` runs is handed
 * to `sink` in a microtask, in order, and so is whatever follows until that is delivered; then reports go straight through.
 */
export function openReportingLater(open: (sink: EventSink) => Flow, sink: EventSink): Flow {
  let held: (() => void)[] | undefined = [];
  const hold = (report: () => void) => {
    if (held === undefined) return false;
    held.push(report);
    return true;
  };
  const flow = open({
    event: (ev) => (hold(() => sink.event(ev)) ? true : sink.event(ev)),
    fail: (err) => {
      if (!hold(() => sink.fail(err))) sink.fail(err);
    },
  });
  const reports = held;
  if (reports.length === 0) held = undefined;
  else
    queueMicrotask(() => {
      for (let i = 0; i < reports.length; i++) reports[i]!();
      held = undefined;
    });
  return flow;
}

/** Events queued by `streamOf` before it asks its producer to pause. */
const HIGH_WATER = 64;

/**
 * A stream over a push producer: `open` is called at once with a sink that queues events for the caller's `next()`.
 * Aborting `signal` drops what is queued and ends the stream with the abort's reason; aborting it or stopping the iteration (`return()`, a `for await` that breaks) aborts the producer, and
 * `return()` resolves once the producer has ended (its sink failed or done), so the request is closed everywhere
 * by then. The producer is paused while HIGH_WATER events wait unread.
 */
export function streamOf(open: PushOpen, signal?: AbortSignal): EventStream {
  const ctl = new AbortController();
  const queue: EngineEvent[] = [];
  let head = 0;
  let error: unknown;
  let ended = false;
  let finished = false;
  let paused = false;
  let waiter: { resolve: (r: IteratorResult<EngineEvent>) => void; reject: (e: unknown) => void } | undefined;
  let endWaiter: (() => void) | undefined;
  const end = () => {
    ended = true;
    signal?.removeEventListener("abort", onAbort);
    endWaiter?.();
  };
  const onAbort = () => ctl.abort(signal!.reason);
  if (signal !== undefined) {
    if (signal.aborted) ctl.abort(signal.reason);
    else signal.addEventListener("abort", onAbort, { once: true });
  }
  const sink: EventSink = {
    event(ev) {
      if (ended) return false;
      if (ev.type === "done") end();
      const w = waiter;
      if (w !== undefined) {
        waiter = undefined;
        w.resolve({ value: ev, done: false });
        return true;
      }
      queue.push(ev);
      if (queue.length - head >= HIGH_WATER) paused = true;
      return !paused;
    },
    fail(err) {
      if (ended) return;
      error = err ?? new TidegateError("upstream_error", "the request failed");
      end();
      const w = waiter;
      waiter = undefined;
      w?.reject(error);
    },
  };
  let flow: Flow = NO_FLOW;
  try {
    flow = open(sink, ctl.signal);
  } catch (err) {
    sink.fail(err);
  }
  const it: EventStream = {
    next() {
      // Aborted by the caller: what is queued is dropped and the stream ends with the abort.
      if (ctl.signal.aborted && !finished) {
        queue.length = 0;
        head = 0;
        if (ended && error === undefined) error = ctl.signal.reason;
      }
      if (head < queue.length) {
        const ev = queue[head++]!;
        if (head === queue.length) {
          queue.length = 0;
          head = 0;
        }
        if (paused && queue.length - head < HIGH_WATER / 2) {
          paused = false;
          flow.resume();
        }
        if (ev.type === "done") finished = true;
        return Promise.resolve({ value: ev, done: false });
      }
      if (finished || (ended && error === undefined)) return Promise.resolve({ value: undefined, done: true });
      if (error !== undefined) {
        finished = true;
        const e = error;
        return Promise.reject(e);
      }
      return new Promise((resolve, reject) => (waiter = { resolve, reject }));
    },
    async return() {
      finished = true;
      queue.length = 0;
      head = 0;
      if (!ended) {
        const over = new Promise<void>((r) => (endWaiter = r));
        ctl.abort(new TidegateError("cancelled", "the stream's consumer stopped"));
        await over;
      }
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return it;
    },
  };
  return it;
}

/**
 * Pushes a stream's events into `sink` (a producer that only streams, e.g. an engine without `open`): one pull per
 * event, paused while `event` returns false. The stream is returned before its `done` goes on (its cleanup has run
 * by then; a failure there goes to `onCloseError`, not to the request). Aborting `signal` (the one the stream was
 * made with) while paused returns the stream and fails the sink with the abort's reason: a paused stream is not
 * pulled, so it would never see the abort itself. Its failure, or its end without `done`, reaches `sink.fail`.
 */
export function pushFrom(stream: AsyncIterable<EngineEvent>, sink: EventSink, opts: { signal?: AbortSignal | undefined; onCloseError?: (err: unknown) => void } = {}): Flow {
  const { signal, onCloseError } = opts;
  let gate: (() => void) | undefined;
  let paused = false;
  const wake = () => {
    const g = gate;
    gate = undefined;
    g?.();
  };
  signal?.addEventListener("abort", wake, { once: true });
  const closeQuietly = async (it: AsyncIterator<EngineEvent>) => {
    try {
      await it.return?.();
    } catch (err) {
      onCloseError?.(err);
    }
  };
  void (async () => {
    const it = stream[Symbol.asyncIterator]();
    try {
      for (;;) {
        if (paused && signal?.aborted !== true) await new Promise<void>((r) => (gate = r));
        if (paused && signal?.aborted === true) {
          await closeQuietly(it);
          return sink.fail(signal.reason);
        }
        const step = await it.next();
        if (step.done === true) throw new TidegateError("upstream_error", "the stream ended without a done event");
        if (step.value.type === "done") {
          await closeQuietly(it);
          sink.event(step.value);
          return;
        }
        if (!sink.event(step.value)) paused = true;
      }
    } catch (err) {
      sink.fail(err);
    } finally {
      signal?.removeEventListener("abort", wake);
    }
  })();
  return {
    resume() {
      paused = false;
      wake();
    },
  };
}
