// Allocations made in a JavaScript function of its own, for the node heap test (node --perf-basic-prof,
// fxprof record --heap=full): ROUNDS calls (argv[2], default 200) of fxprofMakeBuffers, each allocating 200
// Buffers (node's allocator: malloc), so that V8 compiles it.
function fxprofMakeBuffers(n) {
  const kept = [];
  for (let i = 0; i < n; i++) kept.push(Buffer.allocUnsafeSlow(8192 + (i & 63)));
  return kept.length;
}
let made = 0;
for (let round = Number(process.argv[2] || 200); round > 0; round--) made += fxprofMakeBuffers(200);
console.log(`made ${made}`);
