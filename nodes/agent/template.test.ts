import { describe, expect, it } from "vitest";
import { isTidegateError } from "../../core/errors.js";
import { parseCommandTemplate, renderCommand } from "./template.js";

const values = { model: "llama 3", port: "8001", host: "10.0.0.7", gpu: "h100-80gb", tp: "2", instance: "i-1" };

describe("engine command templates", () => {
  it("splits on whitespace and fills placeholders, each value inside its own argument (no shell)", () => {
    const argv = parseCommandTemplate("  vllm serve {model}   --port {port} --host={host} --tensor-parallel-size {tp} ");
    expect(argv).toEqual(["vllm", "serve", "{model}", "--port", "{port}", "--host={host}", "--tensor-parallel-size", "{tp}"]);
    expect(renderCommand(argv, values)).toEqual(["vllm", "serve", "llama 3", "--port", "8001", "--host=10.0.0.7", "--tensor-parallel-size", "2"]);
  });

  it("quotes: '...' literal, \"...\" with \\\" escapes, backslash outside quotes; shell syntax stays literal", () => {
    expect(parseCommandTemplate(`sh -c 'echo $HOME; exit 3' "a \\"b\\" c" x\\ y ''`)).toEqual(["sh", "-c", "echo $HOME; exit 3", 'a "b" c', "x y", ""]);
    expect(parseCommandTemplate("a | b > c")).toEqual(["a", "|", "b", ">", "c"]);
  });

  it("braces that are not {identifier} pass through (JSON arguments)", () => {
    const argv = parseCommandTemplate(`vllm serve {model} --override '{"max": 1}'`);
    expect(renderCommand(argv, values)).toEqual(["vllm", "serve", "llama 3", "--override", '{"max": 1}']);
  });

  for (const [template, message] of [
    ["vllm serve {model} --port {prot}", /unknown placeholder \{prot\} \(known: \{model\} \{port\} \{host\} \{gpu\} \{tp\} \{instance\}\)/],
    ["sh -c 'echo", /unterminated ' quote at offset 6/],
    ['sh -c "echo', /unterminated " quote at offset 6/],
    ["   ", /no command/],
    ["a \\", /trailing backslash/],
  ] as const)
    it(`rejects ${JSON.stringify(template)}`, () => {
      let err: unknown;
      try {
        parseCommandTemplate(template);
      } catch (e) {
        err = e;
      }
      expect(isTidegateError(err, "invalid_request"), String(err)).toBe(true);
      expect((err as Error).message).toMatch(message);
    });
});
