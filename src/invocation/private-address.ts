import { isIP } from 'node:net';

/**
 * The `block_private_ips` decision (iii's rules, engine/src/invocation/url_validator.rs), made on a
 * normalised address: every spelling of an IPv4 address (decimal, octal, hex, short forms such as
 * `127.1` or `2130706433`) and every IPv6 form that carries one (IPv4-mapped `::ffff:…`,
 * IPv4-compatible `::…`, SIIT `::ffff:0:…`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo) is judged
 * as the IPv4 address it reaches; zone ids (`%eth0`) and brackets are dropped first. Until 2026-11-26
 * `[::ffff:7f00:1]` passed (test/security/ssrf.test.ts).
 */
export function isPrivateAddress(address: string): boolean {
  const text = address.trim().replace(/^\[|\]$/g, '').replace(/%.*$/, '').toLowerCase();
  if (text.includes(':')) {
    const groups = parseIPv6(text);
    // Not an address at all: nothing to connect to, so nothing private either (the URL check refuses it).
    return groups === undefined ? false : isPrivateV6(groups);
  }
  const v4 = parseIPv4(text);
  return v4 !== undefined && isPrivateV4(v4);
}

/** Whether `host` is an IP address in any spelling (`isIP` knows only the canonical ones). */
export function isAddressLiteral(host: string): boolean {
  const text = host.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  return isIP(text) !== 0 || (text.includes(':') ? parseIPv6(text.toLowerCase()) !== undefined : parseIPv4(text.toLowerCase()) !== undefined);
}

function isPrivateV4(ip: number): boolean {
  const a = ip >>> 24;
  const b = (ip >>> 16) & 0xff;
  const c = (ip >>> 8) & 0xff;
  return (
    a === 0 || // "this network", unspecified
    a === 10 ||
    a === 127 ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    a >= 224 || // multicast, reserved, broadcast
    (a === 192 && b === 0 && c === 2) || // documentation (TEST-NET-1/2/3)
    (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113)
  );
}

function isPrivateV6(g: readonly number[]): boolean {
  const v4At = (i: number): number => (((g[i] as number) << 16) | (g[i + 1] as number)) >>> 0;
  const zeroUpTo = (n: number): boolean => g.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(8)) return true; // ::
  if (zeroUpTo(7) && g[7] === 1) return true; // ::1
  if (zeroUpTo(5) && g[5] === 0xffff) return isPrivateV4(v4At(6)); // IPv4-mapped
  if (zeroUpTo(6)) return isPrivateV4(v4At(6)); // IPv4-compatible (deprecated)
  if (zeroUpTo(4) && g[4] === 0xffff && g[5] === 0) return isPrivateV4(v4At(6)); // SIIT
  if (g[0] === 0x64 && g[1] === 0xff9b) {
    if (g[2] === 1) return true; // 64:ff9b:1::/48, local-use NAT64
    if (g.slice(2, 6).every((x) => x === 0)) return isPrivateV4(v4At(6)); // well-known NAT64 prefix
  }
  if (g[0] === 0x2002) return isPrivateV4(v4At(1)); // 6to4
  if (g[0] === 0x2001 && g[1] === 0) return isPrivateV4(~v4At(6) >>> 0); // Teredo: the client's address, inverted
  const first = g[0] as number;
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80 || (first & 0xffc0) === 0xfec0 || (first & 0xff00) === 0xff00;
}

/** IPv4 as the WHATWG URL parser and inet_aton read it: 1–4 parts, each decimal, 0-octal or 0x-hex. */
function parseIPv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.at(-1) === '') parts.pop();
  if (parts.length === 0 || parts.length > 4) return undefined;
  const numbers: number[] = [];
  for (const part of parts) {
    let value: number;
    if (/^0x[0-9a-f]*$/.test(part)) value = part.length === 2 ? 0 : parseInt(part.slice(2), 16);
    else if (/^0[0-7]+$/.test(part)) value = parseInt(part.slice(1), 8);
    else if (/^(0|[1-9]\d*)$/.test(part)) value = Number(part);
    else return undefined;
    if (!Number.isSafeInteger(value)) return undefined;
    numbers.push(value);
  }
  const last = numbers.pop() as number;
  if (numbers.some((n) => n > 255) || last >= 256 ** (4 - numbers.length)) return undefined;
  return (numbers.reduce((acc, n, i) => acc + n * 256 ** (3 - i), 0) + last) >>> 0;
}

/** Eight 16-bit groups, or undefined when `text` is not an IPv6 address. */
function parseIPv6(text: string): number[] | undefined {
  let body = text;
  const tail: number[] = [];
  const lastColon = body.lastIndexOf(':');
  if (body.slice(lastColon + 1).includes('.')) {
    const v4 = /^\d{1,3}(\.\d{1,3}){3}$/.test(body.slice(lastColon + 1)) ? parseIPv4(body.slice(lastColon + 1)) : undefined;
    if (v4 === undefined) return undefined;
    tail.push(v4 >>> 16, v4 & 0xffff);
    body = `${body.slice(0, lastColon + 1)}${lastColon > 0 && body[lastColon - 1] === ':' ? '' : '0'}`;
    // `::1.2.3.4` → `::` + tail; `a::b:1.2.3.4` → `a::b:0` then the placeholder is dropped below.
    if (body.endsWith(':0') && !body.endsWith('::0')) body = body.slice(0, -2);
  }
  const halves = body.split('::');
  if (halves.length > 2) return undefined;
  const read = (half: string): number[] | undefined => {
    if (half === '') return [];
    const out: number[] = [];
    for (const group of half.split(':')) {
      if (!/^[0-9a-f]{1,4}$/.test(group)) return undefined;
      out.push(parseInt(group, 16));
    }
    return out;
  };
  const head = read(halves[0] as string);
  const rest = halves.length === 2 ? read(halves[1] as string) : [];
  if (head === undefined || rest === undefined) return undefined;
  const known = head.length + rest.length + tail.length;
  if (halves.length === 1 ? known !== 8 : known > 7) return undefined;
  return [...head, ...new Array<number>(8 - known).fill(0), ...rest, ...tail];
}
