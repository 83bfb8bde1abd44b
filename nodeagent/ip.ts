/** Unique loopback Pod IPs (127.x.y.z, never 127.0.0.x): every Pod can bind its own address. */
export class LoopbackIPAM {
  private readonly byUid = new Map<string, string>();
  private readonly used = new Set<string>();

  allocate(uid: string): string {
    const known = this.byUid.get(uid);
    if (known) return known;
    let h = 2166136261;
    for (const ch of uid) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
    for (let i = 0; ; i++) {
      const n = ((h + i) % (0xffffff - 0x10000)) + 0x10000;
      const ip = `127.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
      if (!this.used.has(ip) && (n & 255) !== 0 && (n & 255) !== 255) {
        this.used.add(ip);
        this.byUid.set(uid, ip);
        return ip;
      }
    }
  }

  release(uid: string): void {
    const ip = this.byUid.get(uid);
    if (ip) {
      this.used.delete(ip);
      this.byUid.delete(uid);
    }
  }
}
