// Node workload for bench/run.sh: V8 heap growth and garbage collection
// (mmap/munmap/madvise of heap pages, mprotect of JIT code) and large
// Buffers outside the heap.
const rounds = Number(process.argv[2] || 5);
let total = 0;
for (let r = 0; r < rounds; r++) {
	const objs = [];
	for (let i = 0; i < 200000; i++)
		objs.push({ i, s: 'x' + i, a: [i, i * 2] });
	const m = new Map(objs.map((o) => [o.s, o]));
	total += m.size + objs.filter((o) => o.i % 3 === 0).length;
	const bufs = [];
	for (let k = 0; k < 40; k++)
		bufs.push(Buffer.alloc(1 << 20, k));
	total += bufs.reduce((t, b) => t + b[4096], 0);
}
console.log(total);
