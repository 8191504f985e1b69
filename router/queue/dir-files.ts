/**
 * Embedded FileStore: files in `<dataDir>/files/<id>` with metadata in `<id>.json`, written data-first and renamed
 * into place, so a crash never leaves metadata pointing at a partial file. `dataDir` null keeps files in memory.
 */
import { mkdir, readFile, readdir, rename, unlink, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { QueueCode, ownerOf, type FileMeta, type FileStore } from "./types.js";

export class DirFileStore implements FileStore {
  private readonly dir: string | null;
  private readonly mem = new Map<string, { meta: FileMeta; content: Buffer }>();

  constructor(dataDir: string | null) {
    this.dir = dataDir === null ? null : join(dataDir, "files");
  }

  private checkId(id: string): boolean {
    return /^[A-Za-z0-9_-]{1,128}$/.test(id);
  }

  async put(meta: FileMeta, content: Buffer): Promise<QueueCode> {
    if (!this.checkId(meta.id)) throw new RangeError(`bad file id ${JSON.stringify(meta.id)}`);
    if (this.dir === null) {
      if (this.mem.has(meta.id)) return QueueCode.Exists;
      this.mem.set(meta.id, { meta: { ...meta, owner: ownerOf(meta) }, content });
      return QueueCode.Ok;
    }
    await mkdir(this.dir, { recursive: true });
    const base = join(this.dir, meta.id);
    if (existsSync(base + ".json")) return QueueCode.Exists;
    await writeFile(base + ".tmp", content);
    await rename(base + ".tmp", base);
    await writeFile(base + ".json.tmp", JSON.stringify({ ...meta, owner: ownerOf(meta) }));
    await rename(base + ".json.tmp", base + ".json");
    return QueueCode.Ok;
  }

  async get(id: string): Promise<FileMeta | undefined> {
    if (!this.checkId(id)) return undefined;
    if (this.dir === null) {
      const f = this.mem.get(id);
      return f === undefined ? undefined : { ...f.meta };
    }
    try {
      return JSON.parse(await readFile(join(this.dir, id + ".json"), "utf8")) as FileMeta;
    } catch (err) {
      if (err instanceof Error && "code" in err && err.code === "ENOENT") return undefined;
      throw err;
    }
  }

  async content(id: string): Promise<Buffer | undefined> {
    if ((await this.get(id)) === undefined) return undefined;
    if (this.dir === null) return this.mem.get(id)?.content;
    return readFile(join(this.dir, id));
  }

  async delete(id: string): Promise<boolean> {
    if (!this.checkId(id)) return false;
    if (this.dir === null) return this.mem.delete(id);
    const base = join(this.dir, id);
    if (!existsSync(base + ".json")) return false;
    await unlink(base + ".json");
    await unlink(base).catch((err: unknown) => {
      if (!(err instanceof Error && "code" in err && err.code === "ENOENT")) throw err;
    });
    return true;
  }

  async list(): Promise<FileMeta[]> {
    let metas: FileMeta[];
    if (this.dir === null) metas = [...this.mem.values()].map((f) => ({ ...f.meta }));
    else {
      const names = existsSync(this.dir) ? (await readdir(this.dir)).filter((n) => n.endsWith(".json")) : [];
      metas = await Promise.all(names.map(async (n) => JSON.parse(await readFile(join(this.dir!, n), "utf8")) as FileMeta));
    }
    return metas.sort((a, b) => b.createdAtMs - a.createdAtMs || (a.id < b.id ? 1 : -1));
  }

  async close(): Promise<void> {}
}
