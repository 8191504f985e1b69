// Region's config sections reach every config parse: each entry point that calls parseConfig, validateConfig or
// loadConfig loads region/config-sections.ts (directly or through what it imports), and the sections it registers
// read the file's `keystage` and `loading` keys at their paths.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON, mergeOverDefault, parseConfig } from "../core/config.js";
import { registeredRegionSettings } from "../core/config/region-settings.js";
import { registeredSections } from "../core/config/sections.js";
import { readSourceTree } from "../test/layers.js";
import "./config-sections.js";

const SECTIONS = "region/config-sections.ts";
const PARSES = /\b(?:parseConfig|validateConfig|loadConfig)\(/;

describe("region's config sections", () => {
  it("are registered by importing region/config-sections.ts", () => {
    expect(registeredSections()).toEqual(["keystage", "routing"]);
    expect(registeredRegionSettings()).toEqual(["loading"]);
  });

  it("are read where they sit: keystage at the top, loading in controller and each region", () => {
    const bloom = { model: "bloom-176b", gpu: "h100-80gb", layersPerStage: [9, 9, 9, 9, 9, 9, 8, 8], profileTp: 8 };
    const c = parseConfig(mergeOverDefault({ keystage: { pipelines: [bloom] }, controller: { loading: { source: "network" } } }));
    expect(c.keystage?.pipelines[0]?.model).toBe("bloom-176b");
    expect(c.controller.loading?.source).toBe("network");
    const regions = structuredClone((DEFAULT_CONFIG_JSON as { regions: Record<string, unknown>[] }).regions);
    regions[1]!.loading = { source: "ssd" };
    expect(parseConfig(mergeOverDefault({ regions })).regions.map((r) => r.loading?.source)).toEqual([undefined, "ssd", undefined]);
    expect(() => parseConfig(mergeOverDefault({ regions: [{ ...regions[0]!, loading: { source: "disk" } }] }))).toThrow("regions[0].loading.source: must be one of");
    expect(() => parseConfig(mergeOverDefault({ keystag: {} }))).toThrow('keystag: is not a known field; did you mean "keystage"?');
  });

  it("are loaded by every file that parses a config (except tests, which import what they need)", () => {
    const files = readSourceTree();
    const importsOf = new Map(files.map((f) => [f.path, f.imports]));
    const reaches = (from: string): boolean => {
      const seen = new Set<string>([from]);
      const todo = [from];
      while (todo.length > 0) {
        const f = todo.pop()!;
        if (f === SECTIONS) return true;
        for (const to of importsOf.get(f) ?? []) if (!seen.has(to)) (seen.add(to), todo.push(to));
      }
      return false;
    };
    const parsers = files.filter((f) => !f.path.endsWith(".test.ts") && !f.path.startsWith("core/") && PARSES.test(readFileSync(f.path, "utf8")));
    expect(parsers.length).toBeGreaterThan(5);
    expect(parsers.map((f) => f.path).filter((p) => !reaches(p))).toEqual([]);
  });
});
