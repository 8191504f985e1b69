/**
 * deploy/Dockerfile and .dockerignore, read as `docker build` would (no Docker engine on the development machines):
 * a multi-stage build whose toolchain stays in the build stage, the native addon built inside, a non-root runtime
 * user, build outputs and test code kept out of the context and the image, and every non-TypeScript file the runtime
 * reads (.proto, .lua, package.json, the addon, the shipped data in core/data) copied into the runtime tree.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../e2e/procs.js";

const dockerfile = readFileSync(join(REPO_ROOT, "deploy/Dockerfile"), "utf8");
const stages = dockerfile.split(/^FROM /m).slice(1).map((s) => "FROM " + s);
const ignore = readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));

describe("deploy/Dockerfile", () => {
  it("builds in one stage (toolchain, npm ci, native addon, TypeScript) and runs from a slim one", () => {
    expect(stages).toHaveLength(2);
    const [build, runtime] = stages as [string, string];
    expect(build).toMatch(/^FROM node:\$\{NODE_VERSION\}-bookworm AS build/);
    for (const tool of ["g++", "make", "python3"]) expect(build).toContain(tool);
    expect(build).toMatch(/npm ci /);
    expect(build).toMatch(/npm run build:native/);
    expect(build).toMatch(/npm run build:ts/);
    expect(build).toMatch(/npm prune --omit=dev/);
    expect(runtime).toMatch(/^FROM node:\$\{NODE_VERSION\}-bookworm-slim/);
    for (const tool of ["g++", " make", "python3", "npm ci"]) expect(runtime).not.toContain(tool);
    expect(runtime).toMatch(/COPY --from=build \/out \/app/);
  });

  it("runs as a non-root numeric user and starts the CLI", () => {
    const runtime = stages[1]!;
    expect(runtime).toMatch(/^USER 1000:1000$/m);
    expect(runtime).toMatch(/ENTRYPOINT \["node", "\/app\/dist\/bin\/tidegate.js"\]/);
  });

  it("copies what the runtime reads besides JavaScript: .proto and .lua files, package.json, the addon and core/data", () => {
    const build = stages[0]!;
    expect(build).toMatch(/-name '\*\.lua' -o -name '\*\.proto'/);
    expect(build).toContain("native/build/Release/tidegate_dataplane.node");
    // The data tidegate ships (core/data/README.txt: the planner seed's ServeGen aggregates, the week's packed per-client series, the Azure traces).
    expect(build).toMatch(/cp -r --parents core\/data \/out\//);
    // core/paths.ts reads the version from package.json at the root, beside dist/ (the addon needs no marker file).
    expect(build).toMatch(/cp -r package\.json node_modules dist \/out\//);
    // Every source folder holding such files is copied into the build stage.
    for (const dir of ["core", "router", "planner", "forecasts", "engines", "nodes", "region", "sim", "bin", "native"]) expect(build).toMatch(new RegExp(`^COPY ${dir} \\./${dir}$`, "m"));
  });

  it("keeps build outputs and local state out of the context (.dockerignore)", () => {
    for (const p of ["node_modules/", "dist/", "native/build/", ".data/", ".git/"]) expect(ignore).toContain(p);
  });

  it("ships no test code: tests and test/ stay out of the context, test sources are deleted before the build", () => {
    for (const p of ["test/", "**/*.test.ts", "**/*.vmtest.ts"]) expect(ignore).toContain(p);
    const build = stages[0]!;
    expect(build).not.toMatch(/^COPY test /m);
    const del = build.indexOf("-name '*.test.ts' -o -name '*.vmtest.ts' \\) -delete");
    expect(del).toBeGreaterThan(build.lastIndexOf("COPY bin ./bin"));
    expect(del).toBeLessThan(build.indexOf("npm run build:ts"));
    // Every folder compiled is swept.
    expect(build).toContain("find core router planner forecasts engines nodes region sim bin native \\(");
    expect(build).toContain("rm -rf /out/dist/test ");
  });
});
