/**
 * Reads a MulticastPlan from untrusted JSON (the node agent receives plans over gRPC as JSON). Every field is
 * checked with the path at fault; the structural checks (cycles, duplicates, deadlocks) are validatePlan's.
 */
import { ObjectReader, ValidationError, checkNumber, checkString, parseJson } from "../../core/validate.js";
import type { MulticastAlgorithm, MulticastPlan, Transfer } from "./schedule.js";

const ALGORITHMS: readonly MulticastAlgorithm[] = ["chain", "binomial", "tree", "unicast", "ring"];

/** Parses and shape-checks a plan; throws ValidationError (invalid_request) naming the path. */
export function planFromJson(text: string): MulticastPlan {
  const r = new ObjectReader(parseJson(text, "plan_json", "invalid_request"), "plan", "invalid_request");
  const int = { integer: true, min: 0 };
  const ids = (v: unknown, path: string) => checkString(v, path, "invalid_request");
  const plan: MulticastPlan = {
    algorithm: r.string("algorithm", undefined, { oneOf: ALGORITHMS }) as MulticastAlgorithm,
    blockCount: r.number("blockCount", undefined, int),
    blockBytes: r.number("blockBytes", undefined, int),
    totalBytes: r.number("totalBytes", undefined, int),
    sources: r.array("sources", ids),
    targets: r.array("targets", ids),
    steps: r.number("steps", 0, int),
    transfers: r.array("transfers", (v, path): Transfer => {
      const t = new ObjectReader(v, path, "invalid_request");
      const out: Transfer = {
        from: t.string("from"),
        to: t.string("to"),
        block: t.number("block", undefined, int),
        step: t.number("step", undefined, int),
      };
      if (t.has("medium")) out.medium = t.string("medium", undefined, { oneOf: ["network", "nvlink"] }) as "network" | "nvlink";
      t.done();
      return out;
    }),
  };
  const strArrays = (v: unknown, path: string) => {
    if (!Array.isArray(v)) throw new ValidationError(path, "expected an array of node ids", "invalid_request");
    return v.map((x, i) => ids(x, `${path}[${i}]`));
  };
  if (r.has("sendMode")) plan.sendMode = r.string("sendMode", undefined, { oneOf: ["in-order", "per-peer"] }) as "in-order" | "per-peer";
  if (r.has("chains")) plan.chains = r.array("chains", strArrays);
  if (r.has("pipelines")) plan.pipelines = r.array("pipelines", strArrays);
  if (r.has("subGroups"))
    plan.subGroups = r.array("subGroups", (v, path) => {
      const g = new ObjectReader(v, path, "invalid_request");
      const out = { source: g.string("source"), nodes: g.array("nodes", ids), order: g.array("order", (x, p) => checkNumber(x, p, int, "invalid_request")) };
      g.done();
      return out;
    });
  r.done();
  return plan;
}
