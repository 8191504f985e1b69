/**
 * Engine command templates, e.g. `vllm serve {model} --port {port} --tensor-parallel-size {tp}`: split into argv
 * without a shell, then placeholders filled per engine. Pure functions.
 */
import { TidegateError } from "../../core/errors.js";

/** The placeholders a template may use. */
export const PLACEHOLDERS = ["model", "port", "host", "gpu", "tp", "instance"] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

const PLACEHOLDER_RE = /\{([A-Za-z_][A-Za-z0-9_-]*)\}/g;

/**
 * Splits `template` into argv: whitespace separates words; '...' quotes literally; "..." quotes with \" and \\
 * escapes; a backslash outside quotes escapes the next character. Nothing else is special (no $, globs, pipes).
 * Throws invalid_request (param command_template) for an empty template, an unterminated quote or an unknown
 * `{name}` placeholder. Braces that are not `{identifier}` (JSON, say) pass through unchanged.
 */
export function parseCommandTemplate(template: string): string[] {
  const bad = (why: string) => new TidegateError("invalid_request", `command_template ${JSON.stringify(template)}: ${why}`, { param: "command_template" });
  const argv: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < template.length; i++) {
    const ch = template[i]!;
    if (ch === "'") {
      const end = template.indexOf("'", i + 1);
      if (end === -1) throw bad(`unterminated ' quote at offset ${i}`);
      word += template.slice(i + 1, end);
      inWord = true;
      i = end;
    } else if (ch === '"') {
      let j = i + 1;
      for (; j < template.length && template[j] !== '"'; j++) {
        if (template[j] === "\\" && (template[j + 1] === '"' || template[j + 1] === "\\")) j++;
        word += template[j];
      }
      if (j >= template.length) throw bad(`unterminated " quote at offset ${i}`);
      inWord = true;
      i = j;
    } else if (ch === "\\") {
      if (i + 1 >= template.length) throw bad("trailing backslash");
      word += template[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) argv.push(word);
      word = "";
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) argv.push(word);
  if (argv.length === 0) throw bad("no command");
  for (const arg of argv)
    for (const m of arg.matchAll(PLACEHOLDER_RE))
      if (!(PLACEHOLDERS as readonly string[]).includes(m[1]!)) throw bad(`unknown placeholder {${m[1]}} (known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(" ")})`);
  return argv;
}

/** Fills the placeholders of argv from parseCommandTemplate; each value stays inside its own argument. */
export function renderCommand(argv: readonly string[], values: Record<Placeholder, string>): string[] {
  return argv.map((a) => a.replace(PLACEHOLDER_RE, (whole, name: string) => ((PLACEHOLDERS as readonly string[]).includes(name) ? values[name as Placeholder] : whole)));
}
