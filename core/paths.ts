/**
 * Where the repository's files are at run time, found one way for every tier: the repository root is the folder
 * above core/ in the sources and above dist/ when compiled (`tidegate` runs from dist/; the image keeps the same
 * layout under /app, with package.json, the native addon and the Lua and proto files beside dist/).
 */
import { readFileSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root: the parent of core/ (this file is core/paths.ts, or dist/core/paths.js). */
export function repoRoot(): string {
  const up = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  return basename(up) === "dist" ? dirname(up) : up;
}

/** The shared data folder (../shared/data/README.txt): `dir` if given, else ../shared/data next to the repository. */
export function defaultDataDir(dir?: string): string {
  return dir ?? resolve(repoRoot(), "../shared/data");
}

/** The package version from the root package.json, e.g. "0.1.0" (`tidegate --version`, the Lua scripts' names). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(resolve(repoRoot(), "package.json"), "utf8")) as { version: string }).version;
}
