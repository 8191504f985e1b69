/** Reading an engine or link stream in tests: every event, or the TidegateError it fails with. */
import { findTidegateError, type TidegateError } from "../../core/errors.js";
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
