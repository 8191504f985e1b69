/**
 * Small helpers every bench prints with: installed package versions, medians and a seeded arm order (BENCH.md: "print
 * the versions … every round", "the median of several rounds", arms alternating).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../../core/paths.js";
import type { Random } from "../../core/random.js";

/** The installed version of npm package `pkg` ("?" when it cannot be read). */
export function packageVersion(pkg: string): string {
  try {
    return (JSON.parse(readFileSync(join(repoRoot(), "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return "?";
  }
}

/** The median of `xs` (the mean of the two middle values for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** A copy of `xs` in an order drawn from `random` (Fisher–Yates): every order equally likely, the same for one seed. */
export function shuffled<T>(xs: readonly T[], random: Random): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
