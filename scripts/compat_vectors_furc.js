// mcrouter's furc_hash (mcrouter/lib/fbi/hash.c), written from its source for
// scripts/compat_vectors.py, over npm's murmurhash-native (MurmurHash64A, not ringslot's).
// Input on stdin: JSON {"keys": [...], "sizes": [n, ...]}; output: JSON {"hash0": [hex...],
// "index": {n: [index per key]}}.
const mm = require(process.env.MURMURHASH_NATIVE || 'murmurhash-native');
const SEED = 4193360111;
const SHIFT = 23n;
const rehash = (h) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(h);
  return BigInt('0x' + mm.murmurHash64x64(b, SEED, 'hex'));
};
const furc = (key, m) => {
  if (m <= 1) return 0;
  const words = [BigInt('0x' + mm.murmurHash64x64(Buffer.from(key), SEED, 'hex'))];
  const bit = (idx) => {
    const ord = Number(idx >> 6n);
    while (words.length <= ord) words.push(rehash(words[words.length - 1]));
    return Number((words[ord] >> (idx & 63n)) & 1n);
  };
  let d = 0n;
  while (BigInt(m) > (1n << d)) d++;
  let a = d;
  for (let t = 0; t < 32; t++) {
    while (!bit(a)) {
      d--;
      if (d === 0n) return 0;
      a = d;
    }
    a += SHIFT;
    let num = 1;
    for (let i = 0n; i < d - 1n; i++) {
      num = (num * 2) | bit(a);
      a += SHIFT;
    }
    if (num < m) return num;
  }
  return 0;
};
let input = '';
process.stdin.on('data', (c) => (input += c));
process.stdin.on('end', () => {
  const { keys, sizes } = JSON.parse(input);
  const out = { hash0: keys.map((k) => mm.murmurHash64x64(Buffer.from(k), SEED, 'hex')), index: {} };
  for (const n of sizes) out.index[n] = keys.map((k) => furc(k, n));
  process.stdout.write(JSON.stringify(out));
});
