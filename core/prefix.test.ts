import { describe, expect, it } from "vitest";
import { blockHashesOfBody, blockHashesOfText, blockHashesOfTrace, longestPrefix, mixHash, PrefixSet, templatedPrompt } from "./prefix.js";

describe("prefix identity", () => {
  it("hashes only full blocks, chained: equal prefixes give equal leading hashes", () => {
    const a = "x".repeat(64) + "y".repeat(64) + "z".repeat(10);
    const b = "x".repeat(64) + "q".repeat(64);
    const ha = blockHashesOfText(a, 16);
    const hb = blockHashesOfText(b, 16);
    expect(ha).toHaveLength(2); // 138 chars = 34.5 tokens = 2 full 16-token blocks
    expect(hb).toHaveLength(2);
    expect(ha[0]).toBe(hb[0]);
    expect(ha[1]).not.toBe(hb[1]);
    // Chained: the same second block after a different first block hashes differently.
    const c = "w".repeat(64) + "y".repeat(64);
    expect(blockHashesOfText(c, 16)[1]).not.toBe(ha[1]);
    for (const h of ha) expect(Number.isSafeInteger(h)).toBe(true);
  });

  it("applies the chat template, so a conversation's next turn extends the previous prompt's blocks", () => {
    const turn1 = { messages: [{ role: "system", content: "s".repeat(300) }, { role: "user", content: "u".repeat(300) }] };
    const turn2 = { messages: [...turn1.messages, { role: "assistant", content: "a".repeat(200) }, { role: "user", content: "v".repeat(200) }] };
    expect(templatedPrompt("chat", { messages: [{ role: "user", content: "hi" }] })).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    const h1 = blockHashesOfBody("chat", turn1, 16);
    const h2 = blockHashesOfBody("chat", turn2, 16);
    expect(h2.length).toBeGreaterThan(h1.length);
    // Every full block of turn 1 that lies before its generation prompt is shared by turn 2.
    const shared = longestPrefix(h2, (h) => h1.includes(h));
    expect(shared).toBe(Math.floor((templatedPrompt("chat", turn1).length - "<|im_start|>assistant\n".length) / 64));
    expect(blockHashesOfBody("completion", { prompt: "p".repeat(128) }, 16)).toEqual(blockHashesOfText("p".repeat(128), 16));
  });

  it("expands a trace's 512-token block ids into engine blocks of the prompt's full blocks", () => {
    const h = blockHashesOfTrace([7, 9], 600, 512, 16);
    expect(h).toHaveLength(37); // 32 for id 7, then 600 − 512 = 88 tokens: 5 full blocks of id 9
    const g = blockHashesOfTrace([7, 11], 1024, 512, 16);
    expect(g.slice(0, 32)).toEqual(h.slice(0, 32));
    expect(g[32]).not.toBe(h[32]);
    expect(new Set(g).size).toBe(g.length);
    expect(() => blockHashesOfTrace([1], 100, 500, 16)).toThrow(RangeError);
    expect(mixHash(1, 2)).not.toBe(mixHash(2, 1));
  });

  it("PrefixSet drops the least recently touched beyond its cap, and with no cap only adds", () => {
    const s = new PrefixSet(3);
    s.touch([1, 2, 3]);
    s.touch([1]); // order: 2, 3, 1
    s.touch([4]); // 4 > cap 3: 2 dropped
    expect([2, 3, 1, 4].map((h) => s.has(h))).toEqual([false, true, true, true]);
    s.remove([3]);
    expect(s.size).toBe(2);
    const u = new PrefixSet(Number.POSITIVE_INFINITY);
    for (let i = 0; i < 100; i++) u.touch([i, i + 1]);
    expect(u.size).toBe(101);
    expect(u.has(0) && u.has(100)).toBe(true);
  });
});

describe("recent prompts' hashes", () => {
  it("equal text gives the first hashing's frozen list, per block size; after 64 other texts it is hashed again, equal", () => {
    const text = "x".repeat(640);
    const first = blockHashesOfText(text, 16);
    expect(first).toHaveLength(10);
    expect(Object.isFrozen(first)).toBe(true);
    expect(blockHashesOfText("x".repeat(640), 16)).toBe(first);
    const wider = blockHashesOfText(text, 32);
    expect(wider).toHaveLength(5);
    expect(wider).not.toBe(first);
    for (let i = 0; i < 64; i++) blockHashesOfText(`${i}`.padEnd(64, "y"), 16);
    const again = blockHashesOfText(text, 16);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
    expect(blockHashesOfText("short", 16)).toEqual([]);
    // A text over 256 Ki characters is hashed each time (equal lists, not the same one): the memo stays bounded.
    const long = "z".repeat(262_208);
    expect(blockHashesOfText(long, 16)).not.toBe(blockHashesOfText(long, 16));
    expect(blockHashesOfText(long, 16)).toEqual(blockHashesOfText(long, 16));
  });

  it("a text that extends or begins a recent one gets the same hashes as hashed alone", () => {
    const forget = () => {
      for (let i = 0; i < 72; i++) blockHashesOfText(`${i}:`.padEnd(200, "q"), 16);
    };
    const turn1 = "<|im_start|>user\n" + "hello ".repeat(40);
    const turn2 = turn1 + "<|im_end|>\n<|im_start|>assistant\n" + "fine ".repeat(50);
    forget();
    const cold = [blockHashesOfText(turn1, 16), blockHashesOfText("w".repeat(1000), 16)];
    forget();
    const cold2 = blockHashesOfText(turn2, 16);
    forget();
    // A next turn goes on from the last one's chain; a shorter text is cut from a longer one's.
    blockHashesOfText(turn1, 16);
    expect(blockHashesOfText(turn2, 16)).toEqual(cold2);
    blockHashesOfText("w".repeat(3000), 16);
    expect(blockHashesOfText("w".repeat(1000), 16)).toEqual(cold[1]!);
    expect(blockHashesOfText("w".repeat(1000), 16)).toHaveLength(15);
    // A text that only shares some characters with a recent one (not a whole block's worth more) is its own.
    blockHashesOfText("w".repeat(999) + "v", 16);
    forget();
    expect(blockHashesOfText("w".repeat(999) + "v", 16)).toEqual(cold[1]!.slice(0, 15));
    expect(blockHashesOfText("w".repeat(70) + "v".repeat(200), 16)[0]).toBe(cold[1]![0]);
    expect(blockHashesOfText("w".repeat(70) + "v".repeat(200), 16)[1]).not.toBe(cold[1]![1]);
  });
});
