// Churn program: node building arrays of objects, Maps, strings and typed
// arrays, pausing (timers) while they may be evicted, then hashing them.
//   node objects.js [ROUNDS] [N]
'use strict';
const crypto = require('crypto');

const rounds = Number(process.argv[2] || 20);
const n = Number(process.argv[3] || 150000);

let x = 12345;
function rnd() {
  x = (Math.imul(x, 1103515245) + 12345) >>> 0;
  return x >>> 8;
}

function build(r) {
  const objs = [];
  const map = new Map();
  const f64 = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const v = rnd();
    objs.push({ i, v, s: 'o' + v.toString(36) + ':' + r });
    if (i % 3 === 0) map.set('k' + i, v * r);
    f64[i] = v / (i + 1);
  }
  return { objs, map, f64 };
}

function digest(d) {
  const h = crypto.createHash('sha256');
  for (let i = 0; i < d.objs.length; i += 5) h.update(d.objs[i].s + d.objs[i].v);
  for (const [k, v] of d.map) if (v % 7 === 0) h.update(k + '=' + v);
  h.update(Buffer.from(d.f64.buffer));
  return h.digest('hex').slice(0, 16);
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

(async () => {
  const keep = build(0);
  const keepHash = digest(keep);
  for (let r = 1; r <= rounds; r++) {
    const d = build(r);
    const first = digest(d);
    await sleep(20 + (r % 4) * 15);
    const second = digest(d);
    const k = digest(keep);
    console.log(`round ${r}: ${first} ${first === second ? 'same' : 'CHANGED ' + second} ` +
      `keep ${k === keepHash ? 'same' : 'CHANGED ' + k}`);
  }
  console.log('done');
})();
