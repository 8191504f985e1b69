/**
 * No module imports itself back through others (type imports included): a cycle makes load order matter and hides
 * which module owns a type. The graph is read from the sources' relative imports.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const SKIP = new Set(["node_modules", "dist", ".git", "build", "out"]);

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name) || e.name.startsWith(".")) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) sources(p, out);
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** Strongly connected components with more than one module (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const comp: string[] = [];
      for (;;) {
        const w = stack.pop()!;
        on.delete(w);
        comp.push(w);
        if (w === v) break;
      }
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

describe("the module graph", () => {
  it("has no import cycles", () => {
    const files = sources(root);
    const known = new Set(files);
    const graph = new Map<string, string[]>();
    for (const f of files) {
      const text = readFileSync(f, "utf8");
      const deps: string[] = [];
      for (const m of text.matchAll(/(?:import|export)[^;]*?from\s+"(\.[^"]+)"|import\("(\.[^"]+)"\)/gs)) {
        const target = normalize(join(dirname(f), (m[1] ?? m[2])!.replace(/\.js$/, ".ts")));
        if (known.has(target)) deps.push(target);
      }
      graph.set(f, deps);
    }
    expect(files.length).toBeGreaterThan(100);
    expect(cycles(graph).map((c) => c.map((f) => relative(root, f)))).toEqual([]);
  });
});
