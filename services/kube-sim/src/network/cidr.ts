// IPv4 ranges as numbers: what the ClusterIP allocator and the proxy rules need of a CIDR.

export interface Cidr {
  /** `10.96.3.0/24` */
  text: string;
  /** The network address as an unsigned 32-bit number. */
  base: number;
  prefix: number;
  size: number;
}

export function ipToNumber(ip: string): number | undefined {
  const parts = ip.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

export const numberToIp = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".");

export function parseCidr(text: string): Cidr {
  const [ip = "", bits = ""] = text.split("/");
  const address = ipToNumber(ip);
  const prefix = Number(bits);
  if (address === undefined || !/^\d+$/.test(bits) || prefix < 8 || prefix > 30) throw new Error(`"${text}" is not an IPv4 CIDR with a prefix from /8 to /30`);
  const size = 2 ** (32 - prefix);
  const base = address - (address % size);
  return { text: `${numberToIp(base)}/${prefix}`, base, prefix, size };
}

export const contains = (cidr: Cidr, ip: number) => ip >= cidr.base && ip < cidr.base + cidr.size;
