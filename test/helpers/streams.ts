/** Reading an engine or link stream in tests: every event, or the TidegateError it fails with. */
import { findTidegateError, type TidegateError } from "../../core/errors.js";
import type { VirtualClock } from "../../core/clock.js";
import type { EngineEvent } from "../../core/ports.js";

/** Every event of the stream, in order. */
export async function collect(it: AsyncIterable<EngineEvent>): Promise<EngineEvent[]> {
  const out: EngineEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

/** The TidegateError `p` rejects with (fails the test if it resolves or rejects with something else). */
export async function errorOf(p: Promise<unknown>): Promise<TidegateError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  const te = findTidegateError(err);
  if (te === undefined) throw new Error(`expected a TidegateError, got ${String(err)}`);
  return te;
}

/**
 * Reads `stream` to its end on a virtual clock: fires the clock's next events, letting promise chains (a prefill step,
 * a KV pull) run between them, until the stream ends (at most `maxSteps` events). Its events, the virtual time of the
 * first, and what it failed with.
 */
export async function readOnClock(clock: VirtualClock, stream: AsyncIterable<EngineEvent>, maxSteps = 100_000): Promise<{ events: EngineEvent[]; firstAtMs: number; error?: unknown }> {
  const events: EngineEvent[] = [];
  let firstAtMs = -1;
  let ended = false;
  let error: unknown;
  void (async () => {
    for await (const ev of stream) {
      if (firstAtMs < 0) firstAtMs = clock.now();
      events.push(ev);
    }
  })().then(
    () => (ended = true),
    (err: unknown) => ((error = err), (ended = true)),
  );
  for (let i = 0; i < maxSteps && !ended; i++) {
    const next = clock.nextEventMs();
    if (next !== undefined) clock.advanceToSync(next);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  if (!ended) throw new Error(`the stream did not end within ${maxSteps} clock events`);
  return { events, firstAtMs, ...(error === undefined ? {} : { error }) };
}

/** Fires a virtual clock's events up to `targetMs`, letting promise chains (a prefill step, a KV pull) run after each. */
export async function advanceYielding(clock: VirtualClock, targetMs: number): Promise<void> {
  for (;;) {
    const next = clock.nextEventMs();
    if (next === undefined || next > targetMs) break;
    clock.advanceToSync(next);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  clock.advanceToSync(targetMs);
}
