/**
 * The import rules of the tree (issue 30; README "Layout"), read from the source:
 *
 *   bin ─▶ sim ─▶ planner, router, region ─▶ forecasts ─▶ core          (native ─▶ core)
 *                                  region ─▶ nodes ─▶ engines ─▶ native
 *
 *   engines: what serves tokens (engine-sim, the openai-http adapter, serve-while-loading); nodes: what runs on a
 *   GPU host (the node agent, its engine supervisor, multicast plans and roles); region: what runs once per region.
 *
 * - a tier imports only the tiers below it (ALLOWED); core imports no tier;
 * - sim is imported only by bin and tests; bin by nothing but itself, and no command imports `bin/commands/dev.ts`
 *   (shared helpers live in bin/*.ts);
 * - production code imports neither vitest nor anything under test/;
 * - inside a tier, its folders import each other without a cycle (no folder knot);
 * - a config key a tier adds to core's config types by declaration merging (`declare module "…/core/config/…"`) is
 *   read only by that tier and the tiers that may import it: another tier's `config.<key>` would depend on it through
 *   a type no import shows (hiddenConfigReads); such a section's type is declared in core.
 * Test files (`*.test.ts`, `*.vmtest.ts`, everything under test/) may import anything.
 */
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, normalize, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface SourceFile {
  /** Repository-relative path, e.g. `nodes/agent/node.ts`. */
  path: string;
  production: boolean;
  /** Repository-relative `.ts` paths of relative imports, and bare specifiers (`vitest`, `node:fs`) as written. */
  imports: string[];
  /** Keys this file adds to core's config types by declaration merging. */
  configMerges?: string[];
  /** Keys it reads off a config (`config.<key>`, `cfg?.<key>`, `config["<key>"]`). */
  configReads?: string[];
}

export interface Violation {
  from: string;
  to: string;
  rule: string;
}

/** Which tiers each tier may import (besides itself). */
export const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  core: [],
  native: ["core"],
  forecasts: ["core"],
  engines: ["core", "native"],
  nodes: ["core", "native", "engines"],
  region: ["core", "native", "engines", "nodes"],
  router: ["core", "forecasts"],
  planner: ["core", "forecasts"],
  sim: ["core", "native", "forecasts", "engines", "nodes", "region", "router", "planner"],
  bin: ["core", "native", "forecasts", "engines", "nodes", "region", "router", "planner", "sim"],
};

const TIERS = Object.keys(ALLOWED);
const repoRoot = (): string => {
  const here = dirname(fileURLToPath(import.meta.url));
  // test/layers.ts, or dist/test/layers.js
  const up = resolve(here, "..");
  return up.endsWith("/dist") ? resolve(up, "..") : up;
};

const isTest = (path: string): boolean => path.startsWith("test/") || path.endsWith(".test.ts") || path.endsWith(".vmtest.ts");

/**
 * The imports of one file: relative specifiers resolved to repository paths (`.js` read as `.ts`), bare ones as
 * written. Reads `import … from`, `import type … from`, `export … from`, side-effect `import "x"` and `import("x")`.
 */
export function importsOf(path: string, source: string): string[] {
  const out: string[] = [];
  const re = /(?:^|[\s;}])(?:import|export)\s*(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s*)?["']([^"'\n]+)["']|\bimport\s*\(\s*["']([^"'\n]+)["']\s*\)/gm;
  for (const m of source.matchAll(re)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith(".")) {
      out.push(spec);
      continue;
    }
    out.push(normalize(join(dirname(path), spec)).replace(/\.js$/, ".ts"));
  }
  return out;
}

/** The keys a source adds to core's config types: the members of `declare module "…core/config/…" { interface X { … } }`. */
export function configMergesOf(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/declare module\s+["'][^"']*core\/config[^"']*["']\s*\{\s*interface\s+\w+\s*\{([\s\S]*?)\n\s*\}\s*\n\s*\}/g)) {
    const body = m[1]!.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
    for (const k of body.matchAll(/^\s*(\w+)\??\s*:/gm)) out.push(k[1]!);
  }
  return out;
}

/** The keys a source reads off a config object (`config.<key>`, `cfg?.<key>`, `config["<key>"]`). */
export function configReadsOf(source: string): string[] {
  const out = new Set<string>();
  for (const m of source.matchAll(/\b(?:config|cfg)\??\.(\w+)|\b(?:config|cfg)\[["'](\w+)["']\]/g)) out.add(m[1] ?? m[2]!);
  return [...out];
}

/** Every `.ts` file of the repository outside node_modules, dist and native/build, with its imports. */
export function readSourceTree(root = repoRoot()): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name.startsWith(".") || e.name === "node_modules" || e.name === "dist" || e.name === "build") continue;
      const full = join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) {
        const path = relative(root, full);
        const source = readFileSync(full, "utf8");
        files.push({ path, production: !isTest(path), imports: importsOf(path, source), configMerges: configMergesOf(source), configReads: configReadsOf(source) });
      }
    }
  };
  for (const t of TIERS) walk(join(root, t));
  walk(join(root, "test"));
  return files.sort((a, b) => a.path.localeCompare(b.path));
}

/** The rule each production import breaks, in file order. */
export function layerViolations(files: readonly SourceFile[]): Violation[] {
  const out: Violation[] = [];
  for (const f of files) {
    if (!f.production) continue;
    const from = f.path.split("/")[0]!;
    for (const to of f.imports) {
      if (to === "vitest" || to.startsWith("vitest/") || to.startsWith("@vitest/")) {
        out.push({ from: f.path, to, rule: "production code does not import the test runner" });
        continue;
      }
      if (!to.includes("/") || to.startsWith("node:") || to.startsWith("@") || !to.endsWith(".ts")) continue; // a package
      const tier = to.split("/")[0]!;
      if (tier === "test") {
        out.push({ from: f.path, to, rule: "production code does not import test code" });
        continue;
      }
      if (to === "bin/commands/dev.ts" && f.path !== "bin/tidegate.ts" && f.path !== "bin/commands/dev.ts") {
        out.push({ from: f.path, to, rule: "bin's shared helpers live in bin/*.ts, not in the dev command" });
        continue;
      }
      if (tier === from || !TIERS.includes(tier)) continue;
      if (!(ALLOWED[from] ?? []).includes(tier)) {
        const may = ALLOWED[from]!.length === 0 ? "no tier" : ALLOWED[from]!.join(", ");
        out.push({ from: f.path, to, rule: `${from} may import ${may}` });
      }
    }
  }
  return out;
}

/**
 * Production reads of a config key that a tier the reader may not import adds to core's config types by declaration
 * merging: the reader depends on that tier through a type no import shows.
 */
export function hiddenConfigReads(files: readonly SourceFile[]): Violation[] {
  const merged = new Map<string, { tier: string; file: string }>();
  for (const f of files) if (f.production) for (const k of f.configMerges ?? []) merged.set(k, { tier: f.path.split("/")[0]!, file: f.path });
  const out: Violation[] = [];
  for (const f of files) {
    if (!f.production) continue;
    const tier = f.path.split("/")[0]!;
    for (const k of f.configReads ?? []) {
      const m = merged.get(k);
      if (m === undefined || m.tier === tier || (ALLOWED[tier] ?? []).includes(m.tier)) continue;
      out.push({ from: f.path, to: m.file, rule: `reads config.${k}, whose type ${m.tier} adds to core's config by declaration merging, and ${tier} may not import ${m.tier}: declare its type in core` });
    }
  }
  return out;
}

/** The folder (tier/sub) of a file, or the tier itself for a file at its top. */
const folderOf = (path: string): string => {
  const parts = path.split("/");
  return parts.length > 2 ? parts.slice(0, 2).join("/") : parts[0]!;
};

/**
 * Cycles among the folders of each tier (production imports only), each as a path that returns to its start,
 * one per strongly connected component (Tarjan), starting at its alphabetically first folder.
 */
export function folderCycles(files: readonly SourceFile[]): string[][] {
  const edges = new Map<string, Set<string>>();
  for (const f of files) {
    if (!f.production) continue;
    const a = folderOf(f.path);
    for (const to of f.imports) {
      if (!to.endsWith(".ts") || to.split("/")[0] !== f.path.split("/")[0]) continue;
      const b = folderOf(to);
      if (a === b || a.split("/").length < 2 || b.split("/").length < 2) continue;
      if (!edges.has(a)) edges.set(a, new Set());
      edges.get(a)!.add(b);
    }
  }
  const sccs = stronglyConnected(edges);
  // One cycle through each component: a shortest path from its first folder back to it, inside the component.
  return sccs
    .map((c) => {
      const inC = new Set(c);
      const start = c[0]!;
      const prev = new Map<string, string>();
      const queue = [start];
      const seen = new Set<string>();
      while (queue.length > 0) {
        const v = queue.shift()!;
        for (const w of [...(edges.get(v) ?? [])].sort()) {
          if (!inC.has(w)) continue;
          if (w === start) {
            const path = [start];
            for (let x: string | undefined = v; x !== undefined && x !== start; x = prev.get(x)) path.splice(1, 0, x);
            return [...path, start];
          }
          if (seen.has(w)) continue;
          seen.add(w);
          prev.set(w, v);
          queue.push(w);
        }
      }
      return [...c, start];
    })
    .sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Strongly connected components with more than one node (Tarjan), each sorted; nodes visited in sorted order. */
export function stronglyConnected(edges: ReadonlyMap<string, Iterable<string>>): string[][] {
  const nodes = [...new Set([...edges.keys(), ...[...edges.values()].flatMap((s) => [...s])])].sort();
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const sccs: string[][] = [];
  const strong = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of [...(edges.get(v) ?? [])].sort()) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) sccs.push(c.sort());
    }
  };
  for (const v of nodes) if (!idx.has(v)) strong(v);
  return sccs;
}

/** Cycles among modules (type imports included, tests excluded): each strongly connected component of files. */
export function moduleCycles(files: readonly SourceFile[]): string[][] {
  const known = new Set(files.filter((f) => f.production).map((f) => f.path));
  const edges = new Map<string, string[]>();
  for (const f of files) if (f.production) edges.set(f.path, f.imports.filter((t) => known.has(t)));
  return stronglyConnected(edges);
}
