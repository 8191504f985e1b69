/**
 * A per-model FIFO for the in-memory queue state, ordered like a Redis sorted set: by score, then by member bytes.
 */

/** Per-model FIFO ordered by (score, member) like a Redis sorted set; removal is lazy (present map). */
export class ReadyQueue {
  private items: { score: number; member: string }[] = [];
  private head = 0;
  readonly present = new Map<string, number>();

  add(score: number, member: string): void {
    if (this.present.has(member)) return;
    this.present.set(member, score);
    const last = this.items[this.items.length - 1];
    if (last === undefined || this.items.length === this.head || last.score < score || (last.score === score && last.member < member)) {
      this.items.push({ score, member });
      return;
    }
    let lo = this.head;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const it = this.items[mid]!;
      if (it.score < score || (it.score === score && it.member < member)) lo = mid + 1;
      else hi = mid;
    }
    this.items.splice(lo, 0, { score, member });
  }

  remove(member: string): boolean {
    return this.present.delete(member);
  }

  /** Removes and returns up to `max` entries in order. */
  pop(max: number): { score: number; member: string }[] {
    const out: { score: number; member: string }[] = [];
    while (out.length < max && this.head < this.items.length) {
      const it = this.items[this.head++]!;
      if (this.present.get(it.member) === it.score) {
        this.present.delete(it.member);
        out.push(it);
      }
    }
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return out;
  }
}

/** Compares members the way Redis orders equal scores (byte-wise). */
export function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

