import { describe, expect, it } from "vitest";
import { newId } from "./ids.js";

describe("newId", () => {
  it("gives the prefix and 24 base62 characters, distinct across pool refills", () => {
    const ids = Array.from({ length: 10_000 }, () => newId("cmpl-")); // ~59 refills of the 4 KiB pool
    for (const id of ids) expect(id).toMatch(/^cmpl-[0-9a-zA-Z]{24}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
