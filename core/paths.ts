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

/**
 * The data tidegate ships (core/data/README.txt): ServeGen's aggregate series (`tidegate dev`'s planner seed) and the
 * Azure LLM 2023 traces (`tidegate replay --trace azure-conv|azure-code`), laid out as the full public data folder.
 */
export function shippedDataDir(): string {
  return resolve(repoRoot(), "core", "data");
}

/** The data folder a command reads: `dir` when given (`--data-dir`, e.g. the full public data folder), else `shippedDataDir()`. */
export function defaultDataDir(dir?: string): string {
  return dir ?? shippedDataDir();
}

/**
 * ../shared/data next to the repository: the full public data folder (../shared/data/README.txt) that tests and
 * benchmarks needing files tidegate does not ship read (ServeGen's per-client series, Mooncake). No command reads it
 * unless told to with `--data-dir`.
 */
export function sharedDataDir(): string {
  return resolve(repoRoot(), "../shared/data");
}

/** The package version from the root package.json, e.g. "0.1.0" (`tidegate --version`, the Lua scripts' names). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(resolve(repoRoot(), "package.json"), "utf8")) as { version: string }).version;
}
