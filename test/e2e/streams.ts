// A burst of streaming chat completions from the official OpenAI client, shared by the e2e tests that load a dev region.
import type OpenAI from "openai";

/**
 * `streams` concurrent streams, each sending `each` requests one after another (so the load stays at `streams` in
 * flight); resolves with every response's text, in completion order.
 */
export async function streamBurst(client: OpenAI, model: string, prompt: string, streams: number, each: number, maxTokens: number): Promise<string[]> {
  const texts: string[] = [];
  await Promise.all(
    Array.from({ length: streams }, async () => {
      for (let k = 0; k < each; k++) {
        const s = await client.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], stream: true, max_tokens: maxTokens });
        let text = "";
        for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
        texts.push(text);
      }
    }),
  );
  return texts;
}
