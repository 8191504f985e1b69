/**
 * The full public data folder beside the repository (../shared/data, core/paths.ts sharedDataDir): what tests that
 * read files tidegate does not ship need (Mooncake's traces, ServeGen's per-client CSVs as published, the per-minute
 * derived series). A clone with nothing beside it has none: those tests skip, naming this reason.
 */
import { existsSync } from "node:fs";
import { sharedDataDir } from "../../core/paths.js";

export const SHARED_DATA = sharedDataDir();

/** Why the full data folder's tests cannot run here, or undefined when it is present. */
export const sharedDataMissing: string | undefined = existsSync(SHARED_DATA) ? undefined : `the full public data folder is not at ${SHARED_DATA} (a clone with nothing beside it; core/data ships what the product reads)`;

/** A test's name with the reason it is skipped appended when the full data folder is missing. */
export function needingSharedData(name: string): string {
  return sharedDataMissing === undefined ? name : `${name} (skipped: ${sharedDataMissing})`;
}
