/**
 * The layers hold (issue 30): every import of every production file, read from the source, against the rules in
 * test/layers.ts. A violation fails with the importing file, the imported file and the rule it breaks.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { configMergesOf, configReadsOf, folderCycles, hiddenConfigReads, importsOf, layerViolations, moduleCycles, readSourceTree, type SourceFile } from "./layers.js";

const tree = readSourceTree();

describe("layers", () => {
  it("reads the whole tree (every tier has production files)", () => {
    const tiers = new Set(tree.filter((f) => f.production).map((f) => f.path.split("/")[0]));
    for (const t of ["core", "forecasts", "planner", "engines", "nodes", "region", "router", "sim", "bin", "native"]) expect(tiers, t).toContain(t);
    expect(tree.filter((f) => f.production).length).toBeGreaterThan(200);
  });

  it("no production file imports across a layer it may not cross", () => {
    expect(layerViolations(tree).map((v) => `${v.from} imports ${v.to}: ${v.rule}`)).toEqual([]);
  });

  it("no module imports itself back through others (type imports included)", () => {
    // A cycle makes load order matter and hides which module owns a type.
    expect(moduleCycles(tree)).toEqual([]);
  });

  it("no tier reads a config key whose type a tier it may not import adds to core's config (declaration merging)", () => {
    expect(hiddenConfigReads(tree).map((v) => `${v.from}: ${v.rule}`)).toEqual([]);
    // The merges are read: region adds keystage and loading; routing's type is core's.
    const merged = tree.filter((f) => f.production).flatMap((f) => f.configMerges ?? []);
    expect(merged).toEqual(expect.arrayContaining(["keystage", "loading"]));
    expect(merged).not.toContain("routing");
  });

  it("the README's picture of the tiers holds: each imports exactly the tiers it lists, none holds over a third of the lines", () => {
    const readme = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "README.md"), "utf8");
    const rows = [...readme.matchAll(/^\| `(\w+)` \| (\d+)% \| ([^|]*) \|$/gm)].map((m) => ({ tier: m[1]!, imports: m[3]!.trim() === "–" ? [] : m[3]!.trim().split(" ") }));
    const production = tree.filter((f) => f.production);
    const tiers = [...new Set(production.map((f) => f.path.split("/")[0]!))].filter((t) => t !== "test");
    expect(rows.map((r) => r.tier).sort()).toEqual(tiers.sort());
    for (const r of rows) {
      const actual = new Set(production.filter((f) => f.path.startsWith(`${r.tier}/`)).flatMap((f) => f.imports.filter((i) => i.endsWith(".ts")).map((i) => i.split("/")[0]!)).filter((t) => t !== r.tier && tiers.includes(t)));
      expect([r.tier, [...actual].sort()]).toEqual([r.tier, [...r.imports].sort()]);
    }
    const lines = new Map<string, number>();
    for (const f of production) lines.set(f.path.split("/")[0]!, (lines.get(f.path.split("/")[0]!) ?? 0) + readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", f.path), "utf8").split("\n").length);
    const total = [...lines.values()].reduce((a, b) => a + b, 0);
    for (const [t, n] of lines) expect([t, n / total <= 1 / 3]).toEqual([t, true]);
  });

  it("no folder knot: the folders of each tier import each other without a cycle", () => {
    expect(folderCycles(tree).map((c) => c.join(" → "))).toEqual([]);
  });

  describe("the rules themselves, on planted trees", () => {
    const file = (path: string, imports: string[]): SourceFile => ({ path, production: !path.startsWith("test/") && !path.endsWith(".test.ts"), imports });

    it("finds core importing a tier, region importing planner, sim importing bin, and test code in production", () => {
      const planted = [
        file("core/config.ts", ["region/keystage/keystage-config.ts"]),
        file("nodes/agent/x.ts", ["planner/loop.ts", "core/clock.ts"]),
        file("sim/week/cli.ts", ["bin/args.ts"]),
        file("router/queue/conformance.ts", ["vitest"]),
        file("router/app.ts", ["test/helpers/fake-link.ts"]),
        file("bin/commands/region.ts", ["bin/commands/dev.ts"]),
        file("region/keystage/x.ts", ["sim/replay/traces.ts"]),
        file("planner/fleet.ts", ["core/perf/model.ts"]),
        file("router/pace.test.ts", ["engines/sim/core.ts", "vitest"]),
      ];
      const v = layerViolations(planted).map((x) => `${x.from} → ${x.to}`);
      expect(v).toEqual([
        "core/config.ts → region/keystage/keystage-config.ts",
        "nodes/agent/x.ts → planner/loop.ts",
        "sim/week/cli.ts → bin/args.ts",
        "router/queue/conformance.ts → vitest",
        "router/app.ts → test/helpers/fake-link.ts",
        "bin/commands/region.ts → bin/commands/dev.ts",
        "region/keystage/x.ts → sim/replay/traces.ts",
      ]);
    });

    it("finds an engine importing the controller, a node importing the gateway, and a type-only import of a region type in router/", () => {
      const planted = [
        file("engines/sim/core.ts", ["region/controller/controller.ts"]),
        file("nodes/agent/node.ts", ["region/gateway/gateway.ts"]),
        file("router/router-core.ts", importsOf("router/router-core.ts", 'import type { RoutingConfig } from "../region/gateway/scoring/routing-config.js";')),
        file("region/actuator/agents.ts", ["nodes/agent/client.ts", "engines/sim/sim-engine.ts"]),
        file("nodes/agent/in-process.ts", ["engines/sim/sim-engine.ts"]),
      ];
      expect(layerViolations(planted).map((x) => `${x.from} → ${x.to}: ${x.rule}`)).toEqual([
        "engines/sim/core.ts → region/controller/controller.ts: engines may import core, native",
        "nodes/agent/node.ts → region/gateway/gateway.ts: nodes may import core, native, engines",
        "router/router-core.ts → region/gateway/scoring/routing-config.ts: router may import core, forecasts",
      ]);
    });

    it("finds a folder cycle of any length, and none in a chain", () => {
      const cyc = [file("region/a/x.ts", ["region/b/y.ts"]), file("region/b/y.ts", ["region/c/z.ts"]), file("region/c/z.ts", ["region/a/w.ts"]), file("region/a/w.ts", [])];
      expect(folderCycles(cyc)).toEqual([["region/a", "region/b", "region/c", "region/a"]]);
      expect(folderCycles(cyc.slice(0, 2).concat([file("region/c/z.ts", [])]))).toEqual([]);
    });

    it("finds a config key read by a tier below the one that merges its type into core's config", () => {
      const merging = ['declare module "../../core/config/sections.js" {', "  interface ConfigSections {", "    /** doc */", "    keystage?: KeystageConfig | undefined;", "  }", "}"].join("\n");
      expect(configMergesOf(merging)).toEqual(["keystage"]);
      expect(configReadsOf("const a = config.keystage?.pipelines; if (cfg?.routing) x(config['slo']);")).toEqual(["keystage", "routing", "slo"]);
      const planted: SourceFile[] = [
        { path: "region/keystage/keystage-config.ts", production: true, imports: [], configMerges: ["keystage"], configReads: [] },
        { path: "router/router-core.ts", production: true, imports: [], configReads: ["keystage", "router"] },
        { path: "sim/week/fleet.ts", production: true, imports: [], configReads: ["keystage"] },
        { path: "router/x.test.ts", production: false, imports: [], configReads: ["keystage"] },
      ];
      expect(hiddenConfigReads(planted).map((v) => `${v.from} → ${v.to}`)).toEqual(["router/router-core.ts → region/keystage/keystage-config.ts"]);
    });

    it("finds a module cycle", () => {
      const cyc = [file("core/a.ts", ["core/b.ts"]), file("core/b.ts", ["core/a.ts", "core/c.ts"]), file("core/c.ts", [])];
      expect(moduleCycles(cyc)).toEqual([["core/a.ts", "core/b.ts"]]);
    });

    it("reads static, type-only, re-export and dynamic imports", () => {
      const src = [
        'import { a } from "../core/clock.js";',
        'import type { B } from "./b.js";',
        'export { c } from "../../region/x.js";',
        "const m = await import(\"./commands/dev.js\");",
        'import "vitest";',
        'import { describe } from "vitest";',
        'const s = "from \\"./not-an-import.js\\"";',
      ].join("\n");
      expect(importsOf("bin/sub/f.ts", src)).toEqual(["bin/core/clock.ts", "bin/sub/b.ts", "region/x.ts", "bin/sub/commands/dev.ts", "vitest", "vitest"]);
    });
  });
});
