import { describe, expect, it } from 'vitest';
import { isAddressLiteral, isPrivateAddress } from '../../src/invocation/private-address.js';

describe('isPrivateAddress normalises every IP form before deciding (issue 23, point 4)', () => {
  it.each([
    ['127.0.0.1', true],
    ['::ffff:127.0.0.1', true],
    ['::ffff:7f00:1', true],
    ['[::ffff:7f00:1]', true],
    ['0:0:0:0:0:ffff:127.0.0.1', true],
    ['::ffff:0:127.0.0.1', true],
    ['::127.0.0.1', true],
    ['::7f00:1', true],
    ['64:ff9b::7f00:1', true],
    ['64:ff9b::10.0.0.1', true],
    ['64:ff9b:1::1', true],
    ['64:ff9b::8.8.8.8', false],
    ['2002:7f00:1::', true],
    ['2002:808:808::1', false],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', true],
    ['fe80::1%eth0', true],
    ['2130706433', true],
    ['0177.0.0.1', true],
    ['0x7f.1', true],
    ['127.1', true],
    ['10.1', true],
    ['169.254.169.254', true],
    ['::ffff:a9fe:a9fe', true],
    ['224.0.0.1', true],
    ['8.8.8.8', false],
    ['::ffff:8.8.8.8', false],
    ['2606:4700::1111', false],
    ['::', true],
    ['::1', true],
    ['fc00::1', true],
    ['ff02::1', true],
  ])('%s → %s', (address, expected) => {
    expect(isPrivateAddress(address)).toBe(expected);
  });

  it('tells address literals from names', () => {
    for (const literal of ['127.1', '2130706433', '0x7f.1', '::ffff:7f00:1', '[::1]']) expect(isAddressLiteral(literal)).toBe(true);
    for (const name of ['example.com', 'localhost', '1.2.3.4.5', 'a:b:c']) expect(isAddressLiteral(name)).toBe(false);
  });
});
